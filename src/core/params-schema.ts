import { createRequire } from "node:module";
import type { Ajv, ErrorObject, ValidateFunction } from "ajv";
import { RE2JS } from "re2js";
import { type FieldIssue, ValidationError } from "./errors.js";
import type { JsonObject } from "./task.js";
import type { TaskTypeRecord } from "./task-type.js";
import { invalidMessage, MAX_ISSUES } from "./validation.js";

/**
 * Params schemas are JSON Schema draft-07, checked by Ajv. Strict mode refuses unknown keywords, so a
 * typo such as `requird` fails registration instead of silently validating nothing; the standard
 * formats (date-time, email, uri, uuid, ...) are known. A check stops at the first fault (Ajv's
 * allErrors off, as its security notes advise for untrusted data): with every fault collected, a
 * failing anyOf of 1,000 branches over 40,000 items built an error per branch per item, and the
 * server ran out of memory. One instance serves every store: compiling is
 * synchronous and each schema is removed from Ajv's registry right after, so `$id`s of different
 * versions never collide and Ajv keeps no reference to them.
 *
 * Made at the first schema compiled, not at import: Ajv and its formats are about 70 modules, 40 ms
 * of a process's start, and most processes never compile a schema (the CLI's commands, a worker whose
 * types have none). Compiling is synchronous, hence require() rather than import().
 */
let ajv: Ajv | undefined;
function schemaCompiler(): Ajv {
  if (ajv !== undefined) return ajv;
  const require = createRequire(import.meta.url);
  const { Ajv } = require("ajv") as typeof import("ajv");
  const addFormats = require("ajv-formats") as typeof import("ajv-formats");
  ajv = new Ajv({ allErrors: false, strict: true, strictTypes: false, strictTuples: false, code: { regExp: re2() } });
  addFormats.default(ajv);
  return ajv;
}

/**
 * Ajv's patterns matched by RE2 (re2js, in JavaScript): in time linear in the text, whatever the
 * pattern. With the JavaScript engine, which backtracks, a pattern a producer registered could hold
 * the server for as long as it liked: `^(\w|\d)+$` took 30 s on 32 characters and `\s+$` grows with
 * the square of the text (2.6 s on 50 KB), and no static check catches them all (safe-regex2, used
 * before, passed both). RE2 has no lookaround and no backreferences: such a pattern is refused at
 * registration, saying so.
 */
function re2() {
  const engine = (pattern: string) => {
    const compiled = RE2JS.compile(inRe2Spelling(pattern));
    // Ajv keeps one compiled pattern per toString() for the life of the instance.
    return { test: (text: string) => compiled.matcher(text).find(), toString: () => `/${pattern}/ (RE2)` };
  };
  // `code` names the engine in standalone code, which taskpool does not generate.
  return Object.assign(engine, { code: "re2js" });
}

/** What JavaScript's \s matches (ECMA-262 WhiteSpace and LineTerminator); RE2's is ASCII only. */
const JS_SPACE = "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";
const SURROGATE_PAIR = /\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})/iy;
const CODE_POINT = /\\u\{([0-9a-f]+)\}|\\u([0-9a-f]{4})/iy;

/**
 * A pattern written for JavaScript (as JSON Schema's are) spelled so that RE2 matches what JavaScript
 * would: `\uXXXX`, `\u{…}` and a surrogate pair's two escapes as one `\x{…}`; `\s` and `\S` with
 * JavaScript's Unicode whitespace; `.` not matching \r, U+2028 or U+2029 either. Read as written
 * otherwise; what RE2 cannot read is refused when the type is registered (slowCheck).
 */
