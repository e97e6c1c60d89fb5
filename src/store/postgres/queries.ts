/**
 * Every statement the PostgreSQL store runs, one named constant each.
 *
 * Conventions:
 * - "now" is always a parameter (the store's clock), never now() on the server: a test's manual clock
 *   rules every statement. By default that clock is the server's own, read now and then (DatabaseClock).
 * - A write that needs a lease checks worker_id, lease_token and status in its own WHERE clause,
 *   so ownership is verified by the statement that writes and no other transaction can slip between.
 * - Each operation is one statement (data-modifying CTEs write the audit event alongside), so it is
 *   one round trip and atomic without BEGIN/COMMIT.
 * - Durability is chosen per statement. ASYNC_COMMIT makes the implicit transaction commit without
 *   waiting for the WAL flush: used for claim, start, heartbeat and progress, whose loss in a server
 *   crash costs what a worker crash costs (the lease expires, the task is claimed again, the old token
 *   is refused). Enqueue, checkpoint, complete, fail, release and operator actions wait for the flush:
 *   losing them would lose work. A durable commit flushes every earlier WAL record too, so a completion
 *   can never survive a crash that its claim did not.
 */
import { CANCEL_NOTICE_PREFIX } from "../../core/notices.js";
import { LEASED_STATUSES, TRANSITIONS } from "../../core/state-machine.js";
import { type SortBy, type SortOrder, TASK_STATUSES, type TaskStatus } from "../../core/task.js";
import { WAITING_DUE_PER_CLAIM } from "../claim-options.js";
import { CLAIMED_COLUMNS, TASK_COLUMNS } from "./rows.js";

const sqlList = (items: readonly string[]) => items.map((s) => `'${s}'`).join(", ");
const LEASED = sqlList(LEASED_STATUSES);
/** `columns` named in a statement, of the row `alias` if given. */
const columnList = (columns: readonly string[], alias = "") => columns.map((column) => (alias ? `${alias}.${column}` : column)).join(", ");
/** A whole task's columns, named (see TASK_COLUMNS). */
const TASK = (alias = "") => columnList(TASK_COLUMNS, alias);

/** set_config(..., true) lasts until the end of the statement's implicit transaction, i.e. its commit. */
const ASYNC_COMMIT = `async_commit AS (SELECT set_config('synchronous_commit', 'off', true))`;

/** One completed_tallies row (−n) per task type of the completed tasks in `rows` that retention deleted (see COUNTS). */
export const UNTALLY_COMPLETED = (rows: string) =>
  `untallied AS (INSERT INTO completed_tallies (task_type, n) SELECT task_type, -count(*) FROM ${rows} GROUP BY task_type)`;

/** A time's minute, as a timestamptz (date_trunc would use the session's time zone). */
const MINUTE_OF = (column: string) => `to_timestamp(floor(extract(epoch FROM ${column}) / 60) * 60)`;

/**
 * Seconds from ready to claimed, never negative (a task claimed by id before it was due); null if
 * never claimed (GREATEST ignores a NULL, so the CASE keeps it, as the pickup figures need).
 */
const PICKUP_SECONDS = `CASE WHEN claimed_at IS NOT NULL THEN GREATEST(0, extract(epoch FROM claimed_at - scheduled_for)) END`;

/**
 * One throughput_tallies row per minute, type and status of the tasks in `rows` (a CTE returning
 * task_type, status, completed_at, claimed_at and scheduled_for) that ended completed or failed
 * (migration 014). Rows still pending (a failure to be retried) add nothing. The completed ones
 * count in counts() too (see COUNTS).
 */
export const TALLY_FINISHED = (rows: string) => `
  finished_tallied AS (
    INSERT INTO throughput_tallies (minute, task_type, status, tasks, picked, pickup_sum, pickup_max)
    SELECT ${MINUTE_OF("completed_at")}, task_type, status, count(*), count(claimed_at),
           coalesce(sum(${PICKUP_SECONDS}), 0), max(${PICKUP_SECONDS})
    FROM ${rows} WHERE status IN ('completed', 'failed')
    GROUP BY 1, task_type, status
  )`;

/**
 * A task given back (released, or taken back from a worker) is ready again from `now`, unless it was
 * claimed before it was due. Kept at the first due time, it read as waiting all the while it ran: a
 * task released after 10 minutes of work showed as ready for 10 minutes (the oldest-ready gauge,
 * whose alert then fired with no backlog) and its pickup counted the run as waiting.
 */
export const DUE_AGAIN = (now: string) => `GREATEST(t.scheduled_for, ${now})`;

/** Lease check shared by every worker call: $1 id, $2 worker_id, $3 lease_token. */
const LEASE_HELD = (action: keyof typeof TRANSITIONS) =>
  `t.id = $1 AND t.worker_id = $2 AND t.lease_token = $3 AND t.status IN (${sqlList(TRANSITIONS[action].from)})`;

/**
 * Inserts the tasks described by a JSON array (one object per NewTask, in snake_case), keeping their
 * order, skipping any whose unique_key is held by a pending task, and logging a `created` event each.
 * `gate` lets a caller make the insert conditional on an earlier CTE (follow-ups of a completion).
 */
const insertTasks = (tasksParam: string, nowParam: string, gate = "TRUE", schema = "") => `
  inserted AS (
    INSERT INTO ${schema}tasks (task_type, task_type_version, params, priority, scheduled_for, concurrency_key, unique_key,
                       max_attempts, backoff, timeout_seconds, parent_id, created_at, updated_at)
    SELECT n.task_type, n.task_type_version, n.params, n.priority, n.scheduled_for, n.concurrency_key, n.unique_key,
           n.max_attempts, n.backoff, n.timeout_seconds, n.parent_id, ${nowParam}, ${nowParam}
    FROM ROWS FROM (jsonb_to_recordset(${tasksParam}::jsonb) AS (
           task_type text, task_type_version int, params jsonb, priority int, scheduled_for timestamptz, concurrency_key text,
           unique_key text, max_attempts int, backoff jsonb, timeout_seconds int, parent_id bigint))
         WITH ORDINALITY AS n(task_type, task_type_version, params, priority, scheduled_for, concurrency_key, unique_key,
                              max_attempts, backoff, timeout_seconds, parent_id, ord)
    WHERE ${gate}
    ORDER BY n.ord
    ON CONFLICT (unique_key) WHERE status = 'pending' AND unique_key IS NOT NULL DO NOTHING
    RETURNING ${TASK()}
  ),
  inserted_events AS (
    INSERT INTO ${schema}task_events (task_id, event, message, created_at)
    SELECT id, 'created', CASE WHEN parent_id IS NULL THEN NULL ELSE 'follow-up of task ' || parent_id END, ${nowParam}
    FROM inserted
  )`;

/** PostgreSQL refuses a NOTIFY payload of 8,000 bytes or more (its default page size). */
const NOTIFY_PAYLOAD_MAX = 8000;

/**
 * Wakes listening workers (payload: the new tasks' types) once the inserting transaction commits.
 * A payload must be under 8,000 bytes or the whole statement fails ("payload string too long"): a
 * batch of many types (a hundred names of 80 characters) is announced with an empty payload instead,
 * which listeners take as "re-check every type".
 */
