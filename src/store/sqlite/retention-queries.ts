/**
 * Retention's statements (see Store.prune), run in one short write transaction per batch. The ids
 * are chosen first, then their events, reassignment rows and the tasks are deleted by id, whether or
 * not the tables keep a cascading foreign key. Statuses are literals so each picks its partial index.
 */
import type { TaskStatus } from "../../core/task.js";

/** @before finished before, @limit the most tasks. */
export function prunableTasks(status: Extract<TaskStatus, "completed" | "cancelled" | "failed">): string {
  return `
  SELECT t.id FROM tasks t
  WHERE t.status = '${status}' AND t.completed_at < @before
    AND NOT EXISTS (SELECT 1 FROM tasks c WHERE c.parent_id = t.id)
  ORDER BY t.completed_at
  LIMIT @limit`;
}

export const DELETE_TASK_EVENTS = `DELETE FROM task_events WHERE task_id IN (SELECT value FROM json_each(@ids))`;
export const DELETE_REASSIGNMENTS = `DELETE FROM reassignment_events WHERE task_id IN (SELECT value FROM json_each(@ids))`;
export const DELETE_TASKS = `DELETE FROM tasks WHERE id IN (SELECT value FROM json_each(@ids))`;

export const PRUNE_WORKERS = `
  DELETE FROM workers WHERE worker_id IN (
    SELECT worker_id FROM workers
    WHERE status IN ('dead', 'inactive') AND last_seen_at < @before
    ORDER BY last_seen_at
    LIMIT @limit)`;

export const PRUNE_WORKER_EVENTS = `
  DELETE FROM task_events WHERE id IN (
    SELECT id FROM task_events
    WHERE task_id IS NULL AND created_at < @before
    ORDER BY id
    LIMIT @limit)`;

/** Schedule ticks before @before whose tasks are all gone, at most @limit, each schedule's latest kept (see the PostgreSQL store's PRUNE_SCHEDULE_TICKS). */
export const PRUNE_SCHEDULE_TICKS = `
  DELETE FROM schedule_ticks WHERE (schedule_name, tick_at) IN (
    SELECT k.schedule_name, k.tick_at FROM schedule_ticks k
    WHERE k.tick_at < @before
      AND k.tick_at < (SELECT max(l.tick_at) FROM schedule_ticks l WHERE l.schedule_name = k.schedule_name)
      AND NOT EXISTS (SELECT 1 FROM json_each(k.task_ids) j JOIN tasks t ON t.id = j.value)
    ORDER BY k.tick_at
    LIMIT @limit)`;

/** Idempotency keys recorded before @before, at most @limit, oldest first (see IDEMPOTENCY_KEY_SECONDS). */
export const PRUNE_IDEMPOTENCY_KEYS = `
  DELETE FROM idempotency_keys WHERE key IN (
    SELECT key FROM idempotency_keys
    WHERE created_at < @before
    ORDER BY created_at
    LIMIT @limit)`;
