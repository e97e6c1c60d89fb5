/**
 * The task statements of the SQLite store, one named constant each (the claim's are in claim.ts, the
 * registry's, workers' and sweep's in their own files).
 *
 * Where this differs from PostgreSQL, and why:
 * - No SKIP LOCKED or row locks: SQLite has one writer at a time, so each operation runs in a
 *   BEGIN IMMEDIATE transaction (the write lock is taken up front; others wait up to busy_timeout).
 *   Inside it nothing can change between a SELECT and the UPDATE that follows.
 * - Operations are several statements in one transaction instead of one CTE: calls are in-process,
 *   there are no round trips to save.
 * - Lease tokens are made in TypeScript (no gen_random_uuid); the backoff's jitter draw is passed in,
 *   as on PostgreSQL, so the store's `random` decides it.
 * - Times are ISO-8601 text compared as strings.
 */
import { LEASED_STATUSES, TRANSITIONS } from "../../core/state-machine.js";
import { TASK_STATUSES, type TaskStatus } from "../../core/task.js";

const sqlList = (items: readonly string[]) => items.map((s) => `'${s}'`).join(", ");

/** Lease check shared by every worker call. */
/** A task given back is ready again from @now, unless it was claimed before it was due (PostgreSQL's DUE_AGAIN says why). */
export const DUE_AGAIN = "MAX(scheduled_for, @now)";

const LEASE_HELD = (action: keyof typeof TRANSITIONS) =>
  `id = @id AND worker_id = @workerId AND lease_token = @leaseToken AND status IN (${sqlList(TRANSITIONS[action].from)})`;

/** Skips the row when a pending task holds its unique key; RETURNING is then empty. */
export const INSERT_TASK = `
  INSERT INTO tasks (task_type, task_type_version, params, priority, scheduled_for, concurrency_key, unique_key,
                     max_attempts, backoff, timeout_seconds, parent_id, created_at, updated_at)
  VALUES (@taskType, @taskTypeVersion, @params, @priority, @scheduledFor, @concurrencyKey, @uniqueKey,
          @maxAttempts, @backoff, @timeoutSeconds, @parentId, @now, @now)
  ON CONFLICT (unique_key) WHERE status = 'pending' AND unique_key IS NOT NULL DO NOTHING
  RETURNING *`;

export const PENDING_BY_UNIQUE_KEY = `SELECT * FROM tasks WHERE status = 'pending' AND unique_key = ?`;

/** What the call that used an idempotency key sent (fingerprint) and got (task_ids, a JSON array). */
export const IDEMPOTENCY_KEY = `SELECT fingerprint, task_ids FROM idempotency_keys WHERE key = ?`;

/** Recorded in the write transaction that inserted the call's tasks, so both commit or neither. */
export const RECORD_IDEMPOTENCY_KEY = `
  INSERT INTO idempotency_keys (key, fingerprint, task_ids, created_at) VALUES (@key, @fingerprint, @taskIds, @now)`;

/** The tasks of a JSON array of ids, in no particular order. */
export const TASKS_BY_IDS = `SELECT * FROM tasks WHERE id IN (SELECT value FROM json_each(?))`;

export const INSERT_EVENT = `
  INSERT INTO task_events (task_id, event, from_worker_id, to_worker_id, message, data, created_at)
  VALUES (@taskId, @event, @fromWorkerId, @toWorkerId, @message, @data, @now)`;

export const LEASE_STATE = `SELECT status, worker_id, lease_token, concurrency_key, task_type FROM tasks WHERE id = ?`;

export const START = `
  UPDATE tasks SET status = 'running', started_at = @now, last_heartbeat_at = @now,
      lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', @now, '+' || lease_seconds || ' seconds'), updated_at = @now
  WHERE ${LEASE_HELD("start")}
  RETURNING *`;

export const HEARTBEAT = `
  UPDATE tasks SET last_heartbeat_at = @now, lease_seconds = COALESCE(@leaseSeconds, lease_seconds),
      lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', @now, '+' || COALESCE(@leaseSeconds, lease_seconds) || ' seconds'),
      progress = COALESCE(@progress, progress), updated_at = @now
  WHERE ${LEASE_HELD("heartbeat")}
  RETURNING *`;

export const PROGRESS = `UPDATE tasks SET progress = @progress, updated_at = @now WHERE ${LEASE_HELD("progress")} RETURNING *`;

export const CHECKPOINT = `UPDATE tasks SET checkpoint = @checkpoint, updated_at = @now WHERE ${LEASE_HELD("checkpoint")} RETURNING *`;

const completeReturning = (columns: string) => `
  UPDATE tasks SET status = 'completed', result = @result, completed_at = @now, error_message = NULL, lease_expires_at = NULL, updated_at = @now
  WHERE ${LEASE_HELD("complete")}
  RETURNING ${columns}`;

export const COMPLETE = completeReturning("*");

/**
 * A batched completion whose caller did not ask for the tasks (a worker: BatchOptions.returnTasks):
 * reading back whole rows and parsing them took completeMany from 28–31 to 46–50 µs of CPU per task.
 */
