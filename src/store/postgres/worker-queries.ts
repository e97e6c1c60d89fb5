/**
 * Statements of the worker registry, the coordinator's sweep and leadership (PostgreSQL).
 * Conventions as in queries.ts: "now" is a parameter, one statement per operation where possible.
 */
import { LEASED_STATUSES } from "../../core/state-machine.js";
import { GONE_RUNS_KEPT } from "../../core/worker.js";
import { DUE_AGAIN, ISO_TIME, TALLY_FINISHED } from "./queries.js";

const LEASED = LEASED_STATUSES.map((s) => `'${s}'`).join(", ");

/**
 * Pending tasks reserved for the workers `workers` selects (a query), open to all again: a worker dead
 * or shut down will not claim them, and its reservation kept them from everyone else until it lapsed
 * (for as long as reservationMs, which nothing keeps shorter than dead_after).
 */
const UNRESERVED_FOR = (workers: string) => `
  unreserved AS (
    UPDATE tasks SET reserved_for = NULL, reserved_until = NULL
    WHERE status = 'pending' AND reserved_for IN (${workers})
  )`;

/** In WORKER_HEARTBEAT's update of a registered worker: the registered value where the beat left it out. */
const KEPT_IF_LEFT_OUT = (column: string) =>
  `CASE WHEN EXCLUDED.worker_id IN (SELECT worker_id FROM beat WHERE ${column} IS NULL) THEN workers.${column} ELSE EXCLUDED.${column} END`;

/**
 * In WORKER_HEARTBEAT's and WORKER_SHUTDOWN's updates of tasks: a condition always true that makes them
 * wait for the workers' rows. Nothing else reads the `worker` step, so PostgreSQL would run it last, after locking
 * the tasks; the sweep locks a worker before its tasks, and a beat arriving as its worker was declared
 * dead deadlocked with it. Free of the row, the condition runs once, before the first task is read.
 */
const AFTER_THE_WORKERS = "(SELECT count(*) FROM worker) >= 0";

/**
 * Whether a task taken back from a worker that did not know it held it ends `failed`, as RECOVER_TASKS
 * ends it: its last attempt, or a type registered with the `fail` recovery policy (a worker restarted
 * under its id may have run it). Evaluated for those tasks only.
 */
const GIVES_UP = `(t.attempts >= t.max_attempts
  OR coalesce((SELECT tt.recovery_policy FROM task_types tt WHERE tt.name = t.task_type AND tt.version = t.task_type_version), 'retry') = 'fail')`;

/** `list` (a worker's gone_run_ids) with `run` first, as GONE_RUNS_KEPT bounds it; `list` as it is when `run` is null. */
const GONE_WITH = (list: string, run: string) =>
  `CASE WHEN ${run} IS NULL THEN ${list} ELSE (ARRAY[${run}] || array_remove(${list}, ${run}))[1:${GONE_RUNS_KEPT}] END`;

/**
 * In WORKER_HEARTBEAT's update of a registered worker, its gone_run_ids. A beat of another run, or naming
 * no run (seed 000's body, a client without runs), is a restart: the named run before it is replaced,
 * and is recorded as gone, so that run's late shutdown or beats cannot take the new process for it. A
 * run id names one start of the process (docs/http.md), so a beat of a replaced run comes from the past:
 * held up, sent again, or from a process frozen long enough to be declared dead, whose beat listing all
 * its leases took the new run's tasks back while it ran them.
 */
const GONE_AFTER_A_BEAT = `CASE WHEN EXCLUDED.run_id IS DISTINCT FROM workers.run_id THEN ${GONE_WITH("workers.gone_run_ids", "workers.run_id")} ELSE workers.gone_run_ids END`;

/**
 * $1 the beats (a JSON array of {worker_id, run_id, roles, hostname, pid, version, capacity, current_load,
 * tasks_processed, metadata}, distinct worker ids; run_id … tasks_processed null when left out), $2 now,
 * $3 worker ids, $4 task ids, $5 lease tokens (the leases the beats list, one row each), $6 … $9 a new
 * worker's roles, capacity, current_load and tasks_processed when its beat leaves them out, $10 why a
 * task a beat listing all its leases leaves out is back in the pool (UNKNOWN_TO_ITS_WORKER).
 * Registers or refreshes the workers and renews the leases they still hold, in one round trip for
 * any number of workers; the (worker, task) pairs that come back are the leases still held, or
 * under which the task finished.
 * Asynchronous commit, like a task heartbeat: a lost one costs at most a spurious recovery, which
 * fencing makes safe.
 */
