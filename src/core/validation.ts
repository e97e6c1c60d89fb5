import { type FieldIssue, ValidationError, type Wording } from "./errors.js";
import { isStorableText, TEXT_FORMAT } from "./schemas.js";
import { type TSchema, TypeCompiler, type ValueError, ValueErrorType } from "./typebox.js";

const TEXT_RULE = "must not contain a NUL character (\\u0000) or an unpaired UTF-16 surrogate";

/** The most fields a refusal names. */
export const MAX_ISSUES = 20;

const compiled = new WeakMap<TSchema, ReturnType<typeof TypeCompiler.Compile>>();

/** Checks `value` against `schema`; throws a ValidationError naming every bad field. */
export function validate<T>(schema: TSchema, value: unknown, what: string): T {
  let check = compiled.get(schema);
  if (!check) {
    check = TypeCompiler.Compile(schema);
    compiled.set(schema, check);
  }
  if (check.Check(value)) return value as T;
  // The first issue of each field says it: a missing one was also reported as "Expected string". The
  // errors are read as they come, up to MAX_ISSUES fields: a body of 120,000 unknown fields, all
  // listed and sifted, held the server for 34 s and was answered with 40 MB.
  const issues = new Map<string, FieldIssue>();
  let more = false;
  for (const e of check.Errors(value)) {
    const path = e.path === "" ? what : e.path.slice(1).replaceAll("/", ".");
    if (issues.has(path)) continue;
    if (issues.size === MAX_ISSUES) {
      more = true;
      break;
    }
    issues.set(path, { path, message: explain(e) });
  }
  const listed = [...issues.values()];
  throw new ValidationError(invalidMessage(what, listed, ": ", more), listed, more);
}

/**
 * Refuses an options object with a key the function does not take: a misspelt option (`concurency`,
 * `shema`) would otherwise be ignored in silence and its default used. `known` lists every option,
 * typed so that one added to the interface but not here is a compile error.
 */
export function refuseUnknownOptions<T>(options: T | undefined, known: Record<keyof T, true>, what: string): void {
  if (options === undefined) return;
  // null too: passed through, it was destructured by the caller, a TypeError.
  if (options === null || typeof options !== "object" || Array.isArray(options)) {
    throw new ValidationError(`Invalid ${what}s: expected an object such as { ${Object.keys(known)[0]}: … } (got ${describe(options)})`, [{ path: what, message: "not an object" }]);
  }
  const unknown = Object.keys(options).find((key) => !Object.hasOwn(known, key));
  if (unknown === undefined) return;
  const message = `unknown option (the options are ${Object.keys(known).join(", ")})`;
  throw new ValidationError(`Invalid ${what} ${unknown}: ${message}`, [{ path: unknown, message }]);
}

function explain(e: ValueError): string {
  // Only the format's own failure: an empty or too long text says so.
  if (e.type === ValueErrorType.StringFormat && e.schema.format === TEXT_FORMAT) return TEXT_RULE;
  // Python's datetime.isoformat() and many others write no offset: say what is missing, not "match 'date-time' format".
  if (e.type === ValueErrorType.StringFormat && e.schema.format === "date-time") {
    const offsetMissing = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(String(e.value));
    return `must be a date and time with its offset, such as 2030-01-01T09:00:00Z${offsetMissing ? "; this one has no offset: add Z (UTC) or one such as +02:00" : ""} (got ${describe(e.value)})`;
  }
  // "Expected Date timestamp to be greater or equal to 0" is the millisecond count: say the dates.
  if (e.type === ValueErrorType.DateMinimumTimestamp || e.type === ValueErrorType.DateMaximumTimestamp) {
    const bound = (ms: unknown) => (typeof ms === "number" ? new Date(ms).toISOString().slice(0, 10) : "?");
    return `must be a date from ${bound(e.schema.minimumTimestamp)} to ${bound(e.schema.maximumTimestamp)} (got ${describe(e.value)})`;
  }
  // A string too long where a string or an integer goes: what is wrong with it as a string, not that it is neither.
  if (e.type === ValueErrorType.Union) {
    const near = nearestVariant(e);
    if (near !== undefined) return explain(near);
  }
  // A pattern means nothing to most readers; its description says what is expected.
  if ((e.type === ValueErrorType.StringPattern || e.type === ValueErrorType.Union) && e.schema.description) {
    return `must be ${e.schema.description} (got ${describe(e.value)})`;
  }
  if (e.value === undefined) return e.message;
  if (e.type === ValueErrorType.ObjectAdditionalProperties) return `${e.message} (got ${describe(e.value)})${namesInstead(e)}`;
  return `${e.message} (got ${describe(e.value)})`;
}

