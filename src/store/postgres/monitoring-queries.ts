/**
 * Monitoring statements that take "now" from the store's clock (the views of migration 003 use the
 * database's). Conventions as in queries.ts.
 */

/**
 * $1 the window's start, $2 its end. The tasks that finished in the window, grouped by minute and
 * status (see ThroughputGroupRow). One branch per status so the completed ones are read through
 * tasks_completed_by_time; the failed ones (the dead letter, small) through tasks_by_status. Pickup:
 * ready (scheduled_for) to the last claim, never negative (a task claimed by id before it was due).
 */
export const THROUGHPUT = `
  SELECT floor(extract(epoch FROM f.completed_at - $1::timestamptz) / 60)::integer AS minute, f.status,
         count(*)::integer AS tasks, count(f.claimed_at)::integer AS picked,
         sum(GREATEST(0, extract(epoch FROM f.claimed_at - f.scheduled_for))) FILTER (WHERE f.claimed_at IS NOT NULL)::float8 AS pickup_sum,
         max(GREATEST(0, extract(epoch FROM f.claimed_at - f.scheduled_for))) FILTER (WHERE f.claimed_at IS NOT NULL)::float8 AS pickup_max
  FROM (
    SELECT status, completed_at, claimed_at, scheduled_for FROM tasks
    WHERE status = 'completed' AND completed_at >= $1::timestamptz AND completed_at < $2::timestamptz
    UNION ALL
    SELECT status, completed_at, claimed_at, scheduled_for FROM tasks
    WHERE status = 'failed' AND completed_at >= $1::timestamptz AND completed_at < $2::timestamptz
  ) AS f
  GROUP BY 1, 2`;
