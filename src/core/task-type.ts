import { type BackoffPolicy, DEFAULT_BACKOFF, DEFAULT_MAX_ATTEMPTS, type JsonObject } from "./task.js";
import type { TaskTypeDefinition } from "./schemas.js";
import type { RecoveryPolicy } from "./worker.js";

export type { TaskTypeDefinition } from "./schemas.js";

/** A definition with every default resolved: what one registered version holds. */
export interface TaskTypeSpec {
  name: string;
  description: string | null;
  paramsSchema: JsonObject | null;
  priority: number;
  maxAttempts: number;
  backoff: BackoffPolicy;
  timeoutSeconds: number | null;
  recoveryPolicy: RecoveryPolicy;
  maxRunning: number | null;
}

/** One registered version of a task type. Versions are immutable and numbered from 1. */
export interface TaskTypeRecord extends TaskTypeSpec {
  version: number;
  createdAt: Date;
}

/** Resolves the defaults of a checked definition, so that two definitions meaning the same thing compare equal. */
export function resolveTaskType(definition: TaskTypeDefinition): TaskTypeSpec {
  return {
    name: definition.name,
    description: definition.description ?? null,
    paramsSchema: definition.paramsSchema ?? null,
    priority: definition.priority ?? 0,
    maxAttempts: definition.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    backoff: { ...DEFAULT_BACKOFF, ...definition.backoff },
    timeoutSeconds: definition.timeoutSeconds ?? null,
    recoveryPolicy: definition.recoveryPolicy ?? "retry",
    maxRunning: definition.maxRunning ?? null,
  };
}

/** True when registering `spec` again would change nothing (object key order does not matter). */
export function sameDefinition(record: TaskTypeSpec, spec: TaskTypeSpec): boolean {
  const pick = (s: TaskTypeSpec) => [
    s.name, s.description, s.paramsSchema, s.priority, s.maxAttempts, s.backoff, s.timeoutSeconds, s.recoveryPolicy, s.maxRunning,
  ];
  return canonicalJson(pick(record)) === canonicalJson(pick(spec));
}

/** JSON with object keys sorted: stores may hand back a schema's keys in another order (jsonb does). */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_, v) =>
    v !== null && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}
