import type { TaskEvent } from "../../core/event.js";
import type { BackoffPolicy, ClaimedTask, Json, JsonObject, Task, TaskStatus } from "../../core/task.js";
import type { NewTask } from "../../core/new-task.js";

/** A tasks row as pg returns it (int8 parsed to number, timestamptz to Date, jsonb to values). */
export interface TaskRow {
  id: number;
  task_type: string;
  task_type_version: number | null;
  params: JsonObject;
  status: TaskStatus;
  priority: number;
  scheduled_for: Date;
  concurrency_key: string | null;
  unique_key: string | null;
  attempts: number;
  max_attempts: number;
  backoff: BackoffPolicy;
  timeout_seconds: number | null;
  worker_id: string | null;
  lease_token: string | null;
  lease_expires_at: Date | null;
  reserved_for: string | null;
  reserved_until: Date | null;
  claimed_at: Date | null;
  started_at: Date | null;
  completed_at: Date | null;
  last_heartbeat_at: Date | null;
  progress: number | null;
  checkpoint: Json | null;
  result: Json | null;
  error_message: string | null;
  parent_id: number | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * Every column of a TaskRow, for the statements that return whole tasks to name, not `*`: a migration
 * of a later build that adds a column to tasks changes what `*` returns, and a statement prepared
 * before it then fails on its connection ("cached plan must not change result type"), which stops
 * every process of this build still running during a rolling upgrade. The `satisfies` keeps the list
 * whole.
 */
export const TASK_COLUMNS = Object.keys({
  id: 0,
  task_type: 0,
  task_type_version: 0,
  params: 0,
  status: 0,
  priority: 0,
  scheduled_for: 0,
  concurrency_key: 0,
  unique_key: 0,
  attempts: 0,
  max_attempts: 0,
  backoff: 0,
  timeout_seconds: 0,
  worker_id: 0,
  lease_token: 0,
  lease_expires_at: 0,
  reserved_for: 0,
  reserved_until: 0,
  claimed_at: 0,
  started_at: 0,
  completed_at: 0,
  last_heartbeat_at: 0,
  progress: 0,
  checkpoint: 0,
  result: 0,
  error_message: 0,
  parent_id: 0,
  created_at: 0,
  updated_at: 0,
} satisfies Record<keyof TaskRow, 0>);

export function toTask(r: TaskRow): Task {
  return {
    id: r.id,
    taskType: r.task_type,
    taskTypeVersion: r.task_type_version,
    params: r.params,
    status: r.status,
    priority: r.priority,
    scheduledFor: r.scheduled_for,
    concurrencyKey: r.concurrency_key,
    uniqueKey: r.unique_key,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    backoff: r.backoff,
    timeoutSeconds: r.timeout_seconds,
    workerId: r.worker_id,
    leaseToken: r.lease_token,
    leaseExpiresAt: r.lease_expires_at,
    reservedFor: r.reserved_for,
    reservedUntil: r.reserved_until,
    claimedAt: r.claimed_at,
    startedAt: r.started_at,
    completedAt: r.completed_at,
    lastHeartbeatAt: r.last_heartbeat_at,
    progress: r.progress,
    checkpoint: r.checkpoint,
    result: r.result,
    errorMessage: r.error_message,
    parentId: r.parent_id,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** The timestamptz columns of a tasks row. */
const TASK_TIMES = [
  "scheduled_for",
  "lease_expires_at",
  "reserved_until",
  "claimed_at",
  "started_at",
  "completed_at",
  "last_heartbeat_at",
  "created_at",
  "updated_at",
] as const satisfies readonly (keyof TaskRow)[];

/** A tasks row written by to_jsonb (times as ISO-8601 text, everything else as TaskRow has it). */
export function taskRowFromJson(json: Record<string, unknown>): TaskRow {
  const row = { ...json } as Record<string, unknown>;
  for (const column of TASK_TIMES) if (row[column] !== null) row[column] = new Date(row[column] as string);
  return row as unknown as TaskRow;
}

/**
 * The columns a claim returns: those it did not set, and of those it set, the attempt count, the
 * worker and the lease token (drawn by the database). The store knows the rest (see toClaimedTask);
 * reading all 31 columns of each claimed task cost a worker 17 % more CPU in a drain.
 */
export const CLAIMED_COLUMNS = [
  "id",
  "task_type",
  "task_type_version",
  "params",
  "priority",
  "scheduled_for",
  "concurrency_key",
  "unique_key",
  "attempts",
  "max_attempts",
  "backoff",
  "timeout_seconds",
  "worker_id",
  "lease_token",
  "completed_at",
  "progress",
  "checkpoint",
  "result",
  "error_message",
  "parent_id",
  "created_at",
] as const satisfies readonly (keyof TaskRow)[];

export type ClaimedRow = Pick<TaskRow, (typeof CLAIMED_COLUMNS)[number]> & { worker_id: string; lease_token: string };

/** What the claim statement set on every task it claimed: $2 now, $4 lease seconds, and whether it started them. */
export interface ClaimWrites {
  now: Date;
  leaseSeconds: number;
  start: boolean;
}

/**
 * A claimed task: its row, with what the claim set filled in as the statement wrote it (see claimWrites
 * in queries.ts). It builds the task itself rather than spreading the row into toTask: that spread
 * took a worker's CPU per task in a drain from 54 to 87–99 ms per 1,000 (3 alternated pairs).
 */
export function toClaimedTask(r: ClaimedRow, claim: ClaimWrites): ClaimedTask {
  const at = claim.now.getTime();
  return {
    id: r.id,
    taskType: r.task_type,
    taskTypeVersion: r.task_type_version,
    params: r.params,
    status: claim.start ? "running" : "claimed",
    priority: r.priority,
    scheduledFor: r.scheduled_for,
    concurrencyKey: r.concurrency_key,
    uniqueKey: r.unique_key,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    backoff: r.backoff,
    timeoutSeconds: r.timeout_seconds,
    workerId: r.worker_id,
    leaseToken: r.lease_token,
    leaseExpiresAt: new Date(at + claim.leaseSeconds * 1000),
    reservedFor: null,
    reservedUntil: null,
    claimedAt: new Date(at),
    startedAt: claim.start ? new Date(at) : null,
    completedAt: r.completed_at,
    lastHeartbeatAt: new Date(at),
    progress: r.progress,
    checkpoint: r.checkpoint,
    result: r.result,
    errorMessage: r.error_message,
    parentId: r.parent_id,
    createdAt: r.created_at,
    updatedAt: new Date(at),
  };
}

export interface EventRow {
  id: number;
  task_id: number | null;
  event: TaskEvent["event"];
  from_worker_id: string | null;
  to_worker_id: string | null;
  message: string | null;
  data: Json | null;
  created_at: Date;
}

export function toEvent(r: EventRow): TaskEvent {
  return {
    id: r.id,
    taskId: r.task_id,
    event: r.event,
    fromWorkerId: r.from_worker_id,
    toWorkerId: r.to_worker_id,
    message: r.message,
    data: r.data,
    createdAt: r.created_at,
  };
}

/** The JSON array the insert statement reads with jsonb_to_recordset. */
export function newTasksJson(tasks: NewTask[]): string {
  return JSON.stringify(
    tasks.map((t) => ({
      task_type: t.taskType,
      task_type_version: t.taskTypeVersion,
      params: t.params,
      priority: t.priority,
      scheduled_for: t.scheduledFor.toISOString(),
      concurrency_key: t.concurrencyKey,
      unique_key: t.uniqueKey,
      max_attempts: t.maxAttempts,
      backoff: t.backoff,
      timeout_seconds: t.timeoutSeconds,
      parent_id: t.parentId,
    })),
  );
}
