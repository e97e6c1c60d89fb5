/**
 * Monitoring statements that take "now" from the store's clock (the views of migration 003 use the
 * database's). Conventions as in queries.ts.
 */

/**
 * $1 the window's start, $2 its end. The completed and failed tasks of each minute of the window
 * (see ThroughputGroupRow), from the folded minutes and the tallies not folded yet (migration 014).
 */
export const THROUGHPUT = `
  SELECT floor(extract(epoch FROM f.minute - $1::timestamptz) / 60)::integer AS minute, f.status,
         sum(f.tasks)::integer AS tasks, sum(f.picked)::integer AS picked,
         sum(f.pickup_sum)::float8 AS pickup_sum, max(f.pickup_max)::float8 AS pickup_max
  FROM (
    SELECT minute, status, tasks, picked, pickup_sum, pickup_max FROM throughput_minutes
    WHERE minute >= $1::timestamptz AND minute < $2::timestamptz
    UNION ALL
    SELECT minute, status, tasks, picked, pickup_sum, pickup_max FROM throughput_tallies
    WHERE minute >= $1::timestamptz AND minute < $2::timestamptz
  ) AS f
  GROUP BY 1, 2`;
