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

/**
 * $1 the oldest minute to keep. Folds the throughput tallies into the minutes (the coordinator's
 * sweep, as FOLD_COMPLETED_TALLIES) and drops the minutes no window reaches. A tally older than $1
 * is dropped with them, so no row is both deleted and upserted by the one statement.
 */
export const FOLD_THROUGHPUT_TALLIES = `
  WITH folded AS (DELETE FROM throughput_tallies RETURNING *),
  expired AS (DELETE FROM throughput_minutes WHERE minute < $1::timestamptz)
  INSERT INTO throughput_minutes AS m (minute, task_type, status, tasks, picked, pickup_sum, pickup_max)
  SELECT minute, task_type, status, sum(tasks), sum(picked), sum(pickup_sum), max(pickup_max)
  FROM folded WHERE minute >= $1::timestamptz
  GROUP BY minute, task_type, status
  ON CONFLICT (minute, task_type, status) DO UPDATE SET
    tasks = m.tasks + excluded.tasks, picked = m.picked + excluded.picked, pickup_sum = m.pickup_sum + excluded.pickup_sum,
    pickup_max = GREATEST(m.pickup_max, excluded.pickup_max)`;
