import type { TaskEvent } from "../../core/event.js";
import type { BackoffPolicy, Json, JsonObject, Task, TaskStatus } from "../../core/task.js";
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
