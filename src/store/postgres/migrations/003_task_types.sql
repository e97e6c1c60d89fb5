-- The task type registry (versioned definitions with per-type defaults and policy), the version each
-- task was created under, the serialization point of the max_running cap, and monitoring views.

-- Rows are immutable: registering a changed definition adds version + 1, so a task's recorded
-- version always names the definition it was created under.
CREATE TABLE task_types (
  name            text        NOT NULL,
  version         integer     NOT NULL CHECK (version >= 1),
  description     text,
  params_schema   jsonb,      -- JSON Schema (draft-07) for params; null = any JSON object
  priority        integer     NOT NULL,
  max_attempts    integer     NOT NULL CHECK (max_attempts >= 1),
  backoff         jsonb       NOT NULL, -- {baseSeconds, factor, maxSeconds, jitter}
  timeout_seconds integer,
  recovery_policy text        NOT NULL CHECK (recovery_policy IN ('retry', 'fail')),
  max_running     integer     CHECK (max_running >= 1), -- cap on claimed + running tasks of the type; null = none
  created_at      timestamptz NOT NULL,
  PRIMARY KEY (name, version)
);
-- What every claim reads to learn the capped types: only versions that set a cap.
CREATE INDEX task_types_capped ON task_types (name, version) WHERE max_running IS NOT NULL;

-- Null for tasks of unregistered types. No foreign key: registry rows are never deleted, and a key
-- check would add a lookup and a row lock to every insert.
ALTER TABLE tasks ADD COLUMN task_type_version integer;

-- Counting the claimed and running tasks of one type (the cap, the capacity view) without reading its history.
CREATE INDEX tasks_leased_by_type ON tasks (task_type) WHERE status IN ('claimed', 'running');
-- Throughput over the last hour (v_worker_capacity) without reading all of history.
CREATE INDEX tasks_completed_by_time ON tasks (completed_at) WHERE status = 'completed';

-- The cap's serialization point. A claim that may take capped types calls this with them (other
-- claims do not call it: no lock, no count). It takes one transaction-level advisory lock per type,
-- in name order so two claims never wait on each other crosswise, and only then counts. The count is
-- a separate statement inside a VOLATILE function, so under READ COMMITTED it runs on a fresh
-- snapshot taken after the locks were granted: it sees every claim committed by earlier holders,
-- which release the lock only when they commit. (Counting in the claim statement itself would use the
-- snapshot taken before the lock was granted, and claimers waiting in turn would all see the same room.)
-- Returns how many more tasks of each type may be claimed now, per the latest version's cap.
-- ROWS 1: the default estimate of 1000 rows inflates the claim's cost until the planner JIT-compiles
-- it, which takes seconds.
CREATE FUNCTION taskpool_cap_room(capped text[]) RETURNS TABLE (cap_type text, room integer)
LANGUAGE plpgsql VOLATILE ROWS 1 AS $$
DECLARE
  type_name text;
BEGIN
  FOR type_name IN SELECT DISTINCT c FROM unnest(capped) AS c ORDER BY c LOOP
    PERFORM pg_advisory_xact_lock(hashtext('taskpool:cap:' || current_schema()), hashtext(type_name));
  END LOOP;
  RETURN QUERY
    SELECT latest.name, latest.max_running - (
             SELECT count(*)::integer FROM tasks t WHERE t.task_type = latest.name AND t.status IN ('claimed', 'running'))
    FROM (SELECT DISTINCT ON (tt.name) tt.name, tt.max_running FROM task_types tt
          WHERE tt.name = ANY(capped) ORDER BY tt.name, tt.version DESC) AS latest
    WHERE latest.max_running IS NOT NULL;
END
$$;

-- Monitoring views for operators reading with plain SQL. Unlike the store's statements they use the
-- server's now(): they describe the present.

-- Seed 000's worker status: what each worker holds, how long since it was heard from, how loaded it is.
CREATE VIEW worker_status AS
SELECT w.worker_id, w.status, w.roles, w.hostname, w.capacity, w.current_load,
       round(100.0 * w.current_load / w.capacity, 1)::float8 AS load_percent,
       (SELECT count(*) FROM tasks t WHERE t.worker_id = w.worker_id AND t.status IN ('claimed', 'running')) AS active_tasks,
       w.last_seen_at,
       GREATEST(0, round(extract(epoch FROM now() - w.last_seen_at)))::integer AS seconds_since_heartbeat
FROM workers w;

-- Seed 004's capacity planning, one row per task type that has work, workers, recent throughput or a
-- registration. active_workers: active, heard from within 2 minutes, with the type among its roles.
-- tasks_per_worker_hour = tasks completed in the last hour / active workers;
-- estimated_hours_to_drain = pending / tasks completed in the last hour (null without throughput);
-- workers_needed_Nh = workers at that rate to finish the pending tasks within N hours.
CREATE VIEW v_worker_capacity AS
WITH live AS (
  SELECT task_type,
         count(*) FILTER (WHERE status = 'pending') AS pending_tasks,
         count(*) FILTER (WHERE status = 'pending' AND scheduled_for <= now()) AS ready_tasks,
         count(*) FILTER (WHERE status IN ('claimed', 'running')) AS running_tasks
  FROM tasks WHERE status IN ('pending', 'claimed', 'running')
  GROUP BY task_type
),
done AS (
  SELECT task_type, count(*) AS completed_last_hour
  FROM tasks WHERE status = 'completed' AND completed_at > now() - interval '1 hour'
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

-- Seed 003's reassignment success rate over the last 24 hours.
CREATE VIEW v_reassignment_stats AS
SELECT count(*) AS total,
       count(*) FILTER (WHERE success) AS successful,
       round(100.0 * count(*) FILTER (WHERE success) / NULLIF(count(*), 0), 1)::float8 AS success_rate_percent
FROM reassignment_events
WHERE created_at > now() - interval '24 hours';

-- Seed 003: the workers whose tasks had to be taken back most often over 7 days (each event is one
-- task of theirs recovered after they died or let a lease expire).
CREATE VIEW v_failing_workers AS
SELECT from_worker_id, count(*) AS failure_count, max(created_at) AS last_failure_at
FROM reassignment_events
WHERE created_at > now() - interval '7 days'
GROUP BY from_worker_id;

-- Seed 003: tasks reassigned more than once (a task that keeps killing its workers?).
CREATE VIEW v_repeated_reassignments AS
SELECT task_id, count(*) AS reassignment_count, max(created_at) AS last_reassignment_at
FROM reassignment_events
GROUP BY task_id
HAVING count(*) > 1;