function inRe2Spelling(pattern: string): string {
  let out = "";
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") {
      SURROGATE_PAIR.lastIndex = i;
      const pair = SURROGATE_PAIR.exec(pattern);
      if (pair) {
        const codePoint = 0x10000 + ((parseInt(pair[1], 16) - 0xd800) << 10) + (parseInt(pair[2], 16) - 0xdc00);
        out += `\\x{${codePoint.toString(16)}}`;
        i += pair[0].length - 1;
        continue;
      }
      CODE_POINT.lastIndex = i;
      const escape = CODE_POINT.exec(pattern);
      if (escape) {
        out += `\\x{${escape[1] ?? escape[2]}}`;
        i += escape[0].length - 1;
        continue;
      }
      const next = pattern[i + 1] ?? "";
      if (next === "s") out += inClass ? JS_SPACE : `[${JS_SPACE}]`;
      else if (next === "S" && !inClass) out += `[^${JS_SPACE}]`;
      else out += c + next;
      i++;
    } else if (inClass) {
      if (c === "]") inClass = false;
      out += c;
    } else if (c === "[") {
      inClass = true;
      out += c;
    } else out += c === "." ? "[^\\n\\r\\x{2028}\\x{2029}]" : c;
  }
  return out;
}

/**
 * Compiles a params schema; throws ValidationError saying what is wrong with an invalid one.
 * `registering`: also refuses a schema whose check may apply too many of its parts to one value
 * (see costlyCheck). Schemas registered before that check stay usable.
 */
export function compileParamsSchema(schema: JsonObject, typeName: string, { registering = false } = {}): ValidateFunction {
  const refused = (message: string) => new ValidationError(`Invalid params schema for ${typeName}: ${message}`, [{ path: "paramsSchema", message }]);
  const slow = slowCheck(schema, "paramsSchema");
  if (slow !== null) throw new ValidationError(`Invalid params schema for ${typeName}: ${slow.message}`, [slow]);
  const costly = registering ? costlyCheck(schema) : null;
  if (costly !== null) throw refused(costly);
  const compiler = schemaCompiler();
  let validate: ValidateFunction;
  try {
    validate = compiler.compile(schema);
  } catch (error) {
    throw refused(error instanceof Error ? error.message : String(error));
  } finally {
    compiler.removeSchema(schema);
  }
  // Params are a JSON object: a schema of another type (Ajv has checked the names) would refuse every task.
  const types = typeof schema.type === "string" ? [schema.type] : Array.isArray(schema.type) ? schema.type : null;
  if (types !== null && !types.includes("object")) {
    throw refused(`its type is ${JSON.stringify(schema.type)}, and params are always a JSON object, so it would refuse every task; use type: "object" and describe the fields under properties`);
  }
  // `{"$ref": "#"}` compiles, then recurses until the stack runs out on every value checked, and each
  // enqueue of the type answered 500. A schema that recurses on an empty object is refused here.
  if (outcome(validate, {}) === "endless") throw refused("it refers to itself before checking anything (a $ref that reaches itself), so checking any params would never end");
  return validate;
}

const SCALAR_TYPES = new Set(["string", "number", "integer", "boolean", "null"]);

/**
 * The first part of a schema whose check could hold the process for seconds on params within the size
 * limit, or that RE2 cannot run, or null. Params are checked on the server's (or the producer's) event
 * loop, so one such enqueue stalled every request: uniqueItems over items of no single scalar type,
 * which Ajv checks by comparing every pair (20,000 small arrays took 1.7 s; 1 MiB of them would take
 * about a minute). Over scalar items it uses a hash (50,000 integers in 3.5 ms). Patterns run on RE2
 * (re2(), above).
 */