export const WORKER_HEARTBEAT = `
  WITH beat AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS b(worker_id text, run_id text, roles text[], hostname text, pid int, version text,
                                                     capacity int, current_load int, tasks_processed bigint, metadata jsonb,
                                                     all_leases boolean)
  ),
  -- A figure a beat leaves out keeps the registered one: the insert meets the registered row and the
  -- update below reads it, locked and as it is now, so a beat never puts back what a concurrent one
  -- replaced. That holds for a worker registered by another beat while this statement ran (its first
  -- two beats sent at once): a look-up of the workers at the start missed it, and the defaults went
  -- over what the other beat said. Only a worker new to the registry takes the defaults. The sets of
  -- beats leaving a figure out are read once (hashed), not looked up per conflicting row: that made
  -- a batch of 1,000 beats four times slower.
  worker AS (
    INSERT INTO workers (worker_id, run_id, roles, hostname, pid, version, capacity, current_load, tasks_processed,
                         metadata, status, last_seen_at, started_at)
    SELECT b.worker_id, b.run_id, coalesce(b.roles, $6::text[]), b.hostname, b.pid, b.version, coalesce(b.capacity, $7::int),
           coalesce(b.current_load, $8::int), coalesce(b.tasks_processed, $9::bigint), coalesce(b.metadata, '{}'::jsonb),
           'active', $2::timestamptz, $2::timestamptz
    FROM beat b
    -- One order for every batch: two servers' batches naming the same workers cannot deadlock.
    ORDER BY b.worker_id
    ON CONFLICT (worker_id) DO UPDATE SET
      roles = ${KEPT_IF_LEFT_OUT("roles")}, capacity = ${KEPT_IF_LEFT_OUT("capacity")},
      current_load = ${KEPT_IF_LEFT_OUT("current_load")}, tasks_processed = ${KEPT_IF_LEFT_OUT("tasks_processed")},
      hostname = ${KEPT_IF_LEFT_OUT("hostname")}, pid = ${KEPT_IF_LEFT_OUT("pid")}, version = ${KEPT_IF_LEFT_OUT("version")},
      metadata = ${KEPT_IF_LEFT_OUT("metadata")}, status = 'active', last_seen_at = EXCLUDED.last_seen_at,
      -- A restart (another run) starts anew: a process killed and started again under its id, within the
      -- dead-after, kept the killed one's start, and a crash loop looked like one long-lived worker.
      started_at = CASE WHEN workers.status IN ('dead', 'inactive') OR EXCLUDED.run_id IS DISTINCT FROM workers.run_id THEN EXCLUDED.started_at ELSE workers.started_at END,
      gone_at = NULL, run_id = EXCLUDED.run_id, gone_run_ids = ${GONE_AFTER_A_BEAT}
    -- A beat stamped before its worker was declared dead or shut down leaves it so (see gone_at), and
    -- so does a beat of a run that shut down or was replaced, however late it lands, even after other
    -- runs registered (see gone_run_ids); another run's is a restart.
    WHERE (workers.gone_at IS NULL OR EXCLUDED.last_seen_at >= workers.gone_at)
      AND NOT coalesce(EXCLUDED.run_id = ANY (workers.gone_run_ids), false)
    RETURNING worker_id
  ),
  held AS (
    UPDATE tasks t SET last_heartbeat_at = $2::timestamptz,
        lease_expires_at = $2::timestamptz + make_interval(secs => t.lease_seconds), updated_at = $2::timestamptz
    FROM unnest($3::text[], $4::bigint[], $5::text[]) AS l(worker_id, id, token)
    WHERE t.id = l.id AND t.lease_token = l.token AND t.worker_id = l.worker_id AND t.status IN (${LEASED})
      AND ${AFTER_THE_WORKERS}
    RETURNING t.worker_id, t.id
  ),
  -- A beat that lists every lease of its worker (all_leases) takes back a task leased to it over half
  -- its lease ago that it leaves out: the worker does not know it holds it (UNKNOWN_TO_ITS_WORKER). As
  -- a recovery does: pending again, or failed (GIVES_UP). Only a beat the registry took (worker): a
  -- refused one is of a life that ended, and the tasks leased under the id now are another run's.
  orphaned AS (
    UPDATE tasks t SET status = CASE WHEN ${GIVES_UP} THEN 'failed' ELSE 'pending' END,
        worker_id = CASE WHEN ${GIVES_UP} THEN t.worker_id END, lease_token = NULL, lease_expires_at = NULL,
        claimed_at = CASE WHEN ${GIVES_UP} THEN t.claimed_at END,
        started_at = CASE WHEN ${GIVES_UP} THEN t.started_at END,
        completed_at = CASE WHEN ${GIVES_UP} THEN $2::timestamptz END,
        scheduled_for = CASE WHEN ${GIVES_UP} THEN t.scheduled_for ELSE ${DUE_AGAIN("$2::timestamptz")} END,
        error_message = $10, updated_at = $2::timestamptz
    FROM beat b JOIN worker w ON w.worker_id = b.worker_id
    WHERE b.all_leases AND t.worker_id = b.worker_id AND t.status IN (${LEASED}) AND ${AFTER_THE_WORKERS}
      AND t.claimed_at < $2::timestamptz - make_interval(secs => t.lease_seconds / 2.0)
      AND NOT EXISTS (SELECT 1 FROM unnest($4::bigint[], $5::text[]) AS l(id, token) WHERE l.id = t.id AND l.token = t.lease_token)
    RETURNING t.id, b.worker_id AS old_worker, t.checkpoint, t.status, t.task_type, t.completed_at, t.claimed_at, t.scheduled_for
  ),
  orphans_logged AS (
    INSERT INTO task_events (task_id, event, from_worker_id, message, data, created_at)
    SELECT id, CASE WHEN status = 'pending' THEN 'requeued' ELSE 'failed' END, old_worker, $10, checkpoint, $2::timestamptz FROM orphaned
  ),
  ${TALLY_FINISHED("orphaned")},
  -- Finished under the lease presented, by the worker presenting it: its own outcome landed while the
  -- beat was on its way. Not lost: told so, it would count as a lost lease (a metric people alert on).
  -- Read locked, as they are now: an outcome committed while this statement ran (so held skipped its
  -- task) is not in the statement's snapshot, where the task still runs. Only the leases held did not
  -- renew are read so, a few rows, not every lease a beat lists. OFFSET 0 keeps the status test out of
  -- the locked scan: pushed into it, it read the snapshot's row, and the task was reported lost.
  finished AS (
    SELECT worker_id, id FROM (
      SELECT t.worker_id, t.id, t.status
      FROM tasks t JOIN unnest($3::text[], $4::bigint[], $5::text[]) AS l(worker_id, id, token)
        ON t.id = l.id AND t.lease_token = l.token AND t.worker_id = l.worker_id
      WHERE NOT EXISTS (SELECT 1 FROM held h WHERE h.id = l.id)
      OFFSET 0
      FOR SHARE OF t
    ) now_is
    WHERE status IN ('completed', 'failed')
  ),
  async_commit AS (SELECT set_config('synchronous_commit', 'off', true))
  SELECT h.held_by, h.held, (SELECT coalesce(array_agg(id), '{}') FROM orphaned) AS released
  FROM async_commit, LATERAL (
    SELECT coalesce(array_agg(worker_id ORDER BY id), '{}') AS held_by, coalesce(array_agg(id ORDER BY id), '{}') AS held
    FROM (SELECT worker_id, id FROM held UNION ALL SELECT worker_id, id FROM finished) AS kept
  ) h`;

