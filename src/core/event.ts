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

/**
 * The most bytes of a checkpoint (as JSON text) a `checkpoint` event keeps a copy of. A larger one is
 * recorded by its size (CheckpointOmitted); the task holds the latest whole. Copied whole, a handler
 * saving a 1 MiB checkpoint per page stored every one of them again in the trail (600 saves: 600 MiB),
 * and reading the task's timeline answered 500 or took the server's memory.
 */
export const MAX_EVENT_CHECKPOINT_BYTES = 16 * 1024;

/** A checkpoint event's data when the checkpoint was too large to copy into the trail. */
export type CheckpointOmitted = { omitted: true; bytes: number };

/** What a checkpoint event records instead of the checkpoint whose JSON text this is, or null: it keeps a copy (see MAX_EVENT_CHECKPOINT_BYTES). */
export function omittedCheckpoint(text: string): CheckpointOmitted | null {
  const bytes = Buffer.byteLength(text);
  return bytes > MAX_EVENT_CHECKPOINT_BYTES ? { omitted: true, bytes } : null;
}
