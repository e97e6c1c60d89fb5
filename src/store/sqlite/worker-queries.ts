/**
 * Statements of the worker registry, the coordinator's sweep and leadership (SQLite). Each runs
 * inside the caller's BEGIN IMMEDIATE transaction; loops over rows happen in TypeScript (see queries.ts).
 */
import { LEASED_STATUSES } from "../../core/state-machine.js";
import { GONE_RUNS_KEPT } from "../../core/worker.js";
import { DUE_AGAIN, GIVE_UP_HELD_UNIQUE_KEY } from "./queries.js";

const LEASED = LEASED_STATUSES.map((s) => `'${s}'`).join(", ");

/** `list` (a worker's gone_run_ids, a JSON array) with `run` first, as GONE_RUNS_KEPT bounds it; `list` as it is when `run` is null. */
const GONE_WITH = (list: string, run: string) => `CASE WHEN ${run} IS NULL THEN ${list} ELSE (
    SELECT json_group_array(value) FROM (
      SELECT ${run} AS value, -1 AS at UNION ALL SELECT value, key FROM json_each(${list}) WHERE value <> ${run}
      ORDER BY at LIMIT ${GONE_RUNS_KEPT})) END`;

/** Whether `run` is among the runs `list` (gone_run_ids) records as gone. */
const GONE = (list: string, run: string) => `EXISTS (SELECT 1 FROM json_each(${list}) WHERE value = ${run})`;

/** What the beat left out (null) keeps the registered value, or takes its default (@default…, metadata {}) for a new worker. */
export const UPSERT_WORKER = `
  INSERT INTO workers (worker_id, run_id, roles, hostname, pid, version, capacity, current_load, tasks_processed,
                       metadata, status, last_seen_at, started_at)
  VALUES (@workerId, @runId, coalesce(@roles, @defaultRoles), @hostname, @pid, @version, coalesce(@capacity, @defaultCapacity),
          coalesce(@currentLoad, @defaultCurrentLoad), coalesce(@tasksProcessed, @defaultTasksProcessed), coalesce(@metadata, '{}'), 'active', @now, @now)
  ON CONFLICT (worker_id) DO UPDATE SET
    roles = coalesce(@roles, workers.roles), hostname = coalesce(@hostname, workers.hostname), pid = coalesce(@pid, workers.pid),
    version = coalesce(@version, workers.version),
    capacity = coalesce(@capacity, workers.capacity), current_load = coalesce(@currentLoad, workers.current_load),
    tasks_processed = coalesce(@tasksProcessed, workers.tasks_processed),
    metadata = coalesce(@metadata, workers.metadata), status = 'active', last_seen_at = excluded.last_seen_at,
    -- A restart (another run) starts anew (see the PostgreSQL store's WORKER_HEARTBEAT).
    started_at = CASE WHEN workers.status IN ('dead', 'inactive') OR @runId IS NOT workers.run_id THEN excluded.started_at ELSE workers.started_at END,
    gone_at = NULL, run_id = @runId,
    -- A beat of another run, or naming no run, is a restart: the named run before it is replaced, and
    -- recorded as gone, so that run's late shutdown or beats cannot take the new process for it (see
    -- GONE_AFTER_A_BEAT in the PostgreSQL store).
    gone_run_ids = CASE WHEN @runId IS NOT workers.run_id THEN ${GONE_WITH("workers.gone_run_ids", "workers.run_id")} ELSE workers.gone_run_ids END
  -- A beat stamped before its worker was declared dead or shut down leaves it so (see gone_at), and
  -- so does a beat of a run that shut down or was replaced, however late it lands, even after other
  -- runs registered (see gone_run_ids); another run's is a restart.
  WHERE (workers.gone_at IS NULL OR excluded.last_seen_at >= workers.gone_at)
    AND NOT ${GONE("workers.gone_run_ids", "@runId")}`;