/** Errors that say a value is not of a kind at all (not a string, not an integer…), rather than out of that kind's bounds. */
const KIND_ERRORS = new Set([
  ValueErrorType.String,
  ValueErrorType.Integer,
  ValueErrorType.Number,
  ValueErrorType.Boolean,
  ValueErrorType.Null,
  ValueErrorType.Object,
  ValueErrorType.Array,
  ValueErrorType.Literal,
]);

/**
 * Of a union's variants, the one error of the only variant whose kind the value has, if only one has
 * it. A variant that is itself a union (of literals, say) has the value's kind if one of its own does.
 */
function nearestVariant(e: ValueError): ValueError | undefined {
  const ofItsKind = (error: ValueError | undefined): error is ValueError =>
    error !== undefined && !KIND_ERRORS.has(error.type) && (error.type !== ValueErrorType.Union || nearestVariant(error) !== undefined);
  const near = e.errors.map((variant) => variant.First()).filter(ofItsKind);
  return near.length === 1 ? near[0] : undefined;
}

/**
 * Names other queues (and habits) give fields this one names otherwise, by their letters alone
 * (lower case, no `_` or `-`): what someone coming from graphile-worker, pg-boss or BullMQ types.
 */
const FIELD_ALIASES: Record<string, string[]> = {
  runat: ["scheduledFor", "delaySeconds"],
  startafter: ["scheduledFor", "delaySeconds"],
  availableat: ["scheduledFor", "delaySeconds"],
  scheduledat: ["scheduledFor", "delaySeconds"],
  delay: ["delaySeconds"],
  delayms: ["delaySeconds"],
  attempts: ["maxAttempts"],
  retries: ["maxAttempts"],
  retrylimit: ["maxAttempts"],
  maxretries: ["maxAttempts"],
  jobkey: ["uniqueKey"],
  singletonkey: ["uniqueKey"],
  dedupkey: ["uniqueKey"],
  deduplicationid: ["uniqueKey"],
  queue: ["taskType"],
  queuename: ["taskType"],
  type: ["taskType"],
  name: ["taskType"],
  payload: ["params"],
  data: ["params"],
  args: ["params"],
  expirein: ["timeoutSeconds"],
  expireinseconds: ["timeoutSeconds"],
  timeout: ["timeoutSeconds"],
};

const letters = (name: string) => name.toLowerCase().replace(/[_-]/g, "");

/** For an unexpected field: the declared one it may have meant (`max_attempts` for `maxAttempts`, `fanOut` for `fanout`), or the declared ones. */
function namesInstead(e: ValueError): string {
  const declared = Object.keys((e.schema as { properties?: Record<string, unknown> }).properties ?? {});
  if (declared.length === 0) return "";
  const sent = letters(e.path.split("/").at(-1) ?? "");
  const named = (wanted: string) => declared.find((d) => letters(d) === letters(wanted));
  // Own keys only: a field named `constructor` found Object.prototype's, and its TypeError answered the request.
  const aliases = Object.hasOwn(FIELD_ALIASES, sent) ? FIELD_ALIASES[sent] : [];
  const meant = [named(sent), ...aliases.map(named)].filter((d): d is string => d !== undefined);
  if (meant.length > 0) return `; did you mean ${[...new Set(meant)].join(" or ")}?`;
  return declared.length <= 25 ? `; the fields are ${declared.join(", ")}` : "";
}

function invalid(what: string, issues: FieldIssue[], separator = ": "): ValidationError {
  return new ValidationError(invalidMessage(what, issues, separator), issues);
}

/** "Invalid request body: task_type: Expected required property; …": what a ValidationError says. */
export function invalidMessage(what: string, issues: FieldIssue[], separator = ": ", unlisted = false): string {
  const more = unlisted ? `; and more, not listed (the first ${MAX_ISSUES} fields refused are)` : "";
  return `Invalid ${what}: ${issues.map((i) => `${i.path}${separator}${i.message}`).join("; ")}${more}`;
}