/**
 * In WORKER_SHUTDOWN, of the worker's row: the run shutting down ($3) is not the registered one. Another
 * run registered under the id since (the shutdown landed late, held up or sent again), and what the
 * worker holds now is that run's; a run that names none counts, and replaced every named run before it,
 * not only those GONE_AFTER_A_BEAT recorded (which say the worker had one). A shutdown naming no run,
 * or a worker whose beats never named one, is of the current run.
 */
const REPLACED = `($3::text IS NOT NULL AND CASE WHEN workers.run_id IS NULL THEN cardinality(workers.gone_run_ids) > 0 ELSE workers.run_id <> $3::text END)`;

/** In WORKER_SHUTDOWN's update of the worker: `value`, unless the run shutting down was replaced (REPLACED). */
const UNLESS_REPLACED = (column: string, value: string) => `${column} = CASE WHEN ${REPLACED} THEN workers.${column} ELSE ${value} END`;

/**
 * $1 worker_id, $2 now, $3 the run shutting down (null: the current one). Graceful shutdown: everything
 * it holds goes back to the pool, attempt refunded; what was reserved for it is open to all. A shutdown
 * of a replaced run (REPLACED) changes nothing but the run that shut down, so that its late beats are
 * refused too (see WORKER_HEARTBEAT): the worker stays active, its tasks leased and its reservations
 * kept. Decided on the worker's row as the update finds it once locked, so a beat of the new run
 * committed meanwhile counts; the tasks are read after (AFTER_THE_WORKERS).
 */