const NOTIFY_INSERTED = (channelParam: string) => `
  notified AS (
    SELECT pg_notify(${channelParam}, CASE WHEN octet_length(types) < ${NOTIFY_PAYLOAD_MAX} THEN types ELSE '' END)
    FROM (SELECT string_agg(DISTINCT task_type, ',') AS types FROM inserted HAVING count(*) > 0) AS announced
  )`;

/**
 * The statements of an enqueue, for the store's own connections (`schema` null: their search_path
 * names it) or for a caller's connection inside the caller's transaction (PostgresStore.enqueueWithin):
 * there every name is qualified with the schema, since the search_path is the caller's (it may hold a
 * table called tasks), and each row is answered as one JSON text column, `answer`, since the type
 * parsers are the caller's too.
 */
export function enqueueStatements(schema: string | null) {
  // Quoted: a schema may be named as an SQL keyword (user, order), which unquoted was a syntax error here.
  const q = schema === null ? "" : `"${schema}".`;
  const task = (alias: string) => (schema === null ? `${alias}.*` : `json_build_object('task', to_jsonb(${alias}))::text AS answer`);
  return {
    /** $1 tasks (JSON array), $2 now, $3 notification channel. Returns the inserted rows (duplicates of pending unique keys are skipped). */
    enqueue: `
  WITH ${insertTasks("$1", "$2::timestamptz", "TRUE", q)},
  ${NOTIFY_INSERTED("$3")}
  SELECT ${task("inserted")} FROM inserted LEFT JOIN notified ON true ORDER BY id`,

    /**
     * enqueue, written only if each task's task_type_version is still its type's latest (null: the type
     * has none): the tasks were prepared against versions the store read earlier. Rows: the inserted
     * tasks, each with types_current; or one row of nulls but types_current, when nothing was inserted
     * (false: a newer version exists, and nothing was written).
     */
    enqueueIfCurrent: `
  WITH versions AS (
    SELECT NOT EXISTS (
      SELECT 1 FROM jsonb_to_recordset($1::jsonb) AS n(task_type text, task_type_version int)
      JOIN ${q}task_types tt ON tt.name = n.task_type AND tt.version > coalesce(n.task_type_version, 0)
    ) AS types_current
  ),
  ${insertTasks("$1", "$2::timestamptz", "(SELECT types_current FROM versions)", q)},
  ${NOTIFY_INSERTED("$3")}
  SELECT ${schema === null ? "v.types_current, i.*" : "json_build_object('types_current', v.types_current, 'task', to_jsonb(i))::text AS answer"}
  FROM versions v LEFT JOIN (inserted i LEFT JOIN notified ON true) ON true ORDER BY i.id`,

    /** $1 unique keys. The pending tasks that hold them (what a deduplicated enqueue returns). */
    pendingByUniqueKeys: `SELECT ${task("t")} FROM ${q}tasks t WHERE status = 'pending' AND unique_key = ANY($1::text[])`,
  };
}

export const { enqueue: ENQUEUE, enqueueIfCurrent: ENQUEUE_IF_CURRENT, pendingByUniqueKeys: PENDING_BY_UNIQUE_KEYS } = enqueueStatements(null);

/**
 * A keyed enqueue's first statement, in the transaction that then inserts its tasks: $1 keys (one
 * per call: a single call's, or the calls of enqueueCalls), $2 their fingerprints, $3 now. Returns the
 * keys that were new; a key a call already recorded is not returned. A call racing with the same key
 * waits here on the first one's uncommitted row, and finds it once that commits (or takes the key
 * itself if that rolls back). Taken in one order, so two transactions taking overlapping keys cannot
 * deadlock: the second waits for the first on the first key they share.
 */
export const TAKE_IDEMPOTENCY_KEYS = `
  INSERT INTO idempotency_keys (key, fingerprint, task_ids, created_at)
  SELECT k.key, k.fingerprint, '{}', $3::timestamptz FROM unnest($1::text[], $2::text[]) AS k(key, fingerprint)
  ORDER BY k.key
  ON CONFLICT (key) DO NOTHING
  RETURNING key`;

/** $1 keys, $2 each key's one task id: the single calls of enqueueCalls, recorded before their commit. */
export const RECORD_IDEMPOTENCY_KEYS_TASK = `
  UPDATE idempotency_keys k SET task_ids = ARRAY[r.id] FROM unnest($1::text[], $2::bigint[]) AS r(key, id) WHERE k.key = r.key`;

/** $1 keys. What the calls that used them sent and got. */
export const IDEMPOTENCY_KEYS = `SELECT key, fingerprint, task_ids FROM idempotency_keys WHERE key = ANY ($1::text[])`;

/** $1 key, $2 the call's task ids in input order: written before the commit that makes the key visible. */
export const RECORD_IDEMPOTENCY_KEY_TASKS = `UPDATE idempotency_keys SET task_ids = $2::bigint[] WHERE key = $1`;

/** $1 task ids. Those tasks, in no particular order. */
export const TASKS_BY_IDS = `SELECT ${TASK()} FROM tasks WHERE id = ANY ($1::bigint[])`;

const ORDER_BY: Record<SortBy, Record<SortOrder, string>> = {
  priority: { desc: "priority DESC, created_at, id", asc: "priority, created_at, id" },
  created_at: { asc: "created_at, id", desc: "created_at DESC, id DESC" },
  random: { asc: "random()", desc: "random()" },
};

/** Filters shared by every branch of a claim: $5 max_attempts_remaining, $7 task types (when typed). */
const claimFilters = (typed: boolean) => `
    ${typed ? "AND t.task_type = ANY($7::text[])" : ""}
    AND ($5::int IS NULL OR t.max_attempts - t.attempts > $5)
    AND (t.concurrency_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM tasks a WHERE a.concurrency_key = t.concurrency_key AND a.status IN (${LEASED})))`;

/**
 * The types whose latest registered version sets max_running, among those a claim may take
 * (`typeFilter` names the parameter holding them, if any).
 */
const CAPPED = (typeFilter: string | null) => `
  capped AS (
    SELECT c.name FROM task_types c
    WHERE c.max_running IS NOT NULL ${typeFilter === null ? "" : `AND c.name = ${typeFilter}`}
      AND NOT EXISTS (SELECT 1 FROM task_types n WHERE n.name = c.name AND n.version > c.version)
  )`;

/**
 * The room each capped type has left. With no capped type in scope, `capped` is empty and
 * taskpool_cap_room is not even called (a one-time filter).
 */
const ROOM = `room AS (SELECT cap_type, room FROM taskpool_cap_room(ARRAY(SELECT name FROM capped)) WHERE EXISTS (SELECT 1 FROM capped))`;

/**
 * Leaves out the capped types (scanned on their own). Not `task_type <> ALL (ARRAY(...))`: with few
 * distinct types in the statistics (one, in a single-queue deployment) the planner estimated that no
 * row passes it, so no LIMIT could pay for an ordered index walk, and it read and sorted the whole
 * backlog on every claim. An anti-join is estimated sanely (test/concurrency/postgres-claim-plan.test.ts).
 */
