/**
 * Monitoring statements that take "now" from the store's clock (the views of migration 003 use the
 * database's). Conventions as in queries.ts.
 */

/**
 * @since, @until: the window. As PostgreSQL's THROUGHPUT (one branch per status, for the indexes).
 * Minutes from whole seconds: the window starts on a whole minute, so dropping the milliseconds never
 * moves a task into another minute (julianday's floating point could). MAX(0, NULL) is NULL here, so
 * tasks never claimed stay out of the pickup figures.
 */
export const THROUGHPUT = `
  SELECT (CAST(strftime('%s', f.completed_at) AS INTEGER) - CAST(strftime('%s', @since) AS INTEGER)) / 60 AS minute, f.status,
         count(*) AS tasks, count(f.claimed_at) AS picked,
         sum(MAX(0, (julianday(f.claimed_at) - julianday(f.scheduled_for)) * 86400.0)) AS pickup_sum,
         max(MAX(0, (julianday(f.claimed_at) - julianday(f.scheduled_for)) * 86400.0)) AS pickup_max
  FROM (
    SELECT status, completed_at, claimed_at, scheduled_for FROM tasks
    WHERE status = 'completed' AND completed_at >= @since AND completed_at < @until
    UNION ALL
    SELECT status, completed_at, claimed_at, scheduled_for FROM tasks
    WHERE status = 'failed' AND completed_at >= @since AND completed_at < @until
  ) AS f
  GROUP BY 1, 2`;