function slowCheck(node: unknown, path: string): FieldIssue | null {
  if (typeof node !== "object" || node === null) return null;
  if (Array.isArray(node)) {
    for (const [i, item] of node.entries()) {
      const found = slowCheck(item, `${path}.${i}`);
      if (found) return found;
    }
    return null;
  }
  const schema = node as Record<string, unknown>;
  const patterns = [
    ...(typeof schema.pattern === "string" ? [[`${path}.pattern`, schema.pattern]] : []),
    ...(typeof schema.patternProperties === "object" && schema.patternProperties !== null
      ? Object.keys(schema.patternProperties).map((p) => [`${path}.patternProperties`, p])
      : []),
  ];
  for (const [at, pattern] of patterns) {
    try {
      new RegExp(pattern as string, "u");
    } catch (error) {
      return { path: at, message: `the pattern ${JSON.stringify(pattern)} is no regular expression: ${(error as Error).message}` };
    }
    try {
      RE2JS.compile(inRe2Spelling(pattern as string));
    } catch (error) {
      return {
        path: at,
        message: `the pattern ${JSON.stringify(pattern)} is not one this server runs (${(error as Error).message}): patterns are matched by RE2, in time linear in the text, which lacks some of JavaScript's syntax: lookahead, lookbehind, backreferences, \\c escapes, [^] and long Unicode property names (\\p{Letter}; write \\p{L})`,
      };
    }
  }
  if (schema.uniqueItems === true) {
    const items = schema.items as { type?: unknown } | undefined;
    if (typeof items?.type !== "string" || !SCALAR_TYPES.has(items.type)) {
      return {
        path: `${path}.uniqueItems`,
        message: "uniqueItems needs items of one scalar type (items: { type: \"string\" }, or number, integer, boolean): over other items every pair is compared, which takes seconds for a few thousand",
      };
    }
  }
  for (const [key, value] of Object.entries(schema)) {
    // Property names and enum or const values are data, not schemas.
    if (key === "enum" || key === "const" || key === "examples" || key === "default") continue;
    const found = slowCheck(value, `${path}.${key}`);
    if (found) return found;
  }
  return null;
}

/**
 * The most schema parts a check may apply to one value of the params (a part's enum counts a tenth
 * of its length more). Ajv applies each part the schema reaches a value through: a $ref, every
 * branch of an anyOf (when the earlier ones fail), items and properties on to the children. Where
 * two ways lead to one part, it is applied twice, and where that happens inside a recursion, twice
 * more at each level: `{"anyOf": [B, B]}` with B an array whose items $ref back was 20 levels of
 * params deep in 4.6 s, 40 levels in minutes (the server's event loop held all that time).
 */
const MAX_APPLICATIONS = 100;
/** How many different sets of parts the analysis follows before it gives up on a schema. */
const MAX_ANALYSED = 10_000;

type Schema = Record<string, unknown>;
/** The parts one value's check applies, with how many times each. */
type Applied = Map<Schema, number>;

/**
 * Why checking params against `root` could cost too much, or null. It follows the parts applied to
 * each value of possible params: from a set of parts applied to a value, the sets applied to each
 * child (a property by name, any other property, an array's item by index, any other item, a property
 * name), until no new set comes, refusing as soon as a set applies more than MAX_APPLICATIONS. Only
 * local $refs (`#`, `#/definitions/…`) are followed; another kind is refused, since the analysis cannot
 * see where it leads. An overestimate where schemas overlap (a patternProperties schema counts for
 * every property), never an underestimate.
 */