const UNCAPPED = `AND NOT EXISTS (SELECT 1 FROM capped c WHERE c.name = t.task_type)`;

/** Tasks no one holds a reservation on ($2 now). */
const OPEN_TO_ALL = `t.scheduled_for <= $2::timestamptz AND (t.reserved_until IS NULL OR t.reserved_until <= $2::timestamptz)`;

/**
 * The waiting tasks come due (migration 028), oldest due first, at most WAITING_DUE_PER_CLAIM, locked:
 * every claim reads them beside the claim index (see openScan) and clears the flag of those it does
 * not take (see claimWrites). With none come due, it is one index probe per type. `typed`: only the
 * claim's types, so a claim does not hold back the due tasks other claims want; each type walks its
 * own entries of tasks_waiting_by_type_due in due order (migration 029), so the scan stops after the
 * limit even when many come due at once, and no plan reads the ready tasks to find them.
 */
const DUE = (typed: boolean) => {
  const scan = (where: string) => `
    SELECT t.id, t.concurrency_key, t.priority, t.created_at, t.task_type, t.attempts, t.max_attempts, t.scheduled_for, t.reserved_until FROM tasks t
    WHERE t.status = 'pending' AND t.waiting AND t.scheduled_for <= $2::timestamptz ${where}
    ORDER BY t.scheduled_for
    LIMIT ${WAITING_DUE_PER_CLAIM}
    FOR UPDATE SKIP LOCKED`;
  if (!typed) return `due AS (${scan("")}\n  )`;
  return `due AS (
    SELECT d.* FROM (SELECT DISTINCT unnest($7::text[]) AS task_type) AS wanted CROSS JOIN LATERAL (${scan("AND t.task_type = wanted.task_type")}
    ) d
    ORDER BY d.scheduled_for
    LIMIT ${WAITING_DUE_PER_CLAIM}
  )`;
};

/**
 * A locked scan of the open pool in the claim's order, at most $3 rows; `where` adds conditions
 * (the type to scan, say). SKIP LOCKED passes over rows other claims hold (see claimStatement). The
 * claim indexes hold the pending tasks not waiting (migration 028); the waiting ones come due (`due`,
 * already locked) join them in the one order. Only then: merging the two sorts the scan's rows again,
 * about 1 µs a task of a claim of 250 (bench:statements), and most claims find none come due. Both
 * branches are planned; a one-time filter runs one.
 */
const openScan = (order: string, where: string) => {
  const ready = `
        SELECT t.id, t.concurrency_key, t.priority, t.created_at FROM tasks t
        WHERE t.status = 'pending' AND NOT t.waiting ${where} AND ${OPEN_TO_ALL}
        ${claimFilters(false)}
        ORDER BY ${order}
        LIMIT $3
        FOR UPDATE SKIP LOCKED`;
  return `
      SELECT * FROM (${ready}
      ) ready WHERE NOT EXISTS (SELECT 1 FROM due)
      UNION ALL
      SELECT * FROM (
        SELECT * FROM (
          SELECT * FROM (${ready}
          ) ready
          UNION ALL
          SELECT t.id, t.concurrency_key, t.priority, t.created_at FROM due t
          WHERE true ${where} AND ${OPEN_TO_ALL}
          ${claimFilters(false)}
        ) both_kinds
        ORDER BY ${order}
        LIMIT $3
      ) merged WHERE EXISTS (SELECT 1 FROM due)`;
};

/**
 * Whether the open pool's scan may have been cut short by concurrency keys: it stopped at its limit
 * ($3), and fewer tasks were kept than `found` (open, or all candidates) holds. With the scan full, a
 * claim comes back short only if some of them were left out as a second task of one key (a type's cap
 * only ever leaves out capped tasks, which the open scan does not hold). The scan cannot skip those
 * while it walks, so a claim with room left is run again (see PostgresStore.claimMany); the key it
 * just took is then held, and the scan passes over the rest of that key's tasks. Counts, not an
 * anti-join of the two: that one, a nested loop over both, took a claim of 250 from 21–25 to 31–32 µs
 * of backend CPU per task.
 */
const CUT = (found: string) => `cut AS (
    SELECT (SELECT count(*) FROM open) >= $3 AND (SELECT count(*) FROM ${found}) > (SELECT count(*) FROM kept) AS cut
  )`;

/** The claiming workers: $1 ids, $6 limits; `ord` is each one's 1-based position, `nonce` its lease tokens' secret part. */
const WORKERS = `workers AS (SELECT w.worker_id, w.lim, w.ord, gen_random_uuid()::text AS nonce FROM unnest($1::text[], $6::int[]) WITH ORDINALITY AS w(worker_id, lim, ord))`;

/** What a claim returns of each task (see CLAIMED_COLUMNS). */
const CLAIM_RETURNS = columnList(CLAIMED_COLUMNS, "t");

/**
 * Leases the tasks in `picked` (id, owner, n) to their owners and logs each claim: the end of every claim.
 * The lease runs from $2 plus what the statement waited before writing, when that is a second or more
 * (a lock held by a migration, a VACUUM FULL): counted from $2 alone, a claim that waited longer than an
 * interval reached its worker with its lease nearly over, and was taken back before its first renewal
 * while the worker ran it. Shorter waits are left out, so the lease a claim answers (see toClaimedTask)
 * is the one stored; after a long wait the one stored ends later than the one answered.
 */
const claimWrites = (start: boolean) => `
  claimed AS (
    UPDATE tasks t
    SET status = '${start ? "running" : "claimed"}', worker_id = w.worker_id, lease_token = w.nonce || '-' || t.id, lease_seconds = $4::int,
        lease_expires_at = $2::timestamptz + make_interval(secs => $4::int) + (SELECT CASE WHEN waited >= interval '1 second' THEN waited ELSE interval '0' END FROM (SELECT clock_timestamp() - transaction_timestamp() AS waited) wait),
        claimed_at = $2::timestamptz, last_heartbeat_at = $2::timestamptz,
        started_at = ${start ? "$2::timestamptz" : "NULL"}, attempts = t.attempts + 1, reserved_for = NULL, reserved_until = NULL, updated_at = $2::timestamptz
    FROM picked p JOIN workers w ON w.ord = p.owner WHERE t.id = p.id
    RETURNING ${CLAIM_RETURNS}, p.owner AS claim_owner, p.n AS claim_order
  ),
  -- The due tasks this claim read and did not take join the claim indexes (a row is written once per
  -- statement: these are not the claimed ones). An array of ids, so the plan reads them by primary key
  -- whatever the estimates.
  promoted AS (
    UPDATE tasks t SET waiting = false
    WHERE t.id = ANY(ARRAY(SELECT d.id FROM due d WHERE NOT EXISTS (SELECT 1 FROM claimed c WHERE c.id = d.id)))
  ),
  -- Claimed and started in one step is one transition, so one event: 'claimed' with started: true.
  logged AS (
    INSERT INTO task_events (task_id, event, to_worker_id, data, created_at)
    SELECT c.id, 'claimed', c.worker_id, jsonb_build_object('attempt', c.attempts${start ? ", 'started', true" : ""}), $2::timestamptz
    FROM claimed c ORDER BY c.id
  ),
  ${ASYNC_COMMIT}`;