export const WORKER_SHUTDOWN = `
  WITH worker AS (
    UPDATE workers SET ${UNLESS_REPLACED("status", "'inactive'")}, ${UNLESS_REPLACED("current_load", "0")},
        ${UNLESS_REPLACED("last_seen_at", "$2::timestamptz")}, ${UNLESS_REPLACED("gone_at", "$2::timestamptz")},
        -- The run that shut down, replaced or current (not replaced, $3 is null or the current run); a worker
        -- running without runs, shut down, keeps those it replaced. Either way REPLACED, read again in RETURNING
        -- on the row as updated, still tells what it did.
        gone_run_ids = CASE WHEN ${REPLACED} THEN ${GONE_WITH("workers.gone_run_ids", "$3::text")} ELSE ${GONE_WITH("workers.gone_run_ids", "workers.run_id")} END
    WHERE worker_id = $1 RETURNING ${REPLACED} AS replaced
  ),
  -- Whether the shutdown is of the current run (or of a worker the registry does not know: its tasks go back, as before).
  of_the_run AS (SELECT NOT EXISTS (SELECT 1 FROM worker WHERE replaced) AS yes),
  released AS (
    UPDATE tasks t SET status = 'pending', worker_id = NULL, lease_token = NULL, lease_expires_at = NULL,
        claimed_at = NULL, started_at = NULL, attempts = GREATEST(t.attempts - 1, 0), scheduled_for = ${DUE_AGAIN("$2::timestamptz")}, updated_at = $2::timestamptz
    WHERE t.worker_id = $1 AND t.status IN (${LEASED}) AND ${AFTER_THE_WORKERS} AND (SELECT yes FROM of_the_run)
    RETURNING t.id, t.checkpoint
  ),
  logged AS (
    INSERT INTO task_events (task_id, event, from_worker_id, message, data, created_at)
    SELECT id, 'released', $1, 'worker shut down', checkpoint, $2::timestamptz FROM released
  ),
  ${UNRESERVED_FOR("SELECT $1 WHERE (SELECT yes FROM of_the_run)")}
  -- One row at least: whether the registry knew the worker, with each released task's id (null if none).
  SELECT k.known, r.id FROM (SELECT EXISTS (SELECT 1 FROM worker) AS known) k LEFT JOIN released r ON true ORDER BY r.id`;

/**
 * A page of the registry (see src/store/worker-paging.ts) in one statement, with the figures of seed
 * 000's worker_status view: the live workers by id past $3, then the gone ones most
 * recently heard from past ($4, $5). $1 live statuses, $2 gone ones (an empty list reads nothing of
 * its part), $6 a worker id or null, $7 and $8 the rows each part reads. Each part states its index's
 * condition literally, so a generic plan still reads the partial index (the gone part's is retention's
 * workers_gone_by_last_seen, migration 007) newest first and stops at its limit rather than sorting
 * every gone worker.
 */
