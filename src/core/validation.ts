import { type TSchema, Type } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { ValidationError } from "./errors.js";
import { SORT_BY } from "./task.js";
import { RECOVERY_POLICIES } from "./worker.js";

/** Task types name roles: a letter first, then letters, digits, `_ . : -`. */
export const TASK_TYPE_PATTERN = "^[A-Za-z][A-Za-z0-9_.:-]{0,127}$";
export const WORKER_ID_PATTERN = "^[A-Za-z0-9_.-]{1,128}$";

const Int32 = { minimum: -2147483648, maximum: 2147483647 };

export const TaskTypeName = Type.String({ pattern: TASK_TYPE_PATTERN, description: "e.g. product_resync" });
export const WorkerId = Type.String({ pattern: WORKER_ID_PATTERN, description: "letters, digits, _ . -; 1 to 128 characters" });

export const BackoffInput = Type.Object(
  {
    baseSeconds: Type.Optional(Type.Number({ minimum: 0, maximum: 86400 })),
    factor: Type.Optional(Type.Number({ minimum: 1, maximum: 10 })),
    maxSeconds: Type.Optional(Type.Number({ minimum: 0, maximum: 30 * 86400 })),
    jitter: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  },
  { additionalProperties: false },
);

// Task fields a producer may set on a task and a registered type may default.
const Priority = Type.Integer(Int32);
const MaxAttempts = Type.Integer({ minimum: 1, maximum: 1000 });
const TimeoutSeconds = Type.Integer({ minimum: 1, maximum: 7 * 86400 });

export const EnqueueInputSchema = Type.Object(
  {
    taskType: TaskTypeName,
    params: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    priority: Type.Optional(Priority),
    scheduledFor: Type.Optional(Type.Date()),
    concurrencyKey: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    uniqueKey: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    maxAttempts: Type.Optional(MaxAttempts),
    backoff: Type.Optional(BackoffInput),
    timeoutSeconds: Type.Optional(TimeoutSeconds),
  },
  { additionalProperties: false },
);

export const TaskTypeDefinitionSchema = Type.Object(
  {
    name: TaskTypeName,
    description: Type.Optional(Type.String({ maxLength: 2000 })),
    paramsSchema: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "a JSON Schema (draft-07) object" })),
    priority: Type.Optional(Priority),
    maxAttempts: Type.Optional(MaxAttempts),
    backoff: Type.Optional(BackoffInput),
    timeoutSeconds: Type.Optional(TimeoutSeconds),
    recoveryPolicy: Type.Optional(Type.Union(RECOVERY_POLICIES.map((p) => Type.Literal(p)))),
    maxRunning: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000 })),
  },
  { additionalProperties: false },
);

export const ClaimOptionsSchema = Type.Object(
  {
    workerId: WorkerId,
    taskTypes: Type.Optional(Type.Array(TaskTypeName, { minItems: 1, maxItems: 100 })),
    maxAttemptsRemaining: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
    sortBy: Type.Optional(Type.Union(SORT_BY.map((s) => Type.Literal(s)))),
    sortOrder: Type.Optional(Type.Union([Type.Literal("asc"), Type.Literal("desc")])),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    leaseSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 86400 })),
    start: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

export const LeaseSchema = Type.Object({ workerId: WorkerId, leaseToken: Type.String({ minLength: 1, maxLength: 64 }) });

const compiled = new WeakMap<TSchema, ReturnType<typeof TypeCompiler.Compile>>();

/** Checks `value` against `schema`; throws a ValidationError naming every bad field. */
export function validate<T>(schema: TSchema, value: unknown, what: string): T {
  let check = compiled.get(schema);
  if (!check) {
    check = TypeCompiler.Compile(schema);
    compiled.set(schema, check);
  }
  if (check.Check(value)) return value as T;
  const issues = [...check.Errors(value)].map((e) => ({
    path: e.path === "" ? "(root)" : e.path.slice(1).replaceAll("/", "."),
    message: e.message + (e.value === undefined ? "" : ` (got ${describe(e.value)})`),
  }));
  throw new ValidationError(`Invalid ${what}: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`, issues);
}

/** Throws unless `value` survives a JSON round trip unchanged (no undefined, functions, NaN, Dates, cycles). */
export function assertJson(value: unknown, path: string): void {
  const problem = findNonJson(value, path, new Set());
  if (problem) throw new ValidationError(`Invalid ${path}: ${problem.path} ${problem.message}`, [problem]);
}

function findNonJson(value: unknown, path: string, seen: Set<object>): { path: string; message: string } | null {
  if (value === null || typeof value === "string" || typeof value === "boolean") return null;
  if (typeof value === "number") return Number.isFinite(value) ? null : { path, message: "is not a finite number" };
  if (typeof value !== "object") return { path, message: `is a ${typeof value}, which JSON cannot hold` };
  if (seen.has(value)) return { path, message: "contains a cycle" };
  const proto = Object.getPrototypeOf(value);
  if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) {
    return { path, message: `is a ${value.constructor?.name ?? "non-plain object"}; pass plain JSON (e.g. a date as an ISO string)` };
  }
  seen.add(value);
  for (const [key, item] of Object.entries(value)) {
    const found = findNonJson(item, Array.isArray(value) ? `${path}[${key}]` : `${path}.${key}`, seen);
    if (found) return found;
  }
  seen.delete(value);
  return null;
}

function describe(value: unknown): string {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? "Invalid Date" : value.toISOString();
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

export function assertFiniteNumber(value: unknown, path: string): void {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new ValidationError(`Invalid ${path}: expected a finite number (got ${String(value)})`, [{ path, message: "not a finite number" }]);
  }
}

export const WorkerBeatSchema = Type.Object(
  {
    workerId: WorkerId,
    roles: Type.Array(TaskTypeName, { minItems: 1, maxItems: 100 }),
    hostname: Type.Optional(Type.String({ maxLength: 255 })),
    pid: Type.Optional(Type.Integer({ minimum: 0 })),
    version: Type.Optional(Type.String({ maxLength: 64 })),
    capacity: Type.Integer({ minimum: 1, maximum: 10_000 }),
    currentLoad: Type.Integer({ minimum: 0 }),
    tasksProcessed: Type.Integer({ minimum: 0 }),
    metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    leases: Type.Optional(
      Type.Array(Type.Object({ taskId: Type.Integer({ minimum: 1 }), leaseToken: Type.String({ minLength: 1, maxLength: 64 }) }), { maxItems: 10_000 }),
    ),
  },
  { additionalProperties: false },
);