/**
 * The open pool of a typed claim, scanned per type: each scan walks its type's claim index in order
 * and stops after `limit` rows, so the cost does not grow with the backlog. One scan over
 * `task_type = ANY(...)` cannot use the index order and sorted every pending row of the types
 * (10 ms per claim at 10,000 pending). The merge in `kept` keeps the best of them. Capped types are
 * taken out of the list of types rather than filtered row by row, so each scan is a plain index walk.
 */
const openPerType = (order: string) => `
    SELECT o.* FROM (SELECT unnest($7::text[]) AS task_type EXCEPT SELECT name FROM capped) AS wanted CROSS JOIN LATERAL (${openScan(order, "AND t.task_type = wanted.task_type")}
    ) o`;

/**
 * The claim, for one worker or for several at once (concurrent HTTP claims of one shape share it).
 * $1 worker ids (distinct), $2 now, $3 the sum of their limits, $4 lease seconds,
 * $5 max_attempts_remaining, $6 each worker's limit, [$7 types]. Rows come back with claim_owner (the
 * worker's 1-based position in $1), claim_order (its n-th task) and cut (see CUT).
 *
 * Locked scans of the candidates (tasks reserved for each worker, then the open pool in the requested
 * order) are merged, at most one task per concurrency key is kept, and the winners are shared out,
 * updated and logged, all in one statement. Each worker gets its reserved tasks first, up to its
 * limit; its free slots are then filled from the open pool in turn (the best task to the first slot
 * of the first worker, the next to the first slot of the second, ...), so with limit 1 each worker
 * gets what it would have got claiming alone, one after another.
 *
 * SKIP LOCKED lets concurrent claimers pass over each other's rows instead of waiting. The NOT EXISTS
 * check sees a snapshot, so two claimers can still pick different tasks of one key at the same
 * instant; the unique index tasks_active_concurrency_key then fails the later one (23505) and the
 * store retries it. The ORDER BY comes from a fixed allowlist, never input.
 *
 * Types with a max_running cap (see CAPPED) are left out of those scans and scanned on their
 * own, at most `room` tasks each, where room comes from taskpool_cap_room: it takes the type's advisory
 * lock and counts on a fresh snapshot, so capped claims of a type run one at a time and each sees the
 * ones before it (see migration 003). When no capped type is in scope `capped` is empty: the
 * function is not called, the capped scans run zero times, and the claim takes no lock.
 *
 * Each worker's lease tokens are one random UUID drawn for this claim, then the task's id: unique
 * per claim (a later claim of the task draws another), and no one else can guess them, since only
 * that worker is told the UUID. gen_random_uuid() per row cost 3–7 µs of a claim's ~40 µs per task.
 */
export function claimStatement(sortBy: SortBy, sortOrder: SortOrder, typed: boolean, start: boolean): string {
  const order = ORDER_BY[sortBy][sortOrder];
  const reservedForMe = `t.reserved_for = w.worker_id AND t.reserved_until > $2::timestamptz AND t.scheduled_for <= $2::timestamptz`;
  return `
  WITH ${CAPPED(typed ? "ANY($7::text[])" : null)}, ${ROOM},
  ${WORKERS},
  ${DUE(typed)},
  reserved AS (
    SELECT r.*, w.ord AS owner FROM workers w CROSS JOIN LATERAL (
      SELECT t.id, t.concurrency_key, t.priority, t.created_at FROM tasks t
      WHERE t.status = 'pending' AND ${reservedForMe}
      ${claimFilters(typed)}
      ${UNCAPPED}
      ORDER BY t.priority DESC, t.id
      LIMIT w.lim
      FOR UPDATE SKIP LOCKED
    ) r
  ),
  open AS (${typed ? openPerType(order) : openScan(order, UNCAPPED)}
  ),
  capped_reserved AS (
    SELECT c.*, r.cap_type, r.room, w.ord AS owner FROM room r CROSS JOIN workers w CROSS JOIN LATERAL (
      SELECT t.id, t.concurrency_key, t.priority, t.created_at FROM tasks t
      WHERE t.status = 'pending' AND t.task_type = r.cap_type AND ${reservedForMe}
      ${claimFilters(false)}
      ORDER BY t.priority DESC, t.id
      LIMIT w.lim
      FOR UPDATE SKIP LOCKED
    ) c
    WHERE r.room > 0
  ),
  capped_open AS (
    SELECT c.*, r.cap_type, r.room FROM room r CROSS JOIN LATERAL (${openScan(order, "AND t.task_type = r.cap_type")}
    ) c
    WHERE r.room > 0
  ),
  candidates AS (
    SELECT id, concurrency_key, priority, created_at, 0 AS grp, owner, NULL::text AS cap_type, NULL::int AS room FROM reserved
    UNION ALL SELECT id, concurrency_key, priority, created_at, 1, NULL::bigint, NULL, NULL FROM open
    UNION ALL SELECT id, concurrency_key, priority, created_at, 0, owner, cap_type, room FROM capped_reserved
    UNION ALL SELECT id, concurrency_key, priority, created_at, 1, NULL, cap_type, room FROM capped_open
  ),
  -- The capped candidates their type's room lets in: one per key among them, then as many of each type
  -- as its room. Taken before the keys are shared out with the rest, so a capped task past its room
  -- holds no key that a task of another type wants (SQLite's walk skips it before it looks at its key).
  within_room AS (
    SELECT id, concurrency_key, priority, created_at, grp, owner, cap_type FROM (
      SELECT *, row_number() OVER (PARTITION BY cap_type ORDER BY grp, ${order}) AS cap_rank FROM (
        SELECT *, row_number() OVER (PARTITION BY concurrency_key ORDER BY grp, ${order}) AS key_rank FROM candidates WHERE cap_type IS NOT NULL
      ) k
      WHERE concurrency_key IS NULL OR key_rank = 1
    ) c
    WHERE cap_rank <= room
  ),
  kept AS (
    SELECT id, grp, owner, row_number() OVER (ORDER BY grp, ${order}) AS rank FROM (
      SELECT *, row_number() OVER (PARTITION BY concurrency_key ORDER BY grp, ${order}) AS key_rank FROM (
        SELECT id, concurrency_key, priority, created_at, grp, owner, cap_type FROM candidates WHERE cap_type IS NULL
        UNION ALL SELECT * FROM within_room
      ) c
    ) k
    WHERE concurrency_key IS NULL OR key_rank = 1
  ),
  mine AS (
    SELECT k.id, k.owner, k.n FROM (
      SELECT id, owner, row_number() OVER (PARTITION BY owner ORDER BY rank) AS n FROM kept WHERE grp = 0
    ) k JOIN workers w ON w.ord = k.owner
    WHERE k.n <= w.lim
  ),
  slots AS (
    SELECT w.ord AS owner, s.n, row_number() OVER (ORDER BY s.n, w.ord) AS slot
    FROM workers w CROSS JOIN LATERAL generate_series((SELECT count(*) FROM mine m WHERE m.owner = w.ord)::int + 1, w.lim) AS s(n)
  ),
  picked AS (
    SELECT id, owner, n FROM mine
    UNION ALL
    SELECT o.id, s.owner, s.n FROM (SELECT id, row_number() OVER (ORDER BY rank) AS slot FROM kept WHERE grp = 1) o JOIN slots s ON s.slot = o.slot
  ),
  ${claimWrites(start)},
  ${CUT("candidates")}
  SELECT claimed.*, cut.cut FROM claimed, async_commit, cut ORDER BY claimed.claim_owner, claimed.claim_order`;
}

