import type { Json } from "./task.js";

/** Every kind of row in the audit trail (SPEC "Events"). */
export const EVENT_TYPES = [
  "created",
  "claimed",
  "started",
  "checkpoint",
  "completed",
  "failed",
  "retry_scheduled",
  "released",
  "requeued",
  "reassigned",
  "cancelled",
  "worker_dead",
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** One append-only audit row, written in the same transaction as the change it records. */
export interface TaskEvent {
  id: number;
  /** Null for worker-level events (worker_dead of a worker that held no task). */
  taskId: number | null;
  event: EventType;
  fromWorkerId: string | null;
  toWorkerId: string | null;
  message: string | null;
  data: Json | null;
  createdAt: Date;
}