function costlyCheck(root: Schema): string | null {
  const closures = new Map<Schema, Applied>();
  const onStack = new Set<Schema>();
  const fault: { message: string | null } = { message: null };
  const tooMany = `a check may apply more than ${MAX_APPLICATIONS} of its parts to one value (an anyOf or oneOf of many branches, an enum of many values, or two ways to one part inside a recursion, which doubles at every level of the params), and params are checked on the server's event loop: use enum for a list of constants, or write the schema with fewer branches`;

  /** The parts applied to a value that `node` is applied to (itself, its $ref, its branches, ...). */
  const closure = (node: unknown): Applied => {
    const applied: Applied = new Map();
    if (typeof node !== "object" || node === null || Array.isArray(node) || fault.message !== null) return applied;
    const schema = node as Schema;
    const known = closures.get(schema);
    if (known) return known;
    if (onStack.has(schema)) {
      fault.message = "it refers to itself before checking anything (a $ref that reaches itself through no property or item), so checking some params would never end";
      return applied;
    }
    onStack.add(schema);
    applied.set(schema, 1);
    for (const part of sameValueParts(schema)) {
      if (part === UNFOLLOWED) {
        fault.message = `its $ref ${JSON.stringify(schema.$ref)} is not a local JSON pointer ("#" or "#/definitions/…"): only those are allowed, so that its cost can be checked`;
        break;
      }
      add(applied, closure(part), 1);
    }
    onStack.delete(schema);
    if (weight(applied) > MAX_APPLICATIONS) fault.message ??= tooMany;
    closures.set(schema, applied);
    return applied;
  };

  const resolve = (ref: string): unknown => {
    if (ref === "#") return root;
    if (!ref.startsWith("#/")) return UNFOLLOWED;
    let at: unknown = root;
    for (const raw of ref.slice(2).split("/")) {
      let key: string;
      try {
        key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
      } catch {
        return undefined; // a bad %-escape: Ajv refuses the $ref, saying so
      }
      at = typeof at === "object" && at !== null ? (at as Record<string, unknown>)[key] : undefined;
    }
    return at;
  };

  const sameValueParts = (schema: Schema): unknown[] => [
    ...(typeof schema.$ref === "string" ? [resolve(schema.$ref)] : []),
    ...["allOf", "anyOf", "oneOf"].flatMap((k) => (Array.isArray(schema[k]) ? (schema[k] as unknown[]) : [])),
    ...["not", "if", "then", "else"].map((k) => schema[k]),
    ...(isObject(schema.dependencies) ? Object.values(schema.dependencies).filter((d) => !Array.isArray(d)) : []),
  ];

  const start = closure(root);
  const seen = new Set<string>();
  const queue: Applied[] = [start];
  const ids = new Map<Schema, number>();
  const keyOf = (applied: Applied) =>
    [...applied].map(([schema, n]) => `${ids.get(schema) ?? ids.set(schema, ids.size).get(schema)}:${n}`).sort().join(",");
  seen.add(keyOf(start));
  while (queue.length > 0 && fault.message === null) {
    if (seen.size > MAX_ANALYSED) return `it is too intricate to tell how much a check costs (more than ${MAX_ANALYSED} combinations of its parts); write it with fewer branches and $refs`;
    const applied = queue.shift()!;
    for (const child of childSets(applied, closure)) {
      if (fault.message !== null) break;
      if (child.size === 0) continue;
      if (weight(child) > MAX_APPLICATIONS) return tooMany;
      const key = keyOf(child);
      if (seen.has(key)) continue;
      seen.add(key);
      queue.push(child);
    }
  }
  return fault.message;
}

/** A $ref the cost analysis cannot follow. */
const UNFOLLOWED = Symbol("unfollowed");

const isObject = (value: unknown): value is Schema => typeof value === "object" && value !== null && !Array.isArray(value);

/** A set's cost: each part once per application, and a tenth of its enum's length more. */
function weight(applied: Applied): number {
  let total = 0;
  for (const [schema, n] of applied) total += n * (1 + (Array.isArray(schema.enum) ? Math.floor(schema.enum.length / 10) : 0));
  return total;
}

function add(into: Applied, from: Applied, times: number): void {
  for (const [schema, n] of from) into.set(schema, (into.get(schema) ?? 0) + n * times);
}