/**
 * The claim in the usual case, cheaper than claimStatement: no type in scope has a
 * max_running cap, and no task is reserved for these workers. The statement checks both first; if
 * either holds it claims nothing and says which in `blocked` ('capped' or 'reserved'), and the store
 * runs claimStatement instead. Otherwise it does what claimStatement would, without the branches that
 * would find nothing: the open pool's scan (per type when typed), at most one task per concurrency
 * key, and the same share-out, which for one worker is just the order of the scan. Same parameters;
 * rows: claimStatement's, each with `blocked` null, or a single row with no task (nothing claimed, or
 * `blocked` set).
 *
 * Every branch of a plan costs its start-up even when it runs zero times. Measured backend CPU per
 * statement, 100,000 pending tasks: one worker claiming one task ~360 µs with claimStatement, ~290 µs
 * with this one; eight workers one each ~800 µs and ~670 µs; one worker claiming 250, 28 µs and 25 µs
 * per task.
 */
export function leanClaimStatement(sortBy: SortBy, sortOrder: SortOrder, typed: boolean, start: boolean, single: boolean): string {
  const order = ORDER_BY[sortBy][sortOrder];
  const clear = `(SELECT reason FROM blocked) IS NULL`;
  return `
  WITH ${CAPPED(typed ? "ANY($7::text[])" : null)},
  ${WORKERS},
  ${DUE(typed)},
  blocked AS (
    SELECT CASE
      WHEN EXISTS (SELECT 1 FROM capped) THEN 'capped'
      WHEN EXISTS (
        SELECT 1 FROM tasks t
        WHERE t.status = 'pending' AND t.reserved_for = ANY($1::text[]) AND t.reserved_until > $2::timestamptz
          AND t.scheduled_for <= $2::timestamptz ${typed ? "AND t.task_type = ANY($7::text[])" : ""}
      ) THEN 'reserved'
    END AS reason
  ),
  open AS (${
    typed
      ? `
    SELECT o.* FROM (SELECT DISTINCT unnest($7::text[]) AS task_type WHERE ${clear}) AS wanted CROSS JOIN LATERAL (${openScan(order, "AND t.task_type = wanted.task_type")}
    ) o`
      : `
    SELECT * FROM (${openScan(order, `AND ${clear}`)}) o`
  }
  ),
  -- At most one task per concurrency key; only keyed tasks pay for the window that picks it.
  kept AS (
    SELECT id, row_number() OVER (ORDER BY ${order}) AS rank FROM (
      SELECT * FROM open WHERE concurrency_key IS NULL
      UNION ALL
      SELECT id, concurrency_key, priority, created_at FROM (
        SELECT *, row_number() OVER (PARTITION BY concurrency_key ORDER BY ${order}) AS key_rank FROM open WHERE concurrency_key IS NOT NULL
      ) k
      WHERE key_rank = 1
    ) c
  ),
  ${
    single
      ? "picked AS (SELECT id, 1::bigint AS owner, rank AS n FROM kept WHERE rank <= $3),"
      : `slots AS (
    SELECT w.ord AS owner, s.n, row_number() OVER (ORDER BY s.n, w.ord) AS slot FROM workers w CROSS JOIN LATERAL generate_series(1, w.lim) AS s(n)
  ),
  picked AS (SELECT k.id, s.owner, s.n FROM kept k JOIN slots s ON s.slot = k.rank),`
  }
  ${claimWrites(start)},
  ${CUT("open")}
  SELECT b.reason AS blocked, cut.cut, c.* FROM blocked b CROSS JOIN async_commit CROSS JOIN cut LEFT JOIN claimed c ON true ORDER BY c.claim_owner, c.claim_order`;
}

/**
 * $1 id, $2 worker_id, $3 now, $4 lease seconds. Claims one pending task regardless of its schedule,
 * unless its type is at its max_running cap (checked under the type's lock, as in claimStatement).
 */
export const CLAIM_BY_ID = `
  WITH ${CAPPED("(SELECT task_type FROM tasks WHERE id = $1)")}, ${ROOM},
  claimed AS (
    UPDATE tasks t
    SET status = 'claimed', worker_id = $2, lease_token = gen_random_uuid()::text, lease_seconds = $4::int,
        lease_expires_at = $3::timestamptz + make_interval(secs => $4::int), claimed_at = $3::timestamptz, last_heartbeat_at = $3::timestamptz,
        started_at = NULL, attempts = t.attempts + 1, reserved_for = NULL, reserved_until = NULL, updated_at = $3::timestamptz
    WHERE t.id = $1 AND t.status = 'pending' AND NOT EXISTS (SELECT 1 FROM room WHERE room.room <= 0)
    RETURNING ${TASK("t")}
  ),
  logged AS (
    INSERT INTO task_events (task_id, event, to_worker_id, data, created_at)
    SELECT id, 'claimed', $2, jsonb_build_object('attempt', attempts), $3::timestamptz FROM claimed
  ),
  ${ASYNC_COMMIT}
  SELECT claimed.* FROM claimed, async_commit`;

/** $1 id. The columns that explain a refused write (see refusal.ts). */
export const LEASE_STATE = `SELECT status, worker_id, lease_token, concurrency_key, task_type FROM tasks WHERE id = $1`;

/** $1 id, $2 worker_id, $3 token, $4 now. */
export const START = `
  WITH started AS (
    UPDATE tasks t SET status = 'running', started_at = $4::timestamptz, last_heartbeat_at = $4::timestamptz,
        lease_expires_at = $4::timestamptz + make_interval(secs => t.lease_seconds), updated_at = $4::timestamptz
    WHERE ${LEASE_HELD("start")}
    RETURNING ${TASK("t")}
  ),
  logged AS (INSERT INTO task_events (task_id, event, to_worker_id, created_at) SELECT id, 'started', $2, $4::timestamptz FROM started),
  ${ASYNC_COMMIT}
  SELECT started.* FROM started, async_commit`;

/** $1 id, $2 worker_id, $3 token, $4 now, $5 lease seconds or null (keep), $6 progress or null (keep). */
export const HEARTBEAT = `
  WITH beat AS (
    UPDATE tasks t SET last_heartbeat_at = $4::timestamptz, lease_seconds = COALESCE($5::int, t.lease_seconds),
        lease_expires_at = $4::timestamptz + make_interval(secs => COALESCE($5::int, t.lease_seconds)),
        progress = COALESCE($6::float8, t.progress), updated_at = $4::timestamptz
    WHERE ${LEASE_HELD("heartbeat")}
    RETURNING ${TASK("t")}
  ),
  ${ASYNC_COMMIT}
  SELECT beat.* FROM beat, async_commit`;