export const LIST_WORKERS = `
  SELECT r.*, (SELECT count(*) FROM tasks t WHERE t.worker_id = r.worker_id AND t.status IN (${LEASED})) AS active_tasks
  FROM (
    SELECT * FROM (
      SELECT w.*, false AS gone FROM workers w
      WHERE w.status IN ('active', 'stale') AND w.status = ANY ($1::text[])
        AND ($6::text IS NULL OR w.worker_id = $6) AND ($3::text IS NULL OR w.worker_id > $3)
      ORDER BY w.worker_id LIMIT $7) live
    UNION ALL
    SELECT * FROM (
      SELECT w.*, true AS gone FROM workers w
      WHERE w.status IN ('dead', 'inactive') AND w.status = ANY ($2::text[])
        AND ($6::text IS NULL OR w.worker_id = $6)
        -- Past the cursor: heard from before it, or at the same time with a greater id.
        AND ($4::timestamptz IS NULL OR (w.last_seen_at <= $4 AND (w.last_seen_at < $4 OR w.worker_id > $5::text)))
      ORDER BY w.last_seen_at DESC, w.worker_id LIMIT $8) gone
  ) r
  ORDER BY r.gone, CASE WHEN r.gone THEN r.last_seen_at END DESC, r.worker_id`;

/** The whole registry by status, what a page of it says it left out. */
export const WORKER_COUNTS = `SELECT status, count(*) AS n FROM workers GROUP BY status`;

/**
 * When the next sweep could take something back (see Store.nextRecoveryIn): the longest-silent live
 * worker's last beat, the soonest end of a lease, and whether a worker shut down holds a lease (a claim
 * that landed after its shutdown: due at once).
 */
export const NEXT_RECOVERY = `
  SELECT (SELECT min(last_seen_at) FROM workers WHERE status IN ('active', 'stale')) AS last_seen_at,
         (SELECT min(lease_expires_at) FROM tasks WHERE status IN (${LEASED})) AS lease_expires_at,
         EXISTS (SELECT 1 FROM tasks t JOIN workers w ON w.worker_id = t.worker_id WHERE t.status IN (${LEASED}) AND w.status = 'inactive') AS abandoned`;

/**
 * $1 stale-before. The workers MARK_STALE and MARK_DEAD may write, locked in worker_id order before
 * either runs. A batch of beats locks its workers in that order (WORKER_HEARTBEAT); the two updates
 * lock theirs in scan order, one after the other, so the sweep could hold a stale worker's row that a
 * batch waited for while waiting for a dead one's that the batch held: a deadlock, which PostgreSQL
 * broke after a second by aborting one of them (when the sweep, no dead worker's task was recovered
 * until its next pass).
 */
export const LOCK_SILENT_WORKERS = `
  SELECT worker_id FROM workers WHERE status IN ('active', 'stale') AND last_seen_at < $1::timestamptz ORDER BY worker_id FOR UPDATE`;

/**
 * $1 stale-before, $2 dead-before. A worker silent past both is left to MARK_DEAD: reported stale as
 * well, one silent worker read as two ("1 dead and 1 stale workers") in the sweep's answer and metrics.
 */
export const MARK_STALE = `
  UPDATE workers SET status = 'stale'
  WHERE status = 'active' AND last_seen_at < $1::timestamptz AND last_seen_at >= $2::timestamptz RETURNING worker_id`;

/**
 * $1 dead-before, $2 now. Logs one worker_dead event per worker, and ends the reservations made for
 * them (see UNRESERVED_FOR).
 */
export const MARK_DEAD = `
  WITH dead AS (
    UPDATE workers SET status = 'dead', current_load = 0, gone_at = $2::timestamptz
    WHERE status IN ('active', 'stale') AND last_seen_at < $1::timestamptz
    RETURNING worker_id, last_seen_at
  ),
  ${UNRESERVED_FOR("SELECT worker_id FROM dead")},
  logged AS (
    INSERT INTO task_events (task_id, event, from_worker_id, message, data, created_at)
    SELECT NULL, 'worker_dead', worker_id, 'No heartbeat since ' || to_char(last_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
           NULL, $2::timestamptz
    FROM dead
  )
  SELECT worker_id FROM dead ORDER BY worker_id`;

