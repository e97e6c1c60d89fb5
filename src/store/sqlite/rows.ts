import type { TaskEvent } from "../../core/event.js";
import type { Task, TaskStatus } from "../../core/task.js";
import type { TaskTypeRecord } from "../../core/task-type.js";
import type { RecoveryPolicy } from "../../core/worker.js";
import { toTaskType } from "../task-type-records.js";

/** A tasks row as better-sqlite3 returns it: JSON and times as text. */
export interface SqliteTaskRow {
  id: number;
  task_type: string;
  task_type_version: number | null;
  params: string;
  status: TaskStatus;
  priority: number;
  scheduled_for: string;
  concurrency_key: string | null;
  unique_key: string | null;
  attempts: number;
  max_attempts: number;
  backoff: string;
  timeout_seconds: number | null;
  worker_id: string | null;
  lease_token: string | null;
  lease_expires_at: string | null;
  reserved_for: string | null;
  reserved_until: string | null;
  claimed_at: string | null;
  started_at: string | null;
  completed_at: string | null;
  last_heartbeat_at: string | null;
  progress: number | null;
  checkpoint: string | null;
  result: string | null;
  error_message: string | null;
  parent_id: number | null;
  created_at: string;
  updated_at: string;
}

const date = (s: string | null) => (s === null ? null : new Date(s));
const json = (s: string | null) => (s === null ? null : JSON.parse(s));

export function toTask(r: SqliteTaskRow): Task {
  return {
    id: r.id,
    taskType: r.task_type,
    taskTypeVersion: r.task_type_version,
    params: JSON.parse(r.params),
    status: r.status,
    priority: r.priority,
    scheduledFor: new Date(r.scheduled_for),
    concurrencyKey: r.concurrency_key,
    uniqueKey: r.unique_key,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    backoff: JSON.parse(r.backoff),
    timeoutSeconds: r.timeout_seconds,
    workerId: r.worker_id,
    leaseToken: r.lease_token,
    leaseExpiresAt: date(r.lease_expires_at),
    reservedFor: r.reserved_for,
    reservedUntil: date(r.reserved_until),
    claimedAt: date(r.claimed_at),
    startedAt: date(r.started_at),
    completedAt: date(r.completed_at),
    lastHeartbeatAt: date(r.last_heartbeat_at),
    progress: r.progress,
    checkpoint: json(r.checkpoint),
    result: json(r.result),
    errorMessage: r.error_message,
    parentId: r.parent_id,
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
  };
}

export interface SqliteEventRow {
  id: number;
  task_id: number | null;
  event: TaskEvent["event"];
  from_worker_id: string | null;
  to_worker_id: string | null;
  message: string | null;
  data: string | null;
  created_at: string;
}

export function toEvent(r: SqliteEventRow): TaskEvent {
  return {
    id: r.id,
    taskId: r.task_id,
    event: r.event,
    fromWorkerId: r.from_worker_id,
    toWorkerId: r.to_worker_id,
    message: r.message,
    data: json(r.data),
    createdAt: new Date(r.created_at),
  };
}

export interface SqliteWorkerRow {
  worker_id: string;
  roles: string;
  hostname: string | null;
  pid: number | null;
  version: string | null;
  capacity: number;
  current_load: number;
  tasks_processed: number;
  metadata: string;
  status: "active" | "stale" | "dead" | "inactive";
  last_seen_at: string;
  started_at: string;
  active_tasks: number;
}

export interface SqliteReassignmentRow {
  id: number;
  task_id: number;
  from_worker_id: string | null;
  to_worker_id: string | null;
  reason: string;
  checkpoint: string | null;
  success: number;
  error_message: string | null;
  created_at: string;
}

/** A task_types row as better-sqlite3 returns it: JSON and times as text. */
export interface SqliteTaskTypeRow {
  name: string;
  version: number;
  description: string | null;
  params_schema: string | null;
  priority: number;
  max_attempts: number;
  backoff: string;
  timeout_seconds: number | null;
  recovery_policy: RecoveryPolicy;
  max_running: number | null;
  created_at: string;
}

export function decodeTaskType(r: SqliteTaskTypeRow): TaskTypeRecord {
  return toTaskType({ ...r, params_schema: json(r.params_schema), backoff: JSON.parse(r.backoff), created_at: new Date(r.created_at) });
}
