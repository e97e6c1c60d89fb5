-- How long the longest-waiting ready task of each role has waited (since its scheduled_for: when it
-- was due, or due again after a retry's backoff): the figure to alert on when a role falls behind,
-- which a backlog's size alone does not tell. NULL when none is ready. Read in the same pass over the
-- pending tasks as their counts. The view is otherwise 016's, with the column added last.
CREATE OR REPLACE VIEW v_worker_capacity AS
WITH live AS (
  SELECT task_type, sum(pending_tasks)::bigint AS pending_tasks, sum(ready_tasks)::bigint AS ready_tasks,
         sum(running_tasks)::bigint AS running_tasks, min(ready_since) AS ready_since
  FROM (SELECT task_type, count(*) AS pending_tasks, count(*) FILTER (WHERE scheduled_for <= now()) AS ready_tasks, 0 AS running_tasks,
               min(scheduled_for) FILTER (WHERE scheduled_for <= now()) AS ready_since
        FROM tasks WHERE status = 'pending' GROUP BY task_type
        UNION ALL
        SELECT task_type, 0, 0, count(*), NULL FROM tasks WHERE status IN ('claimed', 'running') GROUP BY task_type) AS counted
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
         coalesce(d.completed_last_hour, 0) AS completed_last_hour, r.max_running, l.ready_since
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
            WHEN active_workers = 0 THEN NULL
            ELSE round(pending_tasks::numeric / NULLIF(completed_last_hour, 0), 2)::float8 END AS estimated_hours_to_drain,
       CASE WHEN pending_tasks = 0 THEN 0
            WHEN active_workers = 0 THEN NULL
            ELSE ceil(pending_tasks::numeric * active_workers / NULLIF(completed_last_hour, 0))::integer END AS workers_needed_1h,
       CASE WHEN pending_tasks = 0 THEN 0
            WHEN active_workers = 0 THEN NULL
            ELSE ceil(pending_tasks::numeric * active_workers / NULLIF(completed_last_hour, 0) / 4)::integer END AS workers_needed_4h,
       CASE WHEN pending_tasks = 0 THEN 0
            WHEN active_workers = 0 THEN NULL
            ELSE ceil(pending_tasks::numeric * active_workers / NULLIF(completed_last_hour, 0) / 8)::integer END AS workers_needed_8h,
       round(extract(epoch FROM now() - ready_since), 1)::float8 AS oldest_ready_seconds
FROM figures;