export const RENEW_LEASE = `
  UPDATE tasks SET last_heartbeat_at = @now,
      lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', @now, '+' || lease_seconds || ' seconds'), updated_at = @now
  WHERE id = @taskId AND lease_token = @leaseToken AND worker_id = @workerId AND status IN (${LEASED})
  RETURNING id`;

/** A lease the task finished under (the worker's own outcome landed while its beat was on its way): not lost. */
export const FINISHED_UNDER_LEASE = `
  SELECT 1 FROM tasks WHERE id = @taskId AND lease_token = @leaseToken AND worker_id = @workerId AND status IN ('completed', 'failed')`;

/**
 * For a beat that lists every lease of its worker (`allLeases`): the tasks leased to it for over half
 * their lease, of which the beat gives back those it leaves out (UNKNOWN_TO_ITS_WORKER says why).
 */
export const LEASED_OVER_HALF = `
  SELECT id, lease_token FROM tasks
  WHERE worker_id = @workerId AND status IN (${LEASED})
    AND claimed_at < strftime('%Y-%m-%dT%H:%M:%fZ', @now, '-' || (lease_seconds / 2.0) || ' seconds')`;

/**
 * Whether such a task ends `failed`, as a recovery ends it: its last attempt, or a type registered with
 * the `fail` recovery policy (a worker restarted under its id may have run it).
 */
const GIVES_UP = `(attempts >= max_attempts
  OR coalesce((SELECT tt.recovery_policy FROM task_types tt WHERE tt.name = tasks.task_type AND tt.version = tasks.task_type_version), 'retry') = 'fail')`;

/** One of those taken back as a recovery does (attempt counted): pending again, or failed (GIVES_UP). */
export const GIVE_BACK_UNKNOWN = `
  UPDATE tasks SET status = CASE WHEN ${GIVES_UP} THEN 'failed' ELSE 'pending' END,
      worker_id = CASE WHEN ${GIVES_UP} THEN worker_id END, lease_token = NULL, lease_expires_at = NULL,
      claimed_at = CASE WHEN ${GIVES_UP} THEN claimed_at END,
      started_at = CASE WHEN ${GIVES_UP} THEN started_at END,
      completed_at = CASE WHEN ${GIVES_UP} THEN @now END,
      scheduled_for = CASE WHEN ${GIVES_UP} THEN scheduled_for ELSE ${DUE_AGAIN} END,
      error_message = @reason, ${GIVE_UP_HELD_UNIQUE_KEY(`NOT ${GIVES_UP}`)}, updated_at = @now
  WHERE id = @id AND worker_id = @workerId AND lease_token = @leaseToken AND status IN (${LEASED})
  RETURNING id, checkpoint, status`;

export const RELEASE_WORKER_TASKS = `
  UPDATE tasks SET status = 'pending', worker_id = NULL, lease_token = NULL, lease_expires_at = NULL,
      claimed_at = NULL, started_at = NULL, attempts = MAX(attempts - 1, 0), scheduled_for = ${DUE_AGAIN}, ${GIVE_UP_HELD_UNIQUE_KEY("1")}, updated_at = @now
  WHERE worker_id = @workerId AND status IN (${LEASED})
  RETURNING id, checkpoint`;

/** Pending tasks reserved for a worker dead or shut down are open to all again (PostgreSQL's UNRESERVED_FOR says why). */
export const UNRESERVE_FOR = `
  UPDATE tasks SET reserved_for = NULL, reserved_until = NULL
  WHERE status = 'pending' AND reserved_for IN (SELECT value FROM json_each(@workers))`;

/**
 * A shutdown of a run that is no longer the worker's current one (PostgreSQL's WORKER_SHUTDOWN says
 * when) records it as the run that shut down, so that its late beats are refused too, and changes
 * nothing else; no change: the shutdown is of the current run (or of a worker unknown to the registry).
 */
export const MARK_REPLACED_RUN_GONE = `
  UPDATE workers SET gone_run_ids = ${GONE_WITH("gone_run_ids", "@runId")}
  WHERE worker_id = @workerId AND @runId IS NOT NULL AND CASE WHEN run_id IS NULL THEN json_array_length(gone_run_ids) > 0 ELSE run_id <> @runId END`;

