-- The task type registry (versioned definitions with per-type defaults and policy), the version each
-- task was created under, and monitoring views. As PostgreSQL's 003, less the cap's lock function:
-- SQLite's single writer already serializes claims, so the claim counts inside its transaction.

-- Rows are immutable: registering a changed definition adds version + 1.
CREATE TABLE task_types (
  name            TEXT    NOT NULL,
  version         INTEGER NOT NULL CHECK (version >= 1),
  description     TEXT,
  params_schema   TEXT,    -- JSON Schema (draft-07) for params; null = any JSON object
  priority        INTEGER NOT NULL,
  max_attempts    INTEGER NOT NULL CHECK (max_attempts >= 1),
  backoff         TEXT    NOT NULL, -- JSON {baseSeconds, factor, maxSeconds, jitter}
  timeout_seconds INTEGER,
  recovery_policy TEXT    NOT NULL CHECK (recovery_policy IN ('retry', 'fail')),
  max_running     INTEGER CHECK (max_running >= 1), -- cap on claimed + running tasks of the type; null = none
  created_at      TEXT    NOT NULL,
  PRIMARY KEY (name, version)
);
CREATE INDEX task_types_capped ON task_types (name, version) WHERE max_running IS NOT NULL;

-- Null for tasks of unregistered types.
ALTER TABLE tasks ADD COLUMN task_type_version INTEGER;

CREATE INDEX tasks_leased_by_type ON tasks (task_type) WHERE status IN ('claimed', 'running');
CREATE INDEX tasks_completed_by_time ON tasks (completed_at) WHERE status = 'completed';

-- Monitoring views for operators reading with plain SQL; they use the wall clock (datetime('now')).
-- Stored times are ISO-8601 text, so "within the last hour" compares them as strings with a bound in
-- the same format, and durations come from julianday().

CREATE VIEW worker_status AS
SELECT w.worker_id, w.status, w.roles, w.hostname, w.capacity, w.current_load,
       round(100.0 * w.current_load / w.capacity, 1) AS load_percent,
       (SELECT count(*) FROM tasks t WHERE t.worker_id = w.worker_id AND t.status IN ('claimed', 'running')) AS active_tasks,
       w.last_seen_at,
       max(0, CAST(round((julianday('now') - julianday(w.last_seen_at)) * 86400) AS INTEGER)) AS seconds_since_heartbeat
FROM workers w;

-- The figures and formulas of PostgreSQL's v_worker_capacity (see its migration 003).
CREATE VIEW v_worker_capacity AS
WITH live AS (
  SELECT task_type,
         count(*) FILTER (WHERE status = 'pending') AS pending_tasks,
         count(*) FILTER (WHERE status = 'pending' AND scheduled_for <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) AS ready_tasks,
         count(*) FILTER (WHERE status IN ('claimed', 'running')) AS running_tasks
  FROM tasks WHERE status IN ('pending', 'claimed', 'running')
  GROUP BY task_type
),
done AS (
  SELECT task_type, count(*) AS completed_last_hour
  FROM tasks WHERE status = 'completed' AND completed_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 hour')
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
         coalesce(d.completed_last_hour, 0) AS completed_last_hour, r.max_running
  FROM (SELECT task_type FROM live UNION SELECT task_type FROM done
        UNION SELECT task_type FROM staffed UNION SELECT task_type FROM registered) AS k
  LEFT JOIN live l USING (task_type)
  LEFT JOIN done d USING (task_type)
  LEFT JOIN staffed s USING (task_type)
  LEFT JOIN registered r USING (task_type)
)
SELECT task_type, pending_tasks, ready_tasks, running_tasks, active_workers, completed_last_hour, max_running,
       round(1.0 * completed_last_hour / NULLIF(active_workers, 0), 1) AS tasks_per_worker_hour,
       CASE WHEN pending_tasks = 0 THEN 0
            ELSE round(1.0 * pending_tasks / NULLIF(completed_last_hour, 0), 2) END AS estimated_hours_to_drain,
       CAST(ceil(1.0 * pending_tasks * active_workers / NULLIF(completed_last_hour, 0)) AS INTEGER) AS workers_needed_1h,
       CAST(ceil(1.0 * pending_tasks * active_workers / NULLIF(completed_last_hour, 0) / 4) AS INTEGER) AS workers_needed_4h,
       CAST(ceil(1.0 * pending_tasks * active_workers / NULLIF(completed_last_hour, 0) / 8) AS INTEGER) AS workers_needed_8h
FROM figures;

CREATE VIEW v_reassignment_stats AS
SELECT count(*) AS total,
       coalesce(sum(success), 0) AS successful,
       round(100.0 * sum(success) / NULLIF(count(*), 0), 1) AS success_rate_percent
FROM reassignment_events
WHERE created_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-24 hours');

CREATE VIEW v_failing_workers AS
SELECT from_worker_id, count(*) AS failure_count, max(created_at) AS last_failure_at
FROM reassignment_events
WHERE created_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-7 days')
GROUP BY from_worker_id;

CREATE VIEW v_repeated_reassignments AS
SELECT task_id, count(*) AS reassignment_count, max(created_at) AS last_reassignment_at
FROM reassignment_events
GROUP BY task_id
HAVING count(*) > 1;
