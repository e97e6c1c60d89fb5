import type { BackoffPolicy, JsonObject } from "../core/task.js";
import type { TaskTypeRecord } from "../core/task-type.js";
import type { RecoveryPolicy } from "../core/worker.js";

/** A decoded task_types row (PostgreSQL returns it like this; SQLite's is parsed into this shape first). */
export interface TaskTypeRow {
  name: string;
  version: number;
  description: string | null;
  params_schema: JsonObject | null;
  priority: number;
  max_attempts: number;
  backoff: BackoffPolicy;
  timeout_seconds: number | null;
  recovery_policy: RecoveryPolicy;
  max_running: number | null;
  created_at: Date;
}

export function toTaskType(r: TaskTypeRow): TaskTypeRecord {
  return {
    name: r.name,
    version: r.version,
    description: r.description,
    paramsSchema: r.params_schema,
    priority: r.priority,
    maxAttempts: r.max_attempts,
    backoff: r.backoff,
    timeoutSeconds: r.timeout_seconds,
    recoveryPolicy: r.recovery_policy,
    maxRunning: r.max_running,
    createdAt: r.created_at,
  };
}