/**
 * $1 dead workers, $2 now, $3 recovery policies (JSON object type → 'retry' | 'fail'), $4 worker-died
 * message, $5 lease-expired message, $6 timed-out message with `{seconds}` for the task's timeout, $7
 * claimed-after-shutdown message.
 * Takes back every leased task of a dead worker, every task whose lease ran out, and every task leased to
 * a worker shut down: a claim that landed after its shutdown (a long-poll answered late, a stop that gave
 * up waiting), which no worker will run: they used to wait for their lease to run out. Those go back as
 * the shutdown gives tasks back, released with no attempt charged, $7 their message. The `fail` policy
 * or exhausted attempts end it `failed`; otherwise it is pending again at once, checkpoint kept (the
 * attempt was already counted when it was claimed); either way its lease token goes. The policy is
 * the sweep's for the type if given, else that of the registered version the task was created under,
 * else `retry`. The old holder comes back for events and reassignment through the self-join, since
 * RETURNING sees only the new row.
 */
export const RECOVER_TASKS = `
  WITH doomed AS (
    SELECT id, old_worker, worker_died, abandoned, timeout_seconds, timed_out, NOT abandoned AND give_up AS give_up
    FROM (
      SELECT id, worker_id AS old_worker, (worker_id = ANY($1::text[])) AS worker_died, timeout_seconds,
             EXISTS (SELECT 1 FROM workers w WHERE w.worker_id = tasks.worker_id AND w.status = 'inactive') AS abandoned,
             (timeout_seconds IS NOT NULL AND started_at + make_interval(secs => timeout_seconds) <= $2::timestamptz) AS timed_out,
             (coalesce($3::jsonb->>task_type,
                       (SELECT tt.recovery_policy FROM task_types tt WHERE tt.name = tasks.task_type AND tt.version = tasks.task_type_version),
                       'retry') = 'fail'
              OR attempts >= max_attempts) AS give_up
      FROM tasks
      WHERE status IN (${LEASED})
        AND (worker_id = ANY($1::text[]) OR lease_expires_at < $2::timestamptz
             OR worker_id IN (SELECT w.worker_id FROM workers w WHERE w.status = 'inactive'))
      FOR UPDATE
    ) leased
  ),
  recovered AS (
    UPDATE tasks t SET
      status = CASE WHEN d.give_up THEN 'failed' ELSE 'pending' END,
      error_message = CASE WHEN d.worker_died THEN $4 WHEN d.abandoned THEN $7 WHEN d.timed_out THEN replace($6, '{seconds}', d.timeout_seconds::text) ELSE $5 END,
      attempts = CASE WHEN d.abandoned THEN GREATEST(t.attempts - 1, 0) ELSE t.attempts END,
      worker_id = CASE WHEN d.give_up THEN t.worker_id END,
      -- Failed or requeued, the lease is gone: a worker presenting its token is told so (lease_lost),
      -- and its heartbeat reports it lost, so a handler still running there stops.
      lease_token = NULL,
      completed_at = CASE WHEN d.give_up THEN $2::timestamptz END,
      scheduled_for = CASE WHEN d.give_up THEN t.scheduled_for ELSE $2::timestamptz END,
      claimed_at = CASE WHEN d.give_up THEN t.claimed_at END,
      started_at = CASE WHEN d.give_up THEN t.started_at END,
      lease_expires_at = NULL, updated_at = $2::timestamptz
    FROM doomed d
    WHERE t.id = d.id
    RETURNING t.id, t.task_type, t.priority, t.status, t.checkpoint, t.error_message, d.old_worker, d.abandoned, t.completed_at, t.claimed_at, t.scheduled_for
  ),
  logged AS (
    INSERT INTO task_events (task_id, event, from_worker_id, message, data, created_at)
    SELECT id, CASE WHEN abandoned THEN 'released' WHEN status = 'pending' THEN 'requeued' ELSE 'failed' END, old_worker, error_message, checkpoint, $2::timestamptz
    FROM recovered
  ),
  ${TALLY_FINISHED("recovered")}
  SELECT id, task_type, priority, status, checkpoint, error_message, old_worker FROM recovered ORDER BY priority DESC, id`;

/**
 * $1 stale-before, $2 now. Workers that may receive reassigned tasks: active and recently seen. Full ones
 * come too, so that a task left unassigned can say whether its role has no worker or only busy ones.
 * A load is the larger of what the worker last said (a stopping worker says it is full) and the tasks
 * it leases now (it may have claimed since its last beat), plus the tasks reserved for it by earlier
 * sweeps that it has not claimed yet: counted as free, its slots went to a task each sweep.
 */
