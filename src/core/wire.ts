/**
 * The HTTP API speaks snake_case JSON (the seeds' contract); the library speaks camelCase with Dates.
 * Rather than keep a second, hand-written copy of every schema for the wire, the HTTP schemas are
 * derived from the library's TypeBox schemas here, and values are converted by walking the same
 * schema, so the two cannot drift apart:
 *
 * - `wireSchema(schema)`: the same schema with object property names in snake_case and Dates as
 *   ISO-8601 strings (`format: date-time`). Used for route validation and the OpenAPI document.
 * - `fromWire(schema, value)`: a wire value (already valid against `wireSchema(schema)`) as the
 *   library value: keys in camelCase, date-time strings as Dates.
 * - `toWire(schema, value)`: a library value as its wire value (the reverse).
 *
 * Only property names the schema declares are renamed. JSON the user owns (params, checkpoints,
 * results, metadata, params schemas: `Unknown` and string-keyed `Record` schemas) passes through
 * untouched, as do the keys of records keyed by data (task types in counts). Names convert with
 * digits as words of their own: `for1Hour` ⇄ `for_1_hour`, `last24Hours` ⇄ `last_24_hours`.
 */
import { LIBRARY_VOCABULARY, type Listing } from "./errors.js";
import { FormatRegistry, Kind, type TSchema } from "./typebox.js";

/**
 * Names are converted on every request and answer, for every field: remembered (a few hundred
 * schema names in practice; bounded, since request keys are the caller's).
 */
function memo(convert: (name: string) => string): (name: string) => string {
  const known = new Map<string, string>();
  return (name) => {
    let converted = known.get(name);
    if (converted === undefined) {
      if (known.size >= 10_000) known.clear();
      converted = convert(name);
      known.set(name, converted);
    }
    return converted;
  };
}

/** `workerId` → `worker_id`, `for1Hour` → `for_1_hour`. */
export const toSnake = memo((name) =>
  name
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .replace(/([A-Za-z])(\d)/g, "$1_$2")
    .toLowerCase(),
);

/** `worker_id` → `workerId`, `for_1_hour` → `for1Hour`. */
export const toCamel = memo((name) => name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase()));

/** RFC 3339 date-time, as `Date.prototype.toISOString()` writes it (any offset accepted). */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;
/** Date.parse rolls a day past the month's end over (2030-02-30 is March 2) and reads 24:00 as the next midnight: refused, not moved. */
const isCalendarTime = (s: string) => new Date(`${s.slice(0, 10)}T00:00:00Z`).toISOString().slice(0, 10) === s.slice(0, 10) && Number(s.slice(11, 13)) < 24;
export const isDateTime = (s: string) => DATE_TIME.test(s) && !Number.isNaN(Date.parse(s)) && isCalendarTime(s);
// Registered with the wire schemas, so whatever compiles them (the server's validator) knows the format.
if (!FormatRegistry.Has("date-time")) FormatRegistry.Set("date-time", isDateTime);

type Schema = TSchema & Record<string | symbol, unknown>;
const kindOf = (s: TSchema) => (s as Schema)[Kind] as string | undefined;

