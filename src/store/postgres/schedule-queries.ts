/**
 * Statements of recurring schedules (PostgreSQL). Conventions as in queries.ts: "now" is a parameter.
 * A run is several of these in one transaction (see PostgresStore.writeRun): the tick's row first, whose
 * primary key makes a concurrent firer of the same tick wait and then insert nothing, then the tasks,
 * then the schedule's pass, which only applies while next_run_at is still the tick the firer read.
 */

/**
 * $1 name, $2 task type, $3 params, $4 cron, $5 timezone, $6 enabled, $7 fan-out (JSON), $8 concurrency
 * key template, $9 priority, $10 missed-tick policy, $11 next run, $12 now, $13 unique key template.
 * `created`: the row is new.
 */
export const UPSERT_SCHEDULE = `
  INSERT INTO schedules (name, task_type, params, cron, timezone, enabled, fan_out, concurrency_key, priority, missed_ticks,
                         next_run_at, created_at, updated_at, unique_key)
  VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7::jsonb, $8, $9::int, $10, $11::timestamptz, $12::timestamptz, $12::timestamptz, $13)
  ON CONFLICT (name) DO UPDATE SET
    task_type = EXCLUDED.task_type, params = EXCLUDED.params, cron = EXCLUDED.cron, timezone = EXCLUDED.timezone,
    enabled = EXCLUDED.enabled, fan_out = EXCLUDED.fan_out, concurrency_key = EXCLUDED.concurrency_key, unique_key = EXCLUDED.unique_key,
    priority = EXCLUDED.priority, missed_ticks = EXCLUDED.missed_ticks, next_run_at = EXCLUDED.next_run_at,
    updated_at = EXCLUDED.updated_at
  RETURNING *, (xmax = 0) AS created`;

/** $1 name. */
export const GET_SCHEDULE = `SELECT * FROM schedules WHERE name = $1`;

/**
 * $1 name. The schedule, locked until the transaction ends: a save or a pause reads it, decides, and
 * writes; unlocked, a pause landing between another save's read and write was undone by that write.
 * NO KEY UPDATE, as the write itself takes: it leaves HOLD_SCHEDULE free, so two schedules saved at
 * once, each reading the other's results, do not deadlock (each locked, each waiting for the other).
 */
export const LOCK_SCHEDULE = `SELECT * FROM schedules WHERE name = $1 FOR NO KEY UPDATE`;

/**
 * $1 name. The schedule whose results a fan-out being saved reads, kept from deletion until the save
 * commits: a delete under way is waited for, and the row is then gone (the save refused); a delete
 * coming after waits for the save. KEY SHARE holds off only deletes: that schedule's passes and saves go on.
 */
export const HOLD_SCHEDULE = `SELECT 1 FROM schedules WHERE name = $1 FOR KEY SHARE`;

export const LIST_SCHEDULES = `SELECT * FROM schedules ORDER BY name`;

/** $1 name, $2 enabled, $3 next run (null when paused), $4 now. */
export const SET_SCHEDULE_ENABLED = `
  UPDATE schedules SET enabled = $2, next_run_at = $3::timestamptz, updated_at = $4::timestamptz WHERE name = $1 RETURNING *`;

/**
 * $1 name, $2 now, $3 the events' message. The pending tasks of the schedule's runs (future batches
 * of a fan-out, due tasks not yet claimed) cancelled, with an event each; `found` false for no such
 * schedule. A task claimed meanwhile is no longer pending when the update reaches it, and stays.
 */
export const CANCEL_SCHEDULE_TASKS = `
  WITH cancelled AS (
    UPDATE tasks t SET status = 'cancelled', completed_at = $2::timestamptz, reserved_for = NULL, reserved_until = NULL, updated_at = $2::timestamptz
    WHERE t.id IN (SELECT unnest(k.task_ids) FROM schedule_ticks k WHERE k.schedule_name = $1) AND t.status = 'pending'
    RETURNING t.id
  ),
  logged AS (INSERT INTO task_events (task_id, event, message, created_at) SELECT id, 'cancelled', $3, $2::timestamptz FROM cancelled)
  SELECT EXISTS (SELECT 1 FROM schedules WHERE name = $1) AS found, coalesce((SELECT array_agg(id ORDER BY id) FROM cancelled), '{}') AS ids`;

/** $1 name. Its ticks go with it. */
export const DELETE_SCHEDULE = `DELETE FROM schedules WHERE name = $1 RETURNING *`;

/** $1 now. The coordinator's pass: the partial index schedules_due. */
export const DUE_SCHEDULES = `
  SELECT * FROM schedules WHERE enabled AND next_run_at <= $1::timestamptz ORDER BY next_run_at, name LIMIT 1000`;

/** $1 name, $2 tick, $3 now. Nothing when this tick has a row already: it fired before. */
export const INSERT_TICK = `
  INSERT INTO schedule_ticks (schedule_name, tick_at, fired_at) VALUES ($1, $2::timestamptz, $3::timestamptz)
  ON CONFLICT (schedule_name, tick_at) DO NOTHING
  RETURNING tick_at`;

/** $1 name, $2 tick, $3 the run's task ids. */
export const SET_TICK_TASKS = `UPDATE schedule_ticks SET task_ids = $3::bigint[] WHERE schedule_name = $1 AND tick_at = $2::timestamptz`;

/**
 * $1 name, $2 the next run the pass read, $3 the next run now, $4 the tick run (null: none), $5 the
 * result (JSON; null: unchanged), $6 now. No row when the schedule was paused, changed or passed since.
 */
export const RECORD_PASS = `
  UPDATE schedules SET next_run_at = $3::timestamptz, last_run_at = coalesce($4::timestamptz, last_run_at),
      last_result = coalesce($5::jsonb, last_result), updated_at = $6::timestamptz
  WHERE name = $1 AND enabled AND next_run_at = $2::timestamptz
  RETURNING name`;

/** $1 name. The results of the completed tasks of its latest tick that has any (ticks newest first, by the primary key). */
export const LAST_RUN_RESULTS = `
  SELECT t.result FROM tasks t
  WHERE t.status = 'completed' AND t.id = ANY (coalesce((
    SELECT k.task_ids FROM schedule_ticks k
    WHERE k.schedule_name = $1 AND EXISTS (SELECT 1 FROM tasks c WHERE c.id = ANY (k.task_ids) AND c.status = 'completed')
    ORDER BY k.tick_at DESC LIMIT 1), '{}'))
  ORDER BY t.id`;