export const REASSIGNMENT_CANDIDATES = `
  SELECT w.worker_id, w.roles, w.capacity,
         GREATEST(w.current_load, (SELECT count(*) FROM tasks t WHERE t.worker_id = w.worker_id AND t.status IN (${LEASED})))
         + (SELECT count(*) FROM tasks t WHERE t.reserved_for = w.worker_id AND t.status = 'pending' AND t.reserved_until > $2::timestamptz) AS current_load
  FROM workers w
  WHERE w.status = 'active' AND w.last_seen_at >= $1::timestamptz`;

/**
 * $1 task ids, $2 chosen workers, $3 previous holders, $4 reasons, $5 reserved until, $6 now.
 * Reserves each task for its chosen worker, logging a task event and a reassignment event each.
 */
export const RESERVE_MANY = `
  WITH reserved AS (
    UPDATE tasks t SET reserved_for = a.worker_id, reserved_until = $5::timestamptz, updated_at = $6::timestamptz
    FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) AS a(task_id, worker_id, from_worker, reason)
    WHERE t.id = a.task_id AND t.status = 'pending'
    RETURNING t.id, t.checkpoint, a.worker_id, a.from_worker, a.reason
  ),
  task_logged AS (
    INSERT INTO task_events (task_id, event, from_worker_id, to_worker_id, message, data, created_at)
    SELECT id, 'reassigned', from_worker, worker_id, reason, jsonb_build_object('reserved_until', ${ISO_TIME("$5::timestamptz")}), $6::timestamptz
    FROM reserved
  ),
  logged AS (
    INSERT INTO reassignment_events (task_id, from_worker_id, to_worker_id, reason, checkpoint, success, created_at)
    SELECT id, from_worker, worker_id, reason, checkpoint, true, $6::timestamptz FROM reserved
  )
  SELECT id FROM reserved`;

/** $1 task ids, $2 from workers, $3 reasons, $4 checkpoints (JSON text), $5 why each found no worker, $6 now. Failed reassignments. */
export const LOG_UNASSIGNED = `
  INSERT INTO reassignment_events (task_id, from_worker_id, to_worker_id, reason, checkpoint, success, error_message, created_at)
  SELECT task_id, from_worker, NULL, reason, checkpoint::jsonb, false, error, $6::timestamptz
  FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[]) AS u(task_id, from_worker, reason, checkpoint, error)`;

/** $1 limit, $2 task id or null. Newest first. */
export const LIST_REASSIGNMENTS = `
  SELECT * FROM reassignment_events WHERE ($2::bigint IS NULL OR task_id = $2) ORDER BY id DESC LIMIT $1`;

/**
 * $1 name, $2 holder, $3 now, $4 ttl seconds (fractions allowed: 3 leadership ticks of 500 ms is 1.5).
 * Returns a row when $2 holds (or just took) the lease.
 */
export const TRY_LEAD = `
  INSERT INTO leader_leases AS l (name, holder, expires_at) VALUES ($1, $2, $3::timestamptz + make_interval(secs => $4::float8))
  ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
  WHERE l.holder = EXCLUDED.holder OR l.expires_at <= $3::timestamptz
  RETURNING holder`;

export const RESIGN = `DELETE FROM leader_leases WHERE name = $1 AND holder = $2`;

/** $1 name, $2 holder, $3 now, $4 the holder's sweep interval (s). A table apart from leader_leases, because resigning deletes the lease row. */
export const RECORD_SWEEP = `
  INSERT INTO last_sweeps (name, holder, swept_at, interval_seconds) VALUES ($1, $2, $3::timestamptz, $4::float8)
  ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, swept_at = EXCLUDED.swept_at, interval_seconds = EXCLUDED.interval_seconds`;

/** $1 name, $2 now. Always one row: the unexpired lease (if any) and the last recorded sweep (if any). */
export const LEADERSHIP_STATUS = `
  SELECT l.holder, l.expires_at, s.holder AS swept_by, s.swept_at, s.interval_seconds
  FROM (SELECT $1::text AS name) n
  LEFT JOIN leader_leases l ON l.name = n.name AND l.expires_at > $2::timestamptz
  LEFT JOIN last_sweeps s ON s.name = n.name`;

/** $1 channel, $2 payload. */
export const NOTIFY = `SELECT pg_notify($1, $2)`;
