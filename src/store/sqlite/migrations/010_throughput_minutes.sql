-- throughput() and v_worker_capacity read every task that finished in their window: with 200,000
-- completions in the last hour, every call read them all, on every dashboard refresh. They read
-- per-minute figures instead, kept by a trigger in the transaction that ends each task, as
-- completed_totals are (migration 009); the coordinator's sweep drops the minutes older than
-- throughput()'s longest window. A minute keeps what finished in it: a failed task retried later, or
-- a task deleted by retention, still counts where it ended. Minutes are times as the store writes
-- them (ISO-8601, UTC), seconds zero.
CREATE TABLE throughput_minutes (
  minute     TEXT    NOT NULL,
  task_type  TEXT    NOT NULL,
  status     TEXT    NOT NULL CHECK (status IN ('completed', 'failed')),
  tasks      INTEGER NOT NULL,
  -- Of those, the ones ever claimed (a task failed by a sweep may not have been), their pickup
  -- seconds (ready to last claim) added up, and the longest.
  picked     INTEGER NOT NULL,
  pickup_sum REAL    NOT NULL,
  pickup_max REAL,
  PRIMARY KEY (minute, task_type, status)
) WITHOUT ROWID;
-- Pickup: seconds from ready to the last claim, never negative (a task claimed by id before it was
-- due), NULL for a task never claimed.
INSERT INTO throughput_minutes (minute, task_type, status, tasks, picked, pickup_sum, pickup_max)
SELECT minute, task_type, status, count(*), count(pickup), coalesce(sum(pickup), 0), max(pickup)
FROM (SELECT strftime('%Y-%m-%dT%H:%M:00.000Z', completed_at) AS minute, task_type, status,
             CASE WHEN claimed_at IS NOT NULL THEN max(0, (julianday(claimed_at) - julianday(scheduled_for)) * 86400.0) END AS pickup
      FROM tasks
      WHERE status IN ('completed', 'failed') AND completed_at >= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-25 hours'))
GROUP BY minute, task_type, status;
-- max() of two values is NULL if either is: the coalesces keep the longest pickup when one side has none.
CREATE TRIGGER tasks_finished_per_minute AFTER UPDATE OF status ON tasks
WHEN NEW.status IN ('completed', 'failed') AND OLD.status <> NEW.status AND NEW.completed_at IS NOT NULL
BEGIN
  INSERT INTO throughput_minutes (minute, task_type, status, tasks, picked, pickup_sum, pickup_max)
  SELECT strftime('%Y-%m-%dT%H:%M:00.000Z', NEW.completed_at), NEW.task_type, NEW.status, 1, pickup IS NOT NULL, coalesce(pickup, 0), pickup
  FROM (SELECT CASE WHEN NEW.claimed_at IS NOT NULL THEN max(0, (julianday(NEW.claimed_at) - julianday(NEW.scheduled_for)) * 86400.0) END AS pickup)
  WHERE true -- an upsert's SELECT needs a WHERE, or SQLite reads ON CONFLICT as a join's ON
  ON CONFLICT (minute, task_type, status) DO UPDATE SET
    tasks = tasks + 1, picked = picked + excluded.picked, pickup_sum = pickup_sum + excluded.pickup_sum,
    pickup_max = max(coalesce(pickup_max, excluded.pickup_max), coalesce(excluded.pickup_max, pickup_max));
END;

-- As PostgreSQL's migration 014 has it: the last hour's completions from the minutes, and the
-- pending and the leased tasks counted through their partial indexes, not a scan of the history.
DROP VIEW v_worker_capacity;
CREATE VIEW v_worker_capacity AS
WITH live AS (
  SELECT task_type, sum(pending_tasks) AS pending_tasks, sum(ready_tasks) AS ready_tasks, sum(running_tasks) AS running_tasks
  FROM (SELECT task_type, count(*) AS pending_tasks,
               count(*) FILTER (WHERE scheduled_for <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) AS ready_tasks, 0 AS running_tasks
        FROM tasks WHERE status = 'pending' GROUP BY task_type
        UNION ALL
        SELECT task_type, 0, 0, count(*) FROM tasks WHERE status IN ('claimed', 'running') GROUP BY task_type)
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