/** $1 id, $2 worker_id, $3 token, $4 now, $5 progress. */
export const PROGRESS = `
  WITH moved AS (
    UPDATE tasks t SET progress = $5::float8, updated_at = $4::timestamptz WHERE ${LEASE_HELD("progress")} RETURNING ${TASK("t")}
  ),
  ${ASYNC_COMMIT}
  SELECT moved.* FROM moved, async_commit`;

/**
 * $1 id, $2 worker_id, $3 token, $4 now, $5 checkpoint (JSON), $6 what its event records instead of a
 * copy (JSON), or null: a checkpoint too large to copy into the trail (core/event.ts, omittedCheckpoint).
 * Durable: a checkpoint is saved work.
 */
export const CHECKPOINT = `
  WITH saved AS (
    UPDATE tasks t SET checkpoint = $5::jsonb, updated_at = $4::timestamptz WHERE ${LEASE_HELD("checkpoint")} RETURNING ${TASK("t")}
  ),
  logged AS (
    INSERT INTO task_events (task_id, event, to_worker_id, data, created_at)
    SELECT id, 'checkpoint', $2, coalesce($6::jsonb, checkpoint), $4::timestamptz FROM saved
  )
  SELECT * FROM saved`;

/**
 * $1 id, $2 worker_id, $3 token, $4 now, $5 result (JSON), $6 follow-ups (JSON array), $7 notification channel.
 * The follow-ups are inserted only if the completion itself matched, in the same statement, so a
 * refused completion creates none. Rows come back tagged: 'done' for the task, 'follow_up' for new ones.
 */
export const COMPLETE = `
  WITH done AS (
    UPDATE tasks t SET status = 'completed', result = $5::jsonb, completed_at = $4::timestamptz, error_message = NULL, lease_expires_at = NULL, updated_at = $4::timestamptz
    WHERE ${LEASE_HELD("complete")}
    RETURNING ${TASK("t")}
  ),
  done_event AS (
    INSERT INTO task_events (task_id, event, from_worker_id, created_at) SELECT id, 'completed', $2, $4::timestamptz FROM done
  ),
  ${TALLY_FINISHED("done")},
  ${insertTasks("$6", "$4::timestamptz", "EXISTS (SELECT 1 FROM done)")},
  ${NOTIFY_INSERTED("$7")}
  SELECT 'done' AS row_kind, done.* FROM done
  UNION ALL
  SELECT 'follow_up' AS row_kind, inserted.* FROM inserted LEFT JOIN notified ON true`;

/**
 * Backoff delay in seconds of the attempt that just failed; the same formula as core/backoff.ts
 * (retryDelayMs, its exponent stopped as backoffExponent stops it, short of an overflow), written in
 * SQL so a failure stays one round trip. `jitter` is the draw in [0, 1).
 */
const backoffSeconds = (jitter: string) => `
  LEAST((t.backoff->>'maxSeconds')::float8,
        (t.backoff->>'baseSeconds')::float8 * power((t.backoff->>'factor')::float8,
          CASE WHEN (t.backoff->>'factor')::float8 > 1 THEN LEAST(GREATEST(0, t.attempts - 1), 300 / log10((t.backoff->>'factor')::float8)) ELSE 0 END))
  * (1 - (t.backoff->>'jitter')::float8 * ${jitter})`;

/** The columns a failure sets, for one item whose retryability is `retry` and jitter draw `jitter`. */
const failedColumns = (now: string, error: string, retryable: string, jitter: string) => {
  const retry = `${retryable} AND t.attempts < t.max_attempts`;
  return `
      status = CASE WHEN ${retry} THEN 'pending' ELSE 'failed' END,
      scheduled_for = CASE WHEN ${retry}
                           THEN ${now} + make_interval(secs => round((${backoffSeconds(jitter)}) * 1000) / 1000)
                           ELSE t.scheduled_for END,
      worker_id = CASE WHEN ${retry} THEN NULL ELSE t.worker_id END,
      lease_token = CASE WHEN ${retry} THEN NULL ELSE t.lease_token END,
      completed_at = CASE WHEN ${retry} THEN NULL ELSE ${now} END,
      lease_expires_at = NULL, error_message = ${error}, updated_at = ${now}`;
};

/** A time as the ISO-8601 text JavaScript writes (what SQLite stores), so event data is the same on both stores. */
export const ISO_TIME = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** The event of each failed row: retry_scheduled or failed, with the attempt figures, and the stack when the worker sent one. */
const logFailures = (workerId: string, error: string, stack: string, now: string) => `
  logged AS (
    INSERT INTO task_events (task_id, event, from_worker_id, message, data, created_at)
    SELECT id, CASE WHEN status = 'pending' THEN 'retry_scheduled' ELSE 'failed' END, ${workerId}, ${error},
           jsonb_build_object('attempt', attempts, 'max_attempts', max_attempts,
                              'retry_at', CASE WHEN status = 'pending' THEN ${ISO_TIME("scheduled_for")} END)
             || CASE WHEN ${stack} IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('stack', ${stack}) END,
           ${now}
    FROM failed
  )`;

/** $1 id, $2 worker_id, $3 token, $4 now, $5 error message, $6 retryable, $7 jitter draw, $8 stack (or null). */
export const FAIL = `
  WITH failed AS (
    UPDATE tasks t SET ${failedColumns("$4::timestamptz", "$5", "$6", "$7")}
    WHERE ${LEASE_HELD("fail")}
    RETURNING ${TASK("t")}
  ),
  ${logFailures("$2", "$5", "$8::text", "$4::timestamptz")},
  ${TALLY_FINISHED("failed")}
  SELECT * FROM failed`;

/**
 * Lease check of each item of a batched write (`items i`), as LEASE_HELD does for one call. IS NOT
 * DISTINCT FROM means `=` here (the items' values are never null) but is not indexable, so each item
 * is found by its primary key: with `=` the planner looked items up through tasks_leased_by_worker
 * and filtered every task the worker held, for each item.
 */
const BATCH_LEASE_HELD = (action: keyof typeof TRANSITIONS) =>
  `t.id = i.id AND t.worker_id IS NOT DISTINCT FROM i.worker_id AND t.lease_token IS NOT DISTINCT FROM i.lease_token
   AND t.status IN (${sqlList(TRANSITIONS[action].from)})`;

/**
 * $1 ids, $2 worker_ids, $3 tokens, $4 now, $5 results (JSON text each). Many completions in one
 * statement and one commit; the ids it returns were applied, the others refused.
 */