export const COMPLETE_STATUS = completeReturning("status, scheduled_for");

/**
 * retryDelayMs (core/backoff.ts) in SQL, its operations in the same order so the delay is the same to
 * the millisecond: min(max, base * factor^(attempts - 1)) * 1000 * (1 - jitter * @jitterDraw), rounded,
 * the exponent stopped as backoffExponent stops it, short of an overflow.
 */
const BACKOFF_MS = `
  round(min(json_extract(backoff, '$.maxSeconds'),
            json_extract(backoff, '$.baseSeconds') * pow(json_extract(backoff, '$.factor'),
              CASE WHEN json_extract(backoff, '$.factor') > 1
                   THEN min(max(0, attempts - 1), 300 / log10(json_extract(backoff, '$.factor'))) ELSE 0 END))
        * 1000 * (1 - json_extract(backoff, '$.jitter') * @jitterDraw))`;

/**
 * The unique key of a task going back to pending (when `requeued`, a condition on the row as it was)
 * from a lease: given up if another pending task holds it, so the write does not break
 * tasks_pending_unique_key and both tasks run (PostgreSQL migration 020 says why). The subquery sees
 * the rows its statement changed before this one, so of two tasks of one key requeued together, the
 * first keeps it.
 */
export const GIVE_UP_HELD_UNIQUE_KEY = (requeued: string) => `
      unique_key = CASE WHEN ${requeued} AND unique_key IS NOT NULL
                             AND EXISTS (SELECT 1 FROM tasks held WHERE held.unique_key = tasks.unique_key AND held.status = 'pending' AND held.id <> tasks.id)
                        THEN NULL ELSE unique_key END`;

/** Retry while the error allows it (@retryable 1) and attempts remain; the SET reads the row as it was. */
const RETRIES = `@retryable AND attempts < max_attempts`;

/** Back to pending after the backoff, or failed for good; the lease check is in the statement. */
export const FAIL = `
  UPDATE tasks SET
      status = CASE WHEN ${RETRIES} THEN 'pending' ELSE 'failed' END,
      scheduled_for = CASE WHEN ${RETRIES}
                           THEN strftime('%Y-%m-%dT%H:%M:%fZ', @now, '+' || (${BACKOFF_MS} / 1000.0) || ' seconds')
                           ELSE scheduled_for END,
      worker_id = CASE WHEN ${RETRIES} THEN NULL ELSE worker_id END,
      lease_token = CASE WHEN ${RETRIES} THEN NULL ELSE lease_token END,
      completed_at = CASE WHEN ${RETRIES} THEN completed_at ELSE @now END,
      ${GIVE_UP_HELD_UNIQUE_KEY(RETRIES)},
      lease_expires_at = NULL, error_message = @error, updated_at = @now
  WHERE ${LEASE_HELD("fail")}
  RETURNING *`;

export const RELEASE = `
  UPDATE tasks SET status = 'pending', worker_id = NULL, lease_token = NULL, lease_expires_at = NULL,
      claimed_at = NULL, started_at = NULL, attempts = MAX(attempts - 1, 0), scheduled_for = ${DUE_AGAIN},
      checkpoint = CASE WHEN @replace THEN @checkpoint ELSE checkpoint END, ${GIVE_UP_HELD_UNIQUE_KEY("1")}, updated_at = @now
  WHERE ${LEASE_HELD("release")}
  RETURNING *`;

export const CANCEL = `
  UPDATE tasks SET status = 'cancelled', completed_at = @now, lease_expires_at = NULL,
      reserved_for = NULL, reserved_until = NULL, updated_at = @now
  WHERE id = @id AND status IN (${sqlList(TRANSITIONS.cancel.from)})
  RETURNING *`;

export const RETRY = `
  UPDATE tasks SET status = 'pending', attempts = 0, scheduled_for = @now, worker_id = NULL, lease_token = NULL,
      lease_expires_at = NULL, claimed_at = NULL, started_at = NULL, completed_at = NULL, updated_at = @now,
      checkpoint = CASE WHEN @reset THEN NULL ELSE checkpoint END, progress = CASE WHEN @reset THEN NULL ELSE progress END
  WHERE id = @id AND status IN (${sqlList(TRANSITIONS.retry.from)})
  RETURNING *`;

export const RESERVE = `
  UPDATE tasks SET reserved_for = @workerId, reserved_until = @reservedUntil, updated_at = @now
  WHERE id = @id AND status = 'pending'
  RETURNING *`;

export const GET = `SELECT * FROM tasks WHERE id = ?`;

/** The statuses tasks_finished_by_status holds (migration 026). */
const FINISHED_UNCOMPLETED = ["failed", "cancelled"] as const;

/**
 * Below this many pending tasks, a listing of pending tasks reads them all through their index and
 * sorts them; from it on, it walks the table in id order, where a backlog that large is met at once.
 */
export const FEW_PENDING = 5000;

/** How many pending tasks there are, up to FEW_PENDING, from their index alone. */
export const PENDING_UP_TO_FEW = `SELECT count(*) AS n FROM (SELECT 1 FROM tasks WHERE status = 'pending' LIMIT ${FEW_PENDING})`;

