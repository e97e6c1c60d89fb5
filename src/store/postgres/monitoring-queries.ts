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

/**
 * $1 how many failed tasks to group, the newest by failure time (tasks_failed_by_time, walked
 * backwards), $2 how many characters of an error to answer (see FailureGroupRow). One row more is read
 * to say whether older failures are left out: `read` on every row. No params, checkpoint or result.
 */
export const FAILURES = `
  WITH newest AS (
    SELECT id, task_type, error_message, completed_at, coalesce(completed_at, updated_at) AS failed_at FROM tasks
    WHERE status = 'failed' ORDER BY completed_at DESC, id DESC LIMIT $1::integer + 1
  ),
  numbered AS (
    SELECT *, row_number() OVER (ORDER BY completed_at DESC, id DESC) AS n, count(*) OVER () AS read FROM newest
  )
  SELECT task_type, left(error_message, $2::integer) AS error_message, array_agg(id ORDER BY n) AS task_ids,
         max(failed_at) AS latest_at, max(read)::integer AS read
  FROM numbered WHERE n <= $1::integer
  GROUP BY task_type, error_message
  ORDER BY count(*) DESC, max(failed_at) DESC, task_type, error_message`;
