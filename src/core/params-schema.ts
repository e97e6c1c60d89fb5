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
 * formats (date-time, email, uri, uuid, ...) are known. One instance serves every store: compiling is
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
  ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false, strictTuples: false, code: { regExp: re2() } });
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

/** Compiles a params schema; throws ValidationError saying what is wrong with an invalid one. */
export function compileParamsSchema(schema: JsonObject, typeName: string): ValidateFunction {
  const refused = (message: string) => new ValidationError(`Invalid params schema for ${typeName}: ${message}`, [{ path: "paramsSchema", message }]);
  const slow = slowCheck(schema, "paramsSchema");
  if (slow !== null) throw new ValidationError(`Invalid params schema for ${typeName}: ${slow.message}`, [slow]);
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
        message: `the pattern ${JSON.stringify(pattern)} is not one this server runs (${(error as Error).message}): patterns are matched by RE2, in time linear in the text, which lacks some of JavaScript's syntax: lookahead, lookbehind, backreferences, \\c escapes, [^] and long Unicode property names (\\p{Letter}; write \\pL)`,
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