/** The schema as the wire sees it: snake_case property names, Dates as date-time strings. */
export function wireSchema<T extends TSchema>(schema: T): TSchema {
  const s = schema as Schema;
  switch (kindOf(schema)) {
    case "Object": {
      const properties = Object.fromEntries(Object.entries(s.properties as Record<string, TSchema>).map(([k, v]) => [toSnake(k), wireSchema(v)]));
      const out: Schema = { ...s, properties };
      if (Array.isArray(s.required)) out.required = (s.required as string[]).map(toSnake);
      if (typeof s.additionalProperties === "object") out.additionalProperties = wireSchema(s.additionalProperties as TSchema);
      // Over HTTP no object takes fields it does not name. The library lets some through (a claimed
      // task stands for its own lease); a request's nested lease with a stray field is refused.
      else if (s.additionalProperties === undefined) out.additionalProperties = false;
      return out;
    }
    case "Date": {
      // The date range has no JSON Schema keyword: the library's own check applies it once converted.
      const out: Schema = { ...s, [Kind]: "String", type: "string", format: "date-time" };
      for (const key of ["minimumTimestamp", "maximumTimestamp", "exclusiveMinimumTimestamp", "exclusiveMaximumTimestamp"]) delete out[key];
      return out;
    }
    case "Array":
      return { ...s, items: wireSchema(s.items as TSchema) } as TSchema;
    case "Union":
      return { ...s, anyOf: (s.anyOf as TSchema[]).map(wireSchema) } as TSchema;
    case "Intersect":
      // Its parts' properties would need merging on the way in and out: compose with Type.Composite instead.
      throw new Error("wireSchema: use Type.Composite rather than Type.Intersect");
    case "Record": {
      // Keys are data (task types, JSON keys): only the values' schema changes.
      const patterns = s.patternProperties as Record<string, TSchema>;
      return { ...s, patternProperties: Object.fromEntries(Object.entries(patterns).map(([p, v]) => [p, wireSchema(v)])) } as TSchema;
    }
    default:
      return schema;
  }
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);

/** The variant of a union a value belongs to, for the kinds conversion cares about. */
function variantOf(variants: TSchema[], value: unknown, direction: Direction): TSchema | undefined {
  if (value instanceof Date || (direction === "in" && typeof value === "string")) {
    const date = variants.find((v) => kindOf(v) === "Date");
    if (date || value instanceof Date) return date;
  }
  if (Array.isArray(value)) return variants.find((v) => kindOf(v) === "Array");
  if (isPlainObject(value)) return variants.find((v) => ["Object", "Record", "Intersect"].includes(kindOf(v) ?? ""));
  return undefined;
}

/** A wire value as the library value: camelCase keys the schema declares, Dates from date-time strings. */
export function fromWire<T = unknown>(schema: TSchema, value: unknown): T {
  return converter(schema, "in")(value) as T;
}

/** A library value as its wire value: snake_case keys, Dates as ISO-8601 strings; keys the schema does not declare are left out. */
export function toWire(schema: TSchema, value: unknown): unknown {
  return converter(schema, "out")(value);
}

type Direction = "in" | "out";
type Converter = (value: unknown) => unknown;
const unchanged: Converter = (value) => value;

/**
 * Every request and answer is converted, so each schema's walk is worked out once (its fields'
 * names and their converters) and kept with the schema: walking the schema afresh for every value
 * was the largest cost of the server's own code in a CPU profile of `bench:http`.
 */
const converters: Record<Direction, WeakMap<TSchema, Converter>> = { in: new WeakMap(), out: new WeakMap() };

function converter(schema: TSchema, direction: Direction): Converter {
  let convert = converters[direction].get(schema);
  if (convert === undefined) {
    const build = buildConverter(schema as Schema, direction);
    convert = build === unchanged ? unchanged : (value) => (value === undefined || value === null ? value : build(value));
    converters[direction].set(schema, convert);
  }
  return convert;
}