export const completeMany = (returnTasks: boolean) => `
  WITH items AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $5::text[]) AS i(id, worker_id, lease_token, result)),
  done AS (
    UPDATE tasks t SET status = 'completed', result = i.result::jsonb, completed_at = $4::timestamptz, error_message = NULL, lease_expires_at = NULL, updated_at = $4::timestamptz
    FROM items i
    WHERE ${BATCH_LEASE_HELD("complete")}
    RETURNING ${returnTasks ? TASK("t") : "t.id, t.status, t.scheduled_for, t.task_type, t.claimed_at, t.completed_at"}, i.worker_id AS completed_by
  ),
  logged AS (INSERT INTO task_events (task_id, event, from_worker_id, created_at) SELECT id, 'completed', completed_by, $4::timestamptz FROM done),
  ${TALLY_FINISHED("done")}
  SELECT ${returnTasks ? "*" : "id, status, scheduled_for"} FROM done`;

/** $1 ids, $2 worker_ids, $3 tokens, $4 now, $5 error messages, $6 retryable flags, $7 jitter draws, $8 stacks: FAIL for many. */
export const failMany = (returnTasks: boolean) => `
  WITH items AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $5::text[], $6::boolean[], $7::float8[], $8::text[])
      AS i(id, worker_id, lease_token, error, retryable, jitter, stack)
  ),
  failed AS (
    UPDATE tasks t SET ${failedColumns("$4::timestamptz", "i.error", "i.retryable", "i.jitter")}
    FROM items i
    WHERE ${BATCH_LEASE_HELD("fail")}
    RETURNING ${TASK("t")}, i.worker_id AS failed_by, i.error AS failure, i.stack AS failure_stack
  ),
  ${logFailures("failed_by", "failure", "failure_stack", "$4::timestamptz")},
  ${TALLY_FINISHED("failed")}
  SELECT ${returnTasks ? "*" : "id, status, scheduled_for"} FROM failed`;

/**
 * $1 id, $2 worker_id, $3 token, $4 now, $5 replace checkpoint?, $6 checkpoint, $7 reason.
 * Back to pending with the attempt refunded: a release is not a failure.
 */
export const RELEASE = `
  WITH released AS (
    UPDATE tasks t SET status = 'pending', worker_id = NULL, lease_token = NULL, lease_expires_at = NULL,
        claimed_at = NULL, started_at = NULL, attempts = GREATEST(t.attempts - 1, 0), scheduled_for = ${DUE_AGAIN("$4::timestamptz")},
        checkpoint = CASE WHEN $5 THEN $6::jsonb ELSE t.checkpoint END, updated_at = $4::timestamptz
    WHERE ${LEASE_HELD("release")}
    RETURNING ${TASK("t")}
  ),
  logged AS (
    INSERT INTO task_events (task_id, event, from_worker_id, message, data, created_at)
    SELECT id, 'released', $2, $7, checkpoint, $4::timestamptz FROM released
  )
  SELECT * FROM released`;

/**
 * $1 id, $2 now, $3 reason, $4 notification channel. Token and worker stay, so the holder's next call
 * learns it was cancelled; a held task's cancel is announced (core/notices.ts), so its worker stops it at once.
 */
export const CANCEL = `
  WITH cancelled AS (
    UPDATE tasks t SET status = 'cancelled', completed_at = $2::timestamptz, lease_expires_at = NULL,
        reserved_for = NULL, reserved_until = NULL, updated_at = $2::timestamptz
    WHERE t.id = $1 AND t.status IN (${sqlList(TRANSITIONS.cancel.from)})
    RETURNING ${TASK("t")}
  ),
  logged AS (
    INSERT INTO task_events (task_id, event, from_worker_id, message, created_at)
    SELECT id, 'cancelled', worker_id, $3, $2::timestamptz FROM cancelled
  ),
  notified AS (
    SELECT pg_notify($4, '${CANCEL_NOTICE_PREFIX}' || id) FROM cancelled WHERE worker_id IS NOT NULL
  )
  SELECT cancelled.* FROM cancelled LEFT JOIN notified ON true`;

/** $1 id, $2 now, $3 whether to reset the checkpoint. A manual retry gives a dead-letter task a fresh attempt budget; its checkpoint stays unless reset. */
export const RETRY = `
  WITH retried AS (
    UPDATE tasks t SET status = 'pending', attempts = 0, scheduled_for = $2::timestamptz, worker_id = NULL, lease_token = NULL,
        lease_expires_at = NULL, claimed_at = NULL, started_at = NULL, completed_at = NULL, updated_at = $2::timestamptz,
        checkpoint = CASE WHEN $3::boolean THEN NULL ELSE t.checkpoint END, progress = CASE WHEN $3::boolean THEN NULL ELSE t.progress END
    WHERE t.id = $1 AND t.status IN (${sqlList(TRANSITIONS.retry.from)})
    RETURNING ${TASK("t")}
  ),
  logged AS (
    INSERT INTO task_events (task_id, event, message, created_at)
    SELECT id, 'requeued', CASE WHEN $3::boolean THEN 'manual retry, checkpoint reset' ELSE 'manual retry' END, $2::timestamptz FROM retried
  )
  SELECT * FROM retried`;

/** $1 id, $2 worker_id, $3 now, $4 seconds. */
export const RESERVE = `
  WITH reserved AS (
    UPDATE tasks t SET reserved_for = $2, reserved_until = $3::timestamptz + make_interval(secs => $4::float8), updated_at = $3::timestamptz
    WHERE t.id = $1 AND t.status = 'pending'
    RETURNING ${TASK("t")}
  ),
  logged AS (
    INSERT INTO task_events (task_id, event, to_worker_id, data, created_at)
    SELECT id, 'reassigned', $2, jsonb_build_object('reserved_until', ${ISO_TIME("reserved_until")}), $3::timestamptz FROM reserved
  )
  SELECT * FROM reserved`;

export const GET = `SELECT ${TASK()} FROM tasks WHERE id = $1`;

/**
 * A task listing with only the filters given ($1 limit, then the filters in this order: type, worker,
 * params text, before-id). The text search is a scan of the rows the other filters leave (strpos, not
 * LIKE: the caller's text has no wildcards); it is for an operator's looking up. Built per combination
 * rather than with "$n IS NULL OR …", because the pool plans prepared statements generically and a
 * generic plan cannot drop absent filters. The statuses are written into the statement (they are
 * checked names, never the caller's text): a generic plan cannot tell that `status = ANY($n)` stays
 * within a partial index's statuses, and the listing indexes are partial (migration 010), guarded
 * by `id > 0` so that only listings use them.
 */
export function listStatement(
  filters: { statuses: TaskStatus[] | null; taskType: boolean; workerId: boolean; search: boolean; cursor: boolean },
  order: "newest" | "oldest",
): string {
  const statuses = filters.statuses?.map((status) => {
    if (!TASK_STATUSES.includes(status)) throw new Error(`Not a task status: ${status}`);
    return `'${status}'`;
  });
  const conditions = [
    // `id > 0`: the listing indexes' guard (migration 010).
    statuses && (statuses.length > 0 ? `status IN (${statuses.join(", ")}) AND id > 0` : "false"),
    filters.taskType && "task_type = $?",
    filters.workerId && "worker_id = $?",
    filters.search && "strpos(lower(params::text), lower($?)) > 0",
    filters.cursor && (order === "newest" ? "id < $?" : "id > $?"),
  ].filter((c): c is string => typeof c === "string");
  let parameter = 1;
  const where = conditions.map((c) => (c.includes("$?") ? c.replace("$?", `$${++parameter}`) : c));
  return `SELECT ${TASK()} FROM tasks ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY id ${order === "newest" ? "DESC" : "ASC"} LIMIT $1`;
}