/** A value as a refusal quotes it: short, and readable whatever it is. */
export function describe(value: unknown): string {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? "Invalid Date" : value.toISOString();
  if (typeof value === "bigint") return `${value}n`;
  // JSON writes them null, which is no value the caller gave.
  if (typeof value === "number" && !Number.isFinite(value)) return String(value);
  if (Array.isArray(value)) return `a list of ${value.length}`;
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = Object.prototype.toString.call(value);
  }
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** Deepest nesting accepted in stored JSON; deeper documents are almost always a bug, and recursion has to stop somewhere. */
export const MAX_JSON_DEPTH = 64;

/**
 * The JSON rules for everything stored as JSON (params, checkpoints, results, metadata, params
 * schemas), the same on every store: null, booleans, finite numbers, storable text, arrays and plain
 * objects, at most MAX_JSON_DEPTH deep and `maxBytes` long once serialized. An object property whose
 * value is `undefined` is left out, as JSON.stringify does; anything else (a Date, a BigInt, a Map,
 * a function, NaN, a cycle, undefined in an array) is refused with the path of the bad value.
 */
export function checkJson(value: unknown, path: string, maxBytes: number, limitName: string): void {
  const problem = findNonJson(value, path, 0, new Set());
  // The JSON rules' messages read as sentences: "result.at is a Date".
  if (problem) throw invalid(path, [problem], " ");
  const bytes = Buffer.byteLength(JSON.stringify(value) ?? "null");
  if (bytes > maxBytes) {
    // Rounded, a size just over the limit read as the limit itself ("1.0 MiB, over the limit of 1.0 MiB").
    const [size, limit] = formatBytes(bytes) === formatBytes(maxBytes) ? [`${bytes.toLocaleString("en")} bytes`, `${maxBytes.toLocaleString("en")} bytes`] : [formatBytes(bytes), formatBytes(maxBytes)];
    const message: Wording = (v) => `is ${size} as JSON, over the limit of ${limit} (${v.setting(limitName)}); store large data elsewhere and pass a reference`;
    throw new ValidationError((v) => invalidMessage(path, [{ path, message: message(v) }], " "), [{ path, message }]);
  }
}

function findNonJson(value: unknown, path: string, depth: number, seen: Set<object>): FieldIssue | null {
  if (value === null || typeof value === "boolean") return null;
  if (typeof value === "string") return isStorableText(value) ? null : { path, message: TEXT_RULE };
  if (typeof value === "number") return Number.isFinite(value) ? null : { path, message: `is ${value}, which JSON cannot hold` };
  if (typeof value !== "object") return { path, message: `is ${value === undefined ? "undefined" : `a ${typeof value}`}, which JSON cannot hold` };
  if (seen.has(value)) return { path, message: "contains a cycle" };
  if (depth >= MAX_JSON_DEPTH) return { path, message: `is nested more than ${MAX_JSON_DEPTH} levels deep` };
  const isArray = Array.isArray(value);
  const proto = Object.getPrototypeOf(value);
  if (!isArray && proto !== Object.prototype && proto !== null) {
    return { path, message: `is a ${value.constructor?.name ?? "non-plain object"}; pass plain JSON (e.g. a date as an ISO string)` };
  }
  // A hole ([1, , 3]) reads as undefined, and JSON writes it null, as it would undefined: Object.entries skips it.
  if (isArray) {
    for (let index = 0; index < value.length; index++) {
      if (!(index in value)) return { path: `${path}[${index}]`, message: "is a hole in the list (undefined), which JSON cannot hold: put null or a value there" };
    }
  }
  seen.add(value);
  for (const [key, item] of Object.entries(value)) {
    const at = isArray ? `${path}[${key}]` : `${path}.${key}`;
    if (!isArray && !isStorableText(key)) return { path: at, message: `key ${TEXT_RULE}` };
    if (item === undefined && !isArray) continue;
    const found = findNonJson(item, at, depth + 1, seen);
    if (found) return found;
  }
  seen.delete(value);
  return null;
}

function formatBytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${n} bytes`;
}