function buildConverter(s: Schema, direction: Direction): Converter {
  switch (kindOf(s)) {
    case "Object": {
      const properties = Object.entries(s.properties as Record<string, TSchema>).map(([name, sub]) => ({ name, wire: toSnake(name), convert: converter(sub, direction) }));
      if (direction === "out") {
        return (value) => {
          if (!isPlainObject(value)) return value;
          const out: Record<string, unknown> = {};
          for (const { name, wire, convert } of properties) {
            const item = value[name];
            if (item !== undefined) out[wire] = convert(item);
          }
          return out;
        };
      }
      const declared = new Map(properties.map((p) => [p.name, p]));
      return (value) => {
        if (!isPlainObject(value)) return value;
        const out: Record<string, unknown> = {};
        for (const key of Object.keys(value)) {
          const property = declared.get(toCamel(key));
          // An undeclared key was allowed by the schema (or refused before): it keeps its name.
          if (property) out[property.name] = property.convert(value[key]);
          else out[key] = value[key];
        }
        return out;
      };
    }
    case "Date":
      return direction === "out" ? (value) => (value instanceof Date ? value.toISOString() : value) : (value) => (typeof value === "string" ? new Date(value) : value);
    case "Array": {
      const item = converter(s.items as TSchema, direction);
      return item === unchanged ? unchanged : (value) => (Array.isArray(value) ? value.map(item) : value);
    }
    case "Union": {
      const variants = s.anyOf as TSchema[];
      return (value) => {
        const variant = variantOf(variants, value, direction);
        return variant ? converter(variant, direction)(value) : value;
      };
    }
    case "Record": {
      const [sub] = Object.values(s.patternProperties as Record<string, TSchema>);
      const convert = converter(sub, direction);
      if (convert === unchanged) return unchanged;
      return (value) => {
        if (!isPlainObject(value)) return value;
        const out: Record<string, unknown> = {};
        for (const key of Object.keys(value)) out[key] = convert(value[key]);
        return out;
      };
    }
    default:
      return unchanged;
  }
}

/** Fields whose value is the user's JSON: a path goes on unchanged past them (`params.storeId` stays). */
const JSON_FIELDS = new Set(["params", "checkpoint", "result", "metadata", "paramsSchema", "data"]);

/** How many of a path's segments name fields: up to the first field of the user's JSON, whose keys follow. */
function fieldCount(segments: string[]): number {
  const json = segments.findIndex((segment) => JSON_FIELDS.has(toCamel(segment)));
  return json < 0 ? segments.length : json + 1;
}

/** `path` with each field's name passed through `rename`, up to the first field of the user's JSON, whose keys stay as they are. */
function renamePath(path: string, rename: (name: string) => string): string {
  const segments = path.split(".");
  const fields = fieldCount(segments);
  return [...segments.slice(0, fields).map(rename), ...segments.slice(fields)].join(".");
}

/** A wire field path (`follow_ups.0.task_type`) as the library names it (`followUps.0.taskType`; `params.store_id` stays). */
export const libraryPath = (path: string): string => renamePath(path, toCamel);

/** A library field path (`followUps.0.taskType`) as the wire names it (`follow_ups.0.task_type`; `params.storeId` stays). */
export const wirePath = (path: string): string => renamePath(path, toSnake);

/** A name in a message, dotted or not (`fan_out.keys.0`, `maxAttempts`): not the end of a longer one, nor the start of a quoted value (`(got "max_attempts")`). */
const NAME = /(?<![\w."])[A-Za-z_]\w*(?:\.\w+)*/g;

/**
 * A validation message with the fields it names passed through `rename` (`wirePath`, `libraryPath`),
 * so that it names them as its issues' paths then do. A name is taken for a field when it starts with
 * a field of one of `paths`: a message names a field whole (`fan_out.keys.0.params.storeId`), by a
 * part (`fan_out.keys.0`, `batch_interval_seconds`) or as a batch item has it (`item 1: …:
 * maxAttempts:`). The keys of the user's JSON keep their names, as in the paths.
 */
export function renameFields(message: string, paths: readonly string[], rename: (path: string) => string): string {
  const fields = new Set(paths.flatMap((path) => {
    const segments = path.split(".");
    return segments.slice(0, fieldCount(segments));
  }));
  return message.replace(NAME, (name) => (fields.has(name.split(".", 1)[0]) ? rename(name) : name));
}

/** The routes that list what a refusal names (Vocabulary.listing over HTTP). */
export const WIRE_LISTINGS: Record<Listing, string> = { workers: "GET /api/workers", schedules: "GET /api/schedules" };

/** A server's message pointing to its listing routes, pointing where the library's callers look instead (the CLI's commands). */
export function libraryListings(message: string): string {
  return (Object.keys(WIRE_LISTINGS) as Listing[]).reduce((text, what) => text.replaceAll(WIRE_LISTINGS[what], LIBRARY_VOCABULARY.listing(what)), message);
}
