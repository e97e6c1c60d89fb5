import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";
import { type FieldIssue, ValidationError } from "./errors.js";
import type { JsonObject } from "./task.js";
import type { TaskTypeRecord } from "./task-type.js";

/**
 * Params schemas are JSON Schema draft-07, checked by Ajv. Strict mode refuses unknown keywords, so a
 * typo such as `requird` fails registration instead of silently validating nothing; the standard
 * formats (date-time, email, uri, uuid, ...) are known. One instance serves every store: compiling is
 * synchronous and each schema is removed from Ajv's registry right after, so `$id`s of different
 * versions never collide and Ajv keeps no reference to them.
 */
const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false, strictTuples: false });
addFormats.default(ajv);

/** Compiles a params schema; throws ValidationError saying what is wrong with an invalid one. */
export function compileParamsSchema(schema: JsonObject, typeName: string): ValidateFunction {
  try {
    return ajv.compile(schema);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new ValidationError(`Invalid params schema for ${typeName}: ${message}`, [{ path: "paramsSchema", message }]);
  } finally {
    ajv.removeSchema(schema);
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
    if (validate(params)) return;
    const issues = (validate.errors ?? []).map(toIssue);
    throw new ValidationError(`Invalid params for ${type.name} v${type.version}: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`, issues);
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
