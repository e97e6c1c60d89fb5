/**
 * Retention's statements (see Store.prune). Each is one statement, so one short transaction. The
 * status is a literal, not a parameter: with generic plans (plan_cache_mode=force_generic_plan) only
 * a literal lets the planner use the status's partial index on completed_at.
 *
 * The tasks to delete are locked FOR UPDATE SKIP LOCKED: a finished task someone is touching (a retry
 * of a failed task, an operator's read-modify-write) is skipped this time rather than waited for, and
 * no unfinished task is ever locked. Events and reassignment rows are deleted by task id in the same
 * statement, whether or not their tables keep a cascading foreign key.
 */
import type { TaskStatus } from "../../core/task.js";
import { UNTALLY_COMPLETED } from "./queries.js";

/** $1 finished before, $2 the most tasks. Returns the three counts. */
export function pruneTasks(status: Extract<TaskStatus, "completed" | "cancelled" | "failed">): string {
  return `
  WITH doomed AS (
    SELECT t.id FROM tasks t
    WHERE t.status = '${status}' AND t.completed_at < $1::timestamptz
      AND NOT EXISTS (SELECT 1 FROM tasks c WHERE c.parent_id = t.id)
    ORDER BY t.completed_at
    LIMIT $2
    FOR UPDATE OF t SKIP LOCKED
  ),
  events AS (DELETE FROM task_events e WHERE e.task_id IN (SELECT id FROM doomed) RETURNING 1),
  moves AS (DELETE FROM reassignment_events r WHERE r.task_id IN (SELECT id FROM doomed) RETURNING 1),
  gone AS (DELETE FROM tasks t WHERE t.id IN (SELECT id FROM doomed) RETURNING t.task_type)${status === "completed" ? `,
  ${UNTALLY_COMPLETED("gone")}` : ""}
  SELECT (SELECT count(*) FROM gone) AS tasks, (SELECT count(*) FROM events) AS events, (SELECT count(*) FROM moves) AS reassignments`;
}

/** $1 last seen before, $2 the most workers. A worker heard from again meanwhile is live, and stays. */
export const PRUNE_WORKERS = `
  WITH doomed AS (
    SELECT worker_id FROM workers
    WHERE status IN ('dead', 'inactive') AND last_seen_at < $1::timestamptz
    ORDER BY last_seen_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
  ),
  gone AS (DELETE FROM workers w WHERE w.worker_id IN (SELECT worker_id FROM doomed) RETURNING 1)
  SELECT count(*) AS workers FROM gone`;

/**
 * Worker-level events (worker_dead: no task) written before $1, at most $2. Both the scan and the
 * delete go through task_events_by_task, on (task_id IS NULL, id): the table has no other index.
 */
export const PRUNE_WORKER_EVENTS = `
  WITH doomed AS (
    SELECT id FROM task_events
    WHERE task_id IS NULL AND created_at < $1::timestamptz
    ORDER BY id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
  ),
  gone AS (DELETE FROM task_events e WHERE e.task_id IS NULL AND e.id IN (SELECT id FROM doomed) RETURNING 1)
  SELECT count(*) AS events FROM gone`;

/**
 * Schedule ticks before $1 whose tasks are all gone (pruned, or none made), at most $2, each
 * schedule's latest kept: a fan-out reads its keys from the latest tick with completed tasks (see
 * LAST_RUN_RESULTS), and a tick whose tasks remain may be that one. A tick this old never fires
 * again: the schedule's next run is past it. Each schedule's ticks are walked in its primary key's
 * order, oldest first.
 */
export const PRUNE_SCHEDULE_TICKS = `
  WITH doomed AS (
    SELECT k.schedule_name, k.tick_at FROM schedules s CROSS JOIN LATERAL (
      SELECT k.schedule_name, k.tick_at FROM schedule_ticks k
      WHERE k.schedule_name = s.name AND k.tick_at < $1::timestamptz
        AND k.tick_at < (SELECT max(l.tick_at) FROM schedule_ticks l WHERE l.schedule_name = s.name)
        AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = ANY (k.task_ids))
      ORDER BY k.tick_at
      LIMIT $2
    ) k
    LIMIT $2
  ),
  gone AS (DELETE FROM schedule_ticks k USING doomed d WHERE k.schedule_name = d.schedule_name AND k.tick_at = d.tick_at RETURNING 1)
  SELECT count(*) AS ticks FROM gone`;

/** Idempotency keys recorded before $1, at most $2, oldest first (see IDEMPOTENCY_KEY_SECONDS). */
export const PRUNE_IDEMPOTENCY_KEYS = `
  WITH doomed AS (
    SELECT key FROM idempotency_keys
    WHERE created_at < $1::timestamptz
    ORDER BY created_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
  ),
  gone AS (DELETE FROM idempotency_keys k USING doomed d WHERE k.key = d.key RETURNING 1)
  SELECT count(*) AS keys FROM gone`;