/** The current run goes (@runId, the run shutting down, is it or null); a worker running without runs keeps those it replaced as gone. */
export const MARK_INACTIVE = `
  UPDATE workers SET status = 'inactive', current_load = 0, last_seen_at = @now, gone_at = @now,
    gone_run_ids = ${GONE_WITH("gone_run_ids", "run_id")}
  WHERE worker_id = @workerId`;

/**
 * See the PostgreSQL statement; the statuses are JSON arrays. SQLite reads a partial index only when
 * the query states the index's own condition, hence the literal statuses of each part. The live part
 * orders by +worker_id so that it reads the few live workers from their index and sorts them: ordered
 * by the primary key it walked every worker, gone ones too (6.3 ms, not 0.7, with 20,000 gone).
 */
export const LIST_WORKERS = `
  SELECT r.*, (SELECT count(*) FROM tasks t WHERE t.worker_id = r.worker_id AND t.status IN (${LEASED})) AS active_tasks
  FROM (
    SELECT * FROM (
      SELECT w.*, 0 AS gone FROM workers w
      WHERE w.status IN ('active', 'stale') AND w.status IN (SELECT value FROM json_each(@liveStatuses))
        AND (@workerId IS NULL OR w.worker_id = @workerId) AND (@liveAfter IS NULL OR w.worker_id > @liveAfter)
      ORDER BY +w.worker_id LIMIT @liveLimit)
    UNION ALL
    SELECT * FROM (
      SELECT w.*, 1 AS gone FROM workers w
      WHERE w.status IN ('dead', 'inactive') AND w.status IN (SELECT value FROM json_each(@goneStatuses))
        AND (@workerId IS NULL OR w.worker_id = @workerId)
        AND (@goneAt IS NULL OR (w.last_seen_at <= @goneAt AND (w.last_seen_at < @goneAt OR w.worker_id > @goneAfter)))
      ORDER BY w.last_seen_at DESC, w.worker_id LIMIT @goneLimit)
  ) r
  ORDER BY r.gone, CASE WHEN r.gone THEN r.last_seen_at END DESC, r.worker_id`;

export const WORKER_COUNTS = `SELECT status, count(*) AS n FROM workers GROUP BY status`;

/** See the PostgreSQL statement. */
export const NEXT_RECOVERY = `
  SELECT (SELECT min(last_seen_at) FROM workers WHERE status IN ('active', 'stale')) AS last_seen_at,
         (SELECT min(lease_expires_at) FROM tasks WHERE status IN (${LEASED})) AS lease_expires_at,
         EXISTS (SELECT 1 FROM tasks t JOIN workers w ON w.worker_id = t.worker_id WHERE t.status IN (${LEASED}) AND w.status = 'inactive') AS abandoned`;

/** A worker silent past both thresholds is left to MARK_DEAD (see the PostgreSQL statement). */
export const MARK_STALE = `
  UPDATE workers SET status = 'stale'
  WHERE status = 'active' AND last_seen_at < @staleBefore AND last_seen_at >= @deadBefore RETURNING worker_id`;

export const MARK_DEAD = `
  UPDATE workers SET status = 'dead', current_load = 0, gone_at = @now
  WHERE status IN ('active', 'stale') AND last_seen_at < @deadBefore
  RETURNING worker_id, last_seen_at`;

/**
 * Leased tasks of the workers just declared dead, and any whose lease ran out, with the recovery
 * policy of the registered version each was created under (null if unregistered).
 */