/** The sets of parts applied to each kind of child of a value that `applied` is applied to. */
function childSets(applied: Applied, closure: (node: unknown) => Applied): Applied[] {
  const names = new Set<string>();
  let tuple = 0;
  for (const schema of applied.keys()) {
    if (isObject(schema.properties)) for (const name of Object.keys(schema.properties)) names.add(name);
    if (Array.isArray(schema.items)) tuple = Math.max(tuple, schema.items.length);
  }
  /** The parts applied to one child: `parts` picks, from each schema applied to the value, those applied to that child. */
  const child = (parts: (schema: Schema) => unknown[]): Applied => {
    const out: Applied = new Map();
    for (const [schema, n] of applied) for (const part of parts(schema)) add(out, closure(part), n);
    return out;
  };
  const patterns = (schema: Schema) => (isObject(schema.patternProperties) ? Object.values(schema.patternProperties) : []);
  const property = (name: string | null) => (schema: Schema) => {
    const declared = name !== null && isObject(schema.properties) && Object.hasOwn(schema.properties, name);
    return [...(declared ? [(schema.properties as Schema)[name]] : [schema.additionalProperties]), ...patterns(schema)];
  };
  const item = (index: number | null) => (schema: Schema) => {
    const tupled = Array.isArray(schema.items);
    const own = tupled ? (index !== null && index < (schema.items as unknown[]).length ? [(schema.items as unknown[])[index]] : [schema.additionalItems]) : [schema.items];
    return [...own, schema.contains];
  };
  return [
    ...[...names].map((name) => child(property(name))),
    child(property(null)),
    child((schema) => [schema.propertyNames]),
    ...Array.from({ length: tuple }, (_, i) => child(item(i))),
    child(item(null)),
  ];
}

/** Whether `value` passes, or "endless" when checking it overflows the stack (a schema that refers to itself before it checks anything). */
function outcome(validate: ValidateFunction, value: unknown): boolean | "endless" {
  try {
    return validate(value);
  } catch (error) {
    if (error instanceof RangeError) return "endless";
    throw error;
  }
}

/**
 * The compiled validators of registered versions, per store. A (name, version) pair never changes
 * its schema, so an entry can never go stale; only the "which version is latest" lookup must be fresh.
 */
export class ParamsValidators {
  private readonly compiled = new Map<string, ValidateFunction>();

  /** Throws a ValidationError naming each failing field, e.g. `params.storeId: must be integer`. */
  check(type: TaskTypeRecord, params: JsonObject): void {
    if (type.paramsSchema === null) return;
    const key = JSON.stringify([type.name, type.version]);
    let validate = this.compiled.get(key);
    if (!validate) {
      validate = compileParamsSchema(type.paramsSchema, type.name);
      this.compiled.set(key, validate);
    }
    const passed = outcome(validate, params);
    if (passed === true) return;
    if (passed === "endless") {
      // A schema that recurses only on some params (a $ref under anyOf, say): refused as bad params, not a crash.
      const message = `the params schema of ${type.name} v${type.version} refers to itself without end on these params; register a version that does not`;
      throw new ValidationError(`Invalid params for ${type.name} v${type.version}: ${message}`, [{ path: "params", message }]);
    }
    // Named up to MAX_ISSUES, as a request body's refusal: params with 16,000 fields a schema refuses
    // made a message the server then took 24 s to answer.
    const errors = validate.errors ?? [];
    const issues = errors.slice(0, MAX_ISSUES).map(toIssue);
    const unlisted = errors.length > MAX_ISSUES;
    throw new ValidationError(invalidMessage(`params for ${type.name} v${type.version}`, issues, ": ", unlisted), issues, unlisted);
  }
}

/** Ajv reports a missing or unexpected property at its parent; name the property itself instead. */
function toIssue(e: ErrorObject): FieldIssue {
  const segments = e.instancePath === "" ? [] : e.instancePath.slice(1).split("/").map((s) => s.replaceAll("~1", "/").replaceAll("~0", "~"));
  let message = e.message ?? "is invalid";
  if (e.keyword === "required") {
    segments.push(String(e.params.missingProperty));
    message = "is required";
  } else if (e.keyword === "additionalProperties") {
    segments.push(String(e.params.additionalProperty));
    message = "is not allowed";
  }
  return { path: ["params", ...segments].join("."), message };
}