/**
 * Tasks by type and status without reading the table: each status through its partial index (the
 * statuses are literals so that generic plans can use them), completed ones from their totals and the
 * tallies not folded into them yet: the completions' (throughput_tallies, migration 014) and
 * retention's deletions (completed_tallies, migration 011). Pending tasks cost a walk of the
 * backlog's index; the history costs nothing.
 */
export const COUNTS = `
  SELECT task_type, 'pending' AS status, count(*) AS n FROM tasks WHERE status = 'pending' GROUP BY task_type
  UNION ALL
  SELECT task_type, status, count(*) FROM tasks WHERE status IN (${LEASED}) GROUP BY task_type, status
  UNION ALL
  SELECT task_type, 'failed', count(*) FROM tasks WHERE status = 'failed' GROUP BY task_type
  UNION ALL
  SELECT task_type, 'cancelled', count(*) FROM tasks WHERE status = 'cancelled' GROUP BY task_type
  UNION ALL
  SELECT task_type, 'completed', sum(n)::bigint FROM (
    SELECT task_type, n FROM completed_totals
    UNION ALL SELECT task_type, n FROM completed_tallies
    UNION ALL SELECT task_type, tasks FROM throughput_tallies WHERE status = 'completed'
  ) c
  GROUP BY task_type HAVING sum(n) <> 0`;

/**
 * Per task type: what counts() answers of its completed tasks (`before`), the rows that are completed
 * (`after`), and of those the completions still tallied in throughput_tallies (`unfolded`), which the
 * sweep's fold will add to the totals. One statement reads it all in one snapshot, so a completion
 * committing meanwhile is either in both its row and its tally or in neither.
 */
const RECOUNT_FIGURES = `
  tallied AS (
    SELECT task_type, sum(n)::bigint AS n FROM (
      SELECT task_type, n FROM completed_totals
      UNION ALL SELECT task_type, n FROM completed_tallies
      UNION ALL SELECT task_type, tasks FROM throughput_tallies WHERE status = 'completed'
    ) c
    GROUP BY task_type
  ),
  unfolded AS (SELECT task_type, sum(tasks)::bigint AS n FROM throughput_tallies WHERE status = 'completed' GROUP BY task_type),
  counted AS (SELECT task_type, count(*) AS n FROM tasks WHERE status = 'completed' GROUP BY task_type),
  figures AS (
    SELECT k.task_type, coalesce(t.n, 0) AS before, coalesce(c.n, 0) AS after, coalesce(u.n, 0) AS unfolded
    FROM (SELECT task_type FROM tallied UNION SELECT task_type FROM counted) AS k
    LEFT JOIN tallied t USING (task_type)
    LEFT JOIN counted c USING (task_type)
    LEFT JOIN unfolded u USING (task_type)
  )`;

/** Store.recount with dryRun: the figures (see RECOUNT_FIGURES), nothing written. */
export const RECOUNT_PREVIEW = `WITH ${RECOUNT_FIGURES} SELECT task_type, before, after FROM figures`;

/**
 * Store.recount: sets each type's total to its completed rows less its unfolded completion tallies,
 * and drops the other tallies (retention's deletions, and the completions of processes of an earlier
 * version), all of them counted in the figures. Every type with a total is among the figures, so each
 * total is overwritten in place (a DELETE and an INSERT of one key in one statement may run in either
 * order). Run inside RECOUNT_LOCK's transaction; the DELETE removes only the tallies this statement's
 * snapshot saw, so a tally committed meanwhile stays, as its task's row change was not seen either.
 */
export const RECOUNT = `
  WITH ${RECOUNT_FIGURES},
  dropped AS (DELETE FROM completed_tallies),
  set_totals AS (
    INSERT INTO completed_totals AS c (task_type, n) SELECT task_type, after - unfolded FROM figures
    ON CONFLICT (task_type) DO UPDATE SET n = excluded.n
  )
  SELECT task_type, before, after FROM figures`;

/**
 * Taken before RECOUNT, in its transaction, so that its snapshot comes after the lock. It keeps out the
 * one other writer of completed_totals, the sweep's fold (FOLD_TALLIES, and the fold of an earlier
 * version's coordinator), which deletes the very tallies RECOUNT reads: a fold committing between
 * RECOUNT's snapshot and its write would have its tallies added to totals that RECOUNT then overwrites
 * as though they were still unfolded, losing them. A fold waits for the recount to commit, then folds
 * the tallies RECOUNT left. Completions (throughput_tallies), retention (completed_tallies) and
 * counts() (reads) take no lock this one conflicts with, so they go on meanwhile; two recounts wait
 * for each other (SHARE ROW EXCLUSIVE conflicts with itself).
 */
export const RECOUNT_LOCK = `LOCK TABLE completed_totals IN SHARE ROW EXCLUSIVE MODE`;

/**
 * $1 the oldest minute to keep. The coordinator's sweep folds every tally: the completions' into the
 * throughput minutes and, with retention's deletions, into the completed totals; and drops the
 * minutes no throughput window reaches (a late tally of such a minute still counts in the totals).
 * Deleting the tallies and adding them up is one statement: a reader sees them on one side or the
 * other, never both. Two folds at once cannot count a tally twice: the second waits for the first's
 * row locks and then finds those rows gone.
 */
export const FOLD_TALLIES = `
  WITH finished AS (DELETE FROM throughput_tallies RETURNING *),
  pruned AS (DELETE FROM completed_tallies RETURNING task_type, n),
  expired AS (DELETE FROM throughput_minutes WHERE minute < $1::timestamptz),
  minutes AS (
    INSERT INTO throughput_minutes AS m (minute, task_type, status, tasks, picked, pickup_sum, pickup_max)
    SELECT minute, task_type, status, sum(tasks), sum(picked), sum(pickup_sum), max(pickup_max)
    FROM finished WHERE minute >= $1::timestamptz
    GROUP BY minute, task_type, status
    ON CONFLICT (minute, task_type, status) DO UPDATE SET
      tasks = m.tasks + excluded.tasks, picked = m.picked + excluded.picked, pickup_sum = m.pickup_sum + excluded.pickup_sum,
      pickup_max = GREATEST(m.pickup_max, excluded.pickup_max)
  )
  INSERT INTO completed_totals AS c (task_type, n)
  SELECT task_type, sum(n) FROM (
    SELECT task_type, tasks AS n FROM finished WHERE status = 'completed' UNION ALL SELECT task_type, n FROM pruned
  ) AS t
  GROUP BY task_type
  ON CONFLICT (task_type) DO UPDATE SET n = c.n + excluded.n`;

/** $1 task id, $2 how many of its latest events (null: all). */
export const EVENTS = `SELECT * FROM (SELECT * FROM task_events WHERE task_id = $1 ORDER BY id DESC LIMIT $2) e ORDER BY id`;
