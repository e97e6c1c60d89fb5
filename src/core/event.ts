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
  taskId: number;
  event: EventType;
  fromWorkerId: string | null;
  toWorkerId: string | null;
  message: string | null;
  data: Json | null;
  createdAt: Date;
}
