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