/**
 * A task listing with the filters given (named parameters @taskType, @workerId, @search, @cursor,
 * @limit). The generic statement walked the table in id order for every filter until its page was
 * full, on the thread that serves every request: with a million tasks, 160 ms for a page of failed
 * ones and 250 ms for pending ones where there were none. The statuses are now written into the
 * statement (checked names, never the caller's text), with the condition of the partial index that
 * lists them, as SQLite reads a partial index only when the query states its condition:
 * - failed or cancelled: tasks_finished_by_status, one status walked in id order, the walk ending
 *   with the page (failed tasks are kept until retried: they can be many);
 * - claimed or running: the leased-task indexes (as many as workers hold), sorted;
 * - pending, when there are fewer than FEW_PENDING (`fewPending`): all of them through
 *   tasks_pending_by_type, sorted. A larger backlog is walked for in id order, where it is met at
 *   once; an index for listing pending tasks would cost every enqueue and claim an entry.
 * Other listings walk the table in id order: completed tasks are most of it.
 */
export function listStatement(
  filters: { statuses: readonly TaskStatus[] | null; taskType: string | null; workerId: string | null; search: string | null; afterCursor: number | null },
  order: "newest" | "oldest",
  fewPending = false,
): string {
  const statuses = filters.statuses && [...new Set(filters.statuses)];
  for (const status of statuses ?? []) if (!TASK_STATUSES.includes(status)) throw new Error(`Not a task status: ${status}`);
  const within = (listed: readonly string[]) => statuses !== null && statuses.length > 0 && statuses.every((s) => listed.includes(s));
  const pendingFromIndex = fewPending && within(["pending"]);
  const conditions = [
    statuses && (statuses.length > 0 ? `status IN (${sqlList(statuses)})` : "0"),
    // The partial indexes' own conditions, as their migrations write them.
    within(FINISHED_UNCOMPLETED) && `status IN (${sqlList(FINISHED_UNCOMPLETED)})`,
    within(LEASED_STATUSES) && `status IN (${sqlList(LEASED_STATUSES)})`,
    pendingFromIndex && "status = 'pending'",
    filters.taskType !== null && "task_type = @taskType",
    filters.workerId !== null && "worker_id = @workerId",
    filters.search !== null && "instr(tp_lower(params), tp_lower(@search)) > 0",
    filters.afterCursor !== null && (order === "newest" ? "id < @cursor" : "id > @cursor"),
  ].filter((c): c is string => typeof c === "string");
  const from = pendingFromIndex ? "tasks INDEXED BY tasks_pending_by_type" : "tasks";
  return `SELECT * FROM ${from} ${conditions.length > 0 ? `WHERE ${conditions.join(" AND ")}` : ""} ORDER BY id ${order === "newest" ? "DESC" : "ASC"} LIMIT @limit`;
}

/**
 * Tasks by type and status without reading the table: each status through its partial index,
 * completed ones from the totals the triggers of migration 009 keep. Pending tasks cost a walk of
 * the backlog's index; the history costs nothing.
 */
export const COUNTS = `
  SELECT task_type, 'pending' AS status, count(*) AS n FROM tasks WHERE status = 'pending' GROUP BY task_type
  UNION ALL
  SELECT task_type, status, count(*) FROM tasks WHERE status IN (${sqlList(LEASED_STATUSES)}) GROUP BY task_type, status
  UNION ALL
  SELECT task_type, 'failed', count(*) FROM tasks WHERE status = 'failed' GROUP BY task_type
  UNION ALL
  SELECT task_type, 'cancelled', count(*) FROM tasks WHERE status = 'cancelled' GROUP BY task_type
  UNION ALL
  SELECT task_type, 'completed', n FROM completed_totals WHERE n <> 0`;

/** Per task type: what counts() answers of its completed tasks (`before`) and its completed rows (`after`). */
export const RECOUNT_FIGURES = `
  WITH counted AS (SELECT task_type, count(*) AS n FROM tasks WHERE status = 'completed' GROUP BY task_type)
  SELECT k.task_type, coalesce(t.n, 0) AS before, coalesce(c.n, 0) AS after
  FROM (SELECT task_type FROM completed_totals UNION SELECT task_type FROM counted) AS k
  LEFT JOIN completed_totals t USING (task_type)
  LEFT JOIN counted c USING (task_type)`;

/** Store.recount, after RECOUNT_FIGURES in the same write transaction: the totals become the rows' counts. */
export const CLEAR_COMPLETED_TOTALS = `DELETE FROM completed_totals`;
export const SET_COMPLETED_TOTALS = `INSERT INTO completed_totals (task_type, n) SELECT task_type, count(*) FROM tasks WHERE status = 'completed' GROUP BY task_type`;

/** A task's latest @limit events (-1: all), oldest first. */
export const EVENTS = `SELECT * FROM (SELECT * FROM task_events WHERE task_id = @taskId ORDER BY id DESC LIMIT @limit) ORDER BY id`;