export const TASKS_TO_RECOVER = `
  SELECT id, task_type, priority, attempts, max_attempts, worker_id, checkpoint, timeout_seconds,
         (timeout_seconds IS NOT NULL AND strftime('%Y-%m-%dT%H:%M:%fZ', started_at, '+' || timeout_seconds || ' seconds') <= @now) AS timed_out,
         (SELECT tt.recovery_policy FROM task_types tt WHERE tt.name = tasks.task_type AND tt.version = tasks.task_type_version) AS registered_policy,
         EXISTS (SELECT 1 FROM workers w WHERE w.worker_id = tasks.worker_id AND w.status = 'inactive') AS abandoned
  FROM tasks
  WHERE status IN (${LEASED})
    AND (worker_id IN (SELECT value FROM json_each(@deadWorkers)) OR lease_expires_at < @now
         OR worker_id IN (SELECT worker_id FROM workers WHERE status = 'inactive'))
  ORDER BY priority DESC, id`;

/** @refund: 1 for a task claimed after its worker shut down (see PostgreSQL's RECOVER_TASKS), else 0. */
export const RECOVER_TO_PENDING = `
  UPDATE tasks SET status = 'pending', error_message = @reason, attempts = MAX(attempts - @refund, 0), worker_id = NULL, lease_token = NULL, lease_expires_at = NULL,
      claimed_at = NULL, started_at = NULL, scheduled_for = @now, ${GIVE_UP_HELD_UNIQUE_KEY("1")}, updated_at = @now
  WHERE id = @id`;

export const RECOVER_TO_FAILED = `
  UPDATE tasks SET status = 'failed', error_message = @reason, lease_token = NULL, lease_expires_at = NULL, completed_at = @now, updated_at = @now
  WHERE id = @id`;

/** Full workers come too; a load counts leases and reservations (PostgreSQL's REASSIGNMENT_CANDIDATES says why). */
export const REASSIGNMENT_CANDIDATES = `
  SELECT w.worker_id, w.roles, w.capacity,
         MAX(w.current_load, (SELECT count(*) FROM tasks t WHERE t.worker_id = w.worker_id AND t.status IN (${LEASED})))
         + (SELECT count(*) FROM tasks t WHERE t.reserved_for = w.worker_id AND t.status = 'pending' AND t.reserved_until > @now) AS current_load
  FROM workers w
  WHERE w.status = 'active' AND w.last_seen_at >= @staleBefore`;

export const RESERVE_FOR = `UPDATE tasks SET reserved_for = @workerId, reserved_until = @reservedUntil, updated_at = @now WHERE id = @id`;

export const INSERT_REASSIGNMENT = `
  INSERT INTO reassignment_events (task_id, from_worker_id, to_worker_id, reason, checkpoint, success, error_message, created_at)
  VALUES (@taskId, @fromWorkerId, @toWorkerId, @reason, @checkpoint, @success, @errorMessage, @now)`;

export const LIST_REASSIGNMENTS = `
  SELECT * FROM reassignment_events WHERE (@taskId IS NULL OR task_id = @taskId) ORDER BY id DESC LIMIT @limit`;

export const TRY_LEAD = `
  INSERT INTO leader_leases AS l (name, holder, expires_at) VALUES (@name, @holder, @expiresAt)
  ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
  WHERE l.holder = excluded.holder OR l.expires_at <= @now
  RETURNING holder`;

export const RESIGN = `DELETE FROM leader_leases WHERE name = @name AND holder = @holder`;

/** A table apart from leader_leases, because resigning deletes the lease row. */
export const RECORD_SWEEP = `
  INSERT INTO last_sweeps (name, holder, swept_at, interval_seconds) VALUES (@name, @holder, @now, @intervalSeconds)
  ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, swept_at = excluded.swept_at, interval_seconds = excluded.interval_seconds`;

/** Always one row: the unexpired lease (if any) and the last recorded sweep (if any). */
export const LEADERSHIP_STATUS = `
  SELECT l.holder, l.expires_at, s.holder AS swept_by, s.swept_at, s.interval_seconds
  FROM (SELECT @name AS name) n
  LEFT JOIN leader_leases l ON l.name = n.name AND l.expires_at > @now
  LEFT JOIN last_sweeps s ON s.name = n.name`;
