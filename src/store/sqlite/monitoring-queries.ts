/**
 * Monitoring statements that take "now" from the store's clock (the views of migration 003 use the
 * database's). Conventions as in queries.ts.
 */

/**
 * @since, @until: the window; @taskType: a task type, or null for all. The completed and failed
 * tasks of each minute of the window (see ThroughputGroupRow), from the minutes migration 010's
 * trigger keeps. Minutes from whole seconds: julianday's floating point could move one into its
 * neighbour.
 */
export const THROUGHPUT = `
  SELECT (CAST(strftime('%s', m.minute) AS INTEGER) - CAST(strftime('%s', @since) AS INTEGER)) / 60 AS minute, m.status,
         sum(m.tasks) AS tasks, sum(m.picked) AS picked, sum(m.pickup_sum) AS pickup_sum, max(m.pickup_max) AS pickup_max
  FROM throughput_minutes m
  WHERE m.minute >= @since AND m.minute < @until AND (@taskType IS NULL OR m.task_type = @taskType)
  GROUP BY 1, 2`;

/** @keptSince: the oldest minute to keep. Drops the minutes no window reaches (the coordinator's sweep). */
export const DROP_OLD_THROUGHPUT = `DELETE FROM throughput_minutes WHERE minute < @keptSince`;

/**
 * @limit: how many failed tasks to group, the newest by failure time (tasks_failed_by_time, walked
 * backwards); @shown: how many characters of an error to answer (see FailureGroupRow). One row more is
 * read to say whether older failures are left out: `read` on every row. No params, checkpoint or result.
 */
export const FAILURES = `
  WITH newest AS (
    SELECT id, task_type, error_message, completed_at, coalesce(completed_at, updated_at) AS failed_at FROM tasks
    WHERE status = 'failed' ORDER BY completed_at DESC, id DESC LIMIT @limit + 1
  ),
  numbered AS (
    SELECT *, row_number() OVER (ORDER BY completed_at DESC, id DESC) AS n, count(*) OVER () AS read FROM newest
  )
  SELECT task_type, substr(error_message, 1, @shown) AS error_message, json_group_array(id ORDER BY n) AS task_ids,
         max(failed_at) AS latest_at, max(read) AS read
  FROM numbered WHERE n <= @limit
  GROUP BY task_type, error_message
  ORDER BY count(*) DESC, latest_at DESC, task_type, error_message`;
