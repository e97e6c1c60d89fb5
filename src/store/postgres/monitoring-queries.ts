/**
 * Monitoring statements that take "now" from the store's clock (the views of migration 003 use the
 * database's). Conventions as in queries.ts.
 */

/**
 * $1 the window's start, $2 its end, $3 a task type or null for all. The completed and failed tasks
 * of each minute of the window (see ThroughputGroupRow), from the folded minutes and the tallies not
 * folded yet (migration 014).
 */
export const THROUGHPUT = `
  SELECT floor(extract(epoch FROM f.minute - $1::timestamptz) / 60)::integer AS minute, f.status,
         sum(f.tasks)::integer AS tasks, sum(f.picked)::integer AS picked,
         sum(f.pickup_sum)::float8 AS pickup_sum, max(f.pickup_max)::float8 AS pickup_max
  FROM (
    SELECT minute, status, tasks, picked, pickup_sum, pickup_max FROM throughput_minutes
    WHERE minute >= $1::timestamptz AND minute < $2::timestamptz AND ($3::text IS NULL OR task_type = $3::text)
    UNION ALL
    SELECT minute, status, tasks, picked, pickup_sum, pickup_max FROM throughput_tallies
    WHERE minute >= $1::timestamptz AND minute < $2::timestamptz AND ($3::text IS NULL OR task_type = $3::text)
  ) AS f
  GROUP BY 1, 2`;
