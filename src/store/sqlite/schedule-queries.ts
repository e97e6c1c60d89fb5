/**
 * Statements of recurring schedules (SQLite). A run is several of these inside one BEGIN IMMEDIATE
 * transaction (see SqliteStore.writeRun): with one writer at a time, the tick's primary key and the
 * pass's check of next_run_at see every earlier run.
 */

export const INSERT_SCHEDULE = `
  INSERT INTO schedules (name, task_type, params, cron, timezone, enabled, fan_out, concurrency_key, unique_key, priority, missed_ticks,
                         next_run_at, created_at, updated_at)
  VALUES (@name, @taskType, @params, @cron, @timezone, @enabled, @fanOut, @concurrencyKey, @uniqueKey, @priority, @missedTicks,
          @nextRunAt, @now, @now)
  RETURNING *`;

export const UPDATE_SCHEDULE = `
  UPDATE schedules SET task_type = @taskType, params = @params, cron = @cron, timezone = @timezone, enabled = @enabled,
      fan_out = @fanOut, concurrency_key = @concurrencyKey, unique_key = @uniqueKey, priority = @priority, missed_ticks = @missedTicks,
      next_run_at = @nextRunAt, updated_at = @now
  WHERE name = @name
  RETURNING *`;

export const GET_SCHEDULE = `SELECT * FROM schedules WHERE name = ?`;

export const LIST_SCHEDULES = `SELECT * FROM schedules ORDER BY name`;

export const SET_SCHEDULE_ENABLED = `
  UPDATE schedules SET enabled = @enabled, next_run_at = @nextRunAt, updated_at = @now WHERE name = @name RETURNING *`;

/** The pending tasks of the schedule's runs, cancelled (see the PostgreSQL statement); the caller logs their events. */
export const CANCEL_SCHEDULE_TASKS = `
  UPDATE tasks SET status = 'cancelled', completed_at = @now, reserved_for = NULL, reserved_until = NULL, updated_at = @now
  WHERE id IN (SELECT j.value FROM schedule_ticks k, json_each(k.task_ids) j WHERE k.schedule_name = @name) AND status = 'pending'
  RETURNING id`;

/** Its ticks go with it (foreign_keys is on). */
export const DELETE_SCHEDULE = `DELETE FROM schedules WHERE name = ? RETURNING *`;

export const DUE_SCHEDULES = `
  SELECT * FROM schedules WHERE enabled = 1 AND next_run_at <= ? ORDER BY next_run_at, name LIMIT 1000`;

/** No row changed when this tick fired before. */
export const INSERT_TICK = `
  INSERT INTO schedule_ticks (schedule_name, tick_at, fired_at) VALUES (@name, @tickAt, @now)
  ON CONFLICT (schedule_name, tick_at) DO NOTHING`;

export const SET_TICK_TASKS = `UPDATE schedule_ticks SET task_ids = @taskIds WHERE schedule_name = @name AND tick_at = @tickAt`;

/** No row changed when the schedule was paused, changed or passed since the pass read it. */
export const RECORD_PASS = `
  UPDATE schedules SET next_run_at = @nextRunAt, last_run_at = coalesce(@lastRunAt, last_run_at),
      last_result = coalesce(@result, last_result), updated_at = @now
  WHERE name = @name AND enabled = 1 AND next_run_at = @expected`;

/** The results of the completed tasks of the schedule's latest tick that has any. */
export const LAST_RUN_RESULTS = `
  SELECT t.result FROM tasks t
  WHERE t.status = 'completed' AND t.id IN (SELECT value FROM json_each(coalesce((
    SELECT k.task_ids FROM schedule_ticks k
    WHERE k.schedule_name = ? AND EXISTS (SELECT 1 FROM json_each(k.task_ids) j JOIN tasks c ON c.id = j.value WHERE c.status = 'completed')
    ORDER BY k.tick_at DESC LIMIT 1), '[]')))
  ORDER BY t.id`;
