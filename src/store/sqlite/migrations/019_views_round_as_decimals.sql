-- The monitoring views' rounded ratios, rounded as PostgreSQL rounds them: half up on the exact
-- decimal. round() of a float rounds the binary value, just under the half for most decimals ending
-- in 5: 3 tasks an hour among 20 workers, 0.15 a worker-hour, came out as 0.1 where PostgreSQL says
-- 0.2; 3 pending at 40 an hour, 0.075 hours to drain, as 0.07; 247 successful reassignments of 2,000,
-- 12.35 %, as 12.3. Each ratio is of whole counts, so integer division does it exactly:
-- floor((2 * 10^d * a + b) / (2 * b)) / 10^d. The views are otherwise 015's and 003's.
DROP VIEW v_worker_capacity;
CREATE VIEW v_worker_capacity AS
WITH live AS (
  SELECT task_type, sum(pending_tasks) AS pending_tasks, sum(ready_tasks) AS ready_tasks, sum(running_tasks) AS running_tasks,
         min(ready_since) AS ready_since
  FROM (SELECT task_type, count(*) AS pending_tasks,
               count(*) FILTER (WHERE scheduled_for <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) AS ready_tasks, 0 AS running_tasks,
               min(scheduled_for) FILTER (WHERE scheduled_for <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) AS ready_since
        FROM tasks WHERE status = 'pending' GROUP BY task_type
        UNION ALL
        SELECT task_type, 0, 0, count(*), NULL FROM tasks WHERE status IN ('claimed', 'running') GROUP BY task_type)
  GROUP BY task_type
),
done AS (
  SELECT task_type, sum(tasks) AS completed_last_hour
  FROM throughput_minutes WHERE status = 'completed' AND minute > strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 hour')
  GROUP BY task_type
),
staffed AS (
  SELECT r.value AS task_type, count(*) AS active_workers
  FROM workers w, json_each(w.roles) r
  WHERE w.status = 'active' AND w.last_seen_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-2 minutes')
  GROUP BY r.value
),
registered AS (
  SELECT t.name AS task_type, t.max_running FROM task_types t
  WHERE t.version = (SELECT max(n.version) FROM task_types n WHERE n.name = t.name)
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
       (20 * completed_last_hour + active_workers) / NULLIF(2 * active_workers, 0) / 10.0 AS tasks_per_worker_hour,
       CASE WHEN pending_tasks = 0 THEN 0
            WHEN active_workers = 0 THEN NULL
            ELSE (200 * pending_tasks + completed_last_hour) / NULLIF(2 * completed_last_hour, 0) / 100.0 END AS estimated_hours_to_drain,
       CASE WHEN pending_tasks = 0 THEN 0
            WHEN active_workers = 0 THEN NULL
            ELSE CAST(ceil(1.0 * pending_tasks * active_workers / NULLIF(completed_last_hour, 0)) AS INTEGER) END AS workers_needed_1h,
       CASE WHEN pending_tasks = 0 THEN 0
            WHEN active_workers = 0 THEN NULL
            ELSE CAST(ceil(1.0 * pending_tasks * active_workers / NULLIF(completed_last_hour, 0) / 4) AS INTEGER) END AS workers_needed_4h,
       CASE WHEN pending_tasks = 0 THEN 0
            WHEN active_workers = 0 THEN NULL
            ELSE CAST(ceil(1.0 * pending_tasks * active_workers / NULLIF(completed_last_hour, 0) / 8) AS INTEGER) END AS workers_needed_8h,
       round((julianday('now') - julianday(ready_since)) * 86400, 1) AS oldest_ready_seconds
FROM figures;

DROP VIEW v_reassignment_stats;
CREATE VIEW v_reassignment_stats AS
SELECT count(*) AS total,
       coalesce(sum(success), 0) AS successful,
       (2000 * sum(success) + count(*)) / NULLIF(2 * count(*), 0) / 10.0 AS success_rate_percent
FROM reassignment_events
WHERE created_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-24 hours');
