-- throughput() and v_worker_capacity read every task that finished in their window, through
-- tasks_completed_by_time and then the table: with 200,000 completions in the last hour (about 55 a
-- second), 162-251 ms for throughput() and 125-152 ms for capacity() per call, paid on every
-- dashboard refresh and growing with the rate (0.35-0.44 ms and 8.7-9.3 ms after; CHANGELOG). They read per-minute figures here instead, kept as completed_totals are
-- (migration 011): each statement that ends tasks completed or failed appends one row per minute,
-- type and status to throughput_tallies, in its own transaction, so no two writers wait on one row;
-- the coordinator's sweep folds the tallies into throughput_minutes in one statement, and drops the
-- minutes older than throughput()'s longest window. Readers add both tables up.
-- The completions' rows count in completed_totals too (the same fold adds them there), so a
-- completion writes one tally, not two: completed_tallies keeps retention's deletions (and the
-- completions of processes of an earlier version during an upgrade). Two tallies per completion
-- statement cost PostgreSQL 14 % more CPU per HTTP claim + complete cycle, whose batches are small.
-- A minute keeps what finished in it: a failed task retried later, or a task deleted by retention,
-- still counts where it ended.
CREATE TABLE throughput_minutes (
  minute     timestamptz NOT NULL,
  task_type  text        NOT NULL,
  status     text        NOT NULL CHECK (status IN ('completed', 'failed')),
  tasks      bigint      NOT NULL,
  -- Of those, the ones ever claimed (a task failed by a sweep may not have been), their pickup
  -- seconds (ready to last claim) added up, and the longest.
  picked     bigint      NOT NULL,
  pickup_sum float8      NOT NULL,
  pickup_max float8,
  PRIMARY KEY (minute, task_type, status)
);
CREATE TABLE throughput_tallies (
  minute     timestamptz NOT NULL,
  task_type  text        NOT NULL,
  status     text        NOT NULL,
  tasks      bigint      NOT NULL,
  picked     bigint      NOT NULL,
  pickup_sum float8      NOT NULL,
  pickup_max float8
);
-- Pickup: seconds from ready to the last claim, never negative, NULL for a task never claimed
-- (GREATEST ignores a NULL, so the CASE keeps it).
INSERT INTO throughput_minutes (minute, task_type, status, tasks, picked, pickup_sum, pickup_max)
SELECT minute, task_type, status, count(*), count(pickup), coalesce(sum(pickup), 0), max(pickup)
FROM (SELECT to_timestamp(floor(extract(epoch FROM completed_at) / 60) * 60) AS minute, task_type, status,
             CASE WHEN claimed_at IS NOT NULL THEN GREATEST(0, extract(epoch FROM claimed_at - scheduled_for)) END AS pickup
      FROM tasks
      WHERE status IN ('completed', 'failed') AND completed_at >= now() - interval '25 hours') AS finished
GROUP BY minute, task_type, status;

-- As in migration 003, with two changes that keep it from reading the history:
-- - the last hour's completions come from the minutes: the minutes that start within the last hour,
--   the current one included (between 59 and 60 minutes, as throughput()'s default window);
-- - the pending and the leased tasks are counted in two branches, each through its partial indexes:
--   one filter on the three statuses matched no index, and the planner scanned the whole table
--   (200,000 completed tasks: 99 ms).
CREATE OR REPLACE VIEW v_worker_capacity AS
WITH live AS (
  SELECT task_type, sum(pending_tasks)::bigint AS pending_tasks, sum(ready_tasks)::bigint AS ready_tasks,
         sum(running_tasks)::bigint AS running_tasks
  FROM (SELECT task_type, count(*) AS pending_tasks, count(*) FILTER (WHERE scheduled_for <= now()) AS ready_tasks, 0 AS running_tasks
        FROM tasks WHERE status = 'pending' GROUP BY task_type
        UNION ALL
        SELECT task_type, 0, 0, count(*) FROM tasks WHERE status IN ('claimed', 'running') GROUP BY task_type) AS counted
  GROUP BY task_type
),
done AS (
  SELECT task_type, sum(tasks)::bigint AS completed_last_hour
  FROM (SELECT task_type, tasks, minute, status FROM throughput_minutes
        UNION ALL SELECT task_type, tasks, minute, status FROM throughput_tallies) AS m
  WHERE status = 'completed' AND minute > now() - interval '1 hour'
  GROUP BY task_type
),
staffed AS (
  SELECT role AS task_type, count(*) AS active_workers
  FROM workers, unnest(roles) AS role
  WHERE status = 'active' AND last_seen_at > now() - interval '2 minutes'
  GROUP BY role
),
registered AS (
  SELECT DISTINCT ON (name) name AS task_type, max_running FROM task_types ORDER BY name, version DESC
),
figures AS (
  SELECT k.task_type,
         coalesce(l.pending_tasks, 0) AS pending_tasks, coalesce(l.ready_tasks, 0) AS ready_tasks,
         coalesce(l.running_tasks, 0) AS running_tasks, coalesce(s.active_workers, 0) AS active_workers,
         coalesce(d.completed_last_hour, 0) AS completed_last_hour, r.max_running
  FROM (SELECT task_type FROM live UNION SELECT task_type FROM done
        UNION SELECT task_type FROM staffed UNION SELECT task_type FROM registered) AS k
  LEFT JOIN live l USING (task_type)
  LEFT JOIN done d USING (task_type)
  LEFT JOIN staffed s USING (task_type)
  LEFT JOIN registered r USING (task_type)
)
SELECT task_type, pending_tasks, ready_tasks, running_tasks, active_workers, completed_last_hour, max_running,
       round(completed_last_hour::numeric / NULLIF(active_workers, 0), 1)::float8 AS tasks_per_worker_hour,
       CASE WHEN pending_tasks = 0 THEN 0
            ELSE round(pending_tasks::numeric / NULLIF(completed_last_hour, 0), 2)::float8 END AS estimated_hours_to_drain,
       ceil(pending_tasks::numeric * active_workers / NULLIF(completed_last_hour, 0))::integer AS workers_needed_1h,
       ceil(pending_tasks::numeric * active_workers / NULLIF(completed_last_hour, 0) / 4)::integer AS workers_needed_4h,
       ceil(pending_tasks::numeric * active_workers / NULLIF(completed_last_hour, 0) / 8)::integer AS workers_needed_8h
FROM figures;
