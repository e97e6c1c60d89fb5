import type { Json, JsonObject } from "../core/task.js";
import type { ReassignmentEvent, WorkerRecord } from "../core/worker.js";
import type { LeadershipStatus } from "./store.js";

// Decoded registry rows (PostgreSQL returns them like this; SQLite's are parsed into this shape first).

export interface WorkerRow {
  worker_id: string;
  roles: string[];
  hostname: string | null;
  pid: number | null;
  version: string | null;
  capacity: number;
  current_load: number;
  tasks_processed: number;
  metadata: JsonObject;
  status: WorkerRecord["status"];
  last_seen_at: Date;
  started_at: Date;
  active_tasks: number;
}

/** Shared by both stores once their rows are decoded: adds the derived figures. */
export function toWorker(r: WorkerRow, now: Date): WorkerRecord {
  return {
    workerId: r.worker_id,
    roles: r.roles,
    hostname: r.hostname,
    pid: r.pid,
    version: r.version,
    capacity: r.capacity,
    currentLoad: r.current_load,
    tasksProcessed: r.tasks_processed,
    metadata: r.metadata,
    status: r.status,
    lastSeenAt: r.last_seen_at,
    startedAt: r.started_at,
    activeTasks: r.active_tasks,
    secondsSinceHeartbeat: Math.max(0, Math.round((now.getTime() - r.last_seen_at.getTime()) / 1000)),
    loadPercent: Math.round((r.current_load / r.capacity) * 1000) / 10,
  };
}

export interface ReassignmentRow {
  id: number;
  task_id: number;
  from_worker_id: string | null;
  to_worker_id: string | null;
  reason: string;
  checkpoint: Json | null;
  success: boolean;
  error_message: string | null;
  created_at: Date;
}

export function toReassignment(r: ReassignmentRow): ReassignmentEvent {
  return {
    id: r.id,
    taskId: r.task_id,
    fromWorkerId: r.from_worker_id,
    toWorkerId: r.to_worker_id,
    reason: r.reason,
    checkpoint: r.checkpoint,
    success: r.success,
    errorMessage: r.error_message,
    createdAt: r.created_at,
  };
}

/** The row of LEADERSHIP_STATUS once decoded (SQLite's timestamps parsed first). */
export interface LeadershipRow {
  holder: string | null;
  expires_at: Date | null;
  swept_by: string | null;
  swept_at: Date | null;
  interval_seconds: number | null;
}

export function toLeadershipStatus(r: LeadershipRow, now: Date): LeadershipStatus {
  return {
    holder: r.holder,
    leaseExpiresAt: r.expires_at,
    lastSweptBy: r.swept_by,
    lastSweptAt: r.swept_at,
    secondsSinceSweep: r.swept_at === null ? null : Math.max(0, Math.round((now.getTime() - r.swept_at.getTime()) / 1000)),
    sweepIntervalSeconds: r.interval_seconds,
  };
}
