/**
 * Every statement the SQLite store runs, one named constant each.
 *
 * Where this differs from PostgreSQL, and why:
 * - No SKIP LOCKED or row locks: SQLite has one writer at a time, so each operation runs in a
 *   BEGIN IMMEDIATE transaction (the write lock is taken up front; others wait up to busy_timeout).
 *   Inside it nothing can change between a SELECT and the UPDATE that follows.
 * - Operations are several statements in one transaction instead of one CTE: calls are in-process,
 *   there are no round trips to save.
 * - Lease tokens and backoff delays are computed in TypeScript (no gen_random_uuid, power()).
 * - Times are ISO-8601 text compared as strings.
 */
import { LEASED_STATUSES, TRANSITIONS } from "../../core/state-machine.js";
import type { SortBy, SortOrder } from "../../core/task.js";

const sqlList = (items: readonly string[]) => items.map((s) => `'${s}'`).join(", ");
const LEASED = sqlList(LEASED_STATUSES);

/** Lease check shared by every worker call. */
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

export const INSERT_EVENT = `
  INSERT INTO task_events (task_id, event, from_worker_id, to_worker_id, message, data, created_at)
  VALUES (@taskId, @event, @fromWorkerId, @toWorkerId, @message, @data, @now)`;

const ORDER_BY: Record<SortBy, Record<SortOrder, string>> = {
  priority: { desc: "priority DESC, created_at, id", asc: "priority, created_at, id" },
  created_at: { asc: "created_at, id", desc: "created_at DESC, id DESC" },
  random: { asc: "random()", desc: "random()" },
};

const placeholders = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `@${prefix}${i}`).join(", ");

/**
 * @type0..: the claim's task types. @full0..: capped types with no room left (see capRoomStatement),
 * left out of the scan; the filter is only there when there are some, so uncapped claims scan as before.
 */
const claimFilters = (typeCount: number, fullCount: number) => `
    ${typeCount > 0 ? `AND t.task_type IN (${placeholders("type", typeCount)})` : ""}
    ${fullCount > 0 ? `AND t.task_type NOT IN (${placeholders("full", fullCount)})` : ""}
    AND (@maxAttemptsRemaining IS NULL OR t.max_attempts - t.attempts > @maxAttemptsRemaining)
    AND (t.concurrency_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM tasks a WHERE a.concurrency_key = t.concurrency_key AND a.status IN (${LEASED})))`;

/** Claim candidates reserved for this worker (reassigned to it), taken before the open pool. */
export function reservedCandidatesStatement(typeCount: number, fullCount: number): string {
  return `
  SELECT t.id, t.task_type, t.concurrency_key FROM tasks t
  WHERE t.status = 'pending' AND t.reserved_for = @workerId AND t.reserved_until > @now AND t.scheduled_for <= @now
  ${claimFilters(typeCount, fullCount)}
  ORDER BY t.priority DESC, t.id
  LIMIT @limit`;
}

/**
 * The claim index for a sort, where one fits. SQLite's planner, without statistics, prefers
 * tasks_by_status and then sorts every pending row (about 1 ms per 10k pending, all of it under the
 * write lock); naming the partial index makes the scan stop after `limit` rows.
 */
function claimIndex(sortBy: SortBy, sortOrder: SortOrder, typeCount: number): string {
  if (sortBy === "priority" && sortOrder === "desc") return typeCount > 0 ? "INDEXED BY tasks_claim_by_type_priority" : "INDEXED BY tasks_claim_by_priority";
  if (sortBy === "created_at" && typeCount > 0) return "INDEXED BY tasks_claim_by_type_created";
  return "";
}

/** Claim candidates from the open pool in the requested order (from a fixed allowlist, never input). */
export function openCandidatesStatement(sortBy: SortBy, sortOrder: SortOrder, typeCount: number, fullCount: number): string {
  return `
  SELECT t.id, t.task_type, t.concurrency_key FROM tasks t ${claimIndex(sortBy, sortOrder, typeCount)}
  WHERE t.status = 'pending' AND t.scheduled_for <= @now AND (t.reserved_until IS NULL OR t.reserved_until <= @now)
  ${claimFilters(typeCount, fullCount)}
  ORDER BY ${ORDER_BY[sortBy][sortOrder]}
  LIMIT @limit`;
}

/** Claims one task; `status = 'pending'` keeps it safe even outside the candidate query. */
export const CLAIM_ONE = `
  UPDATE tasks
  SET status = CASE WHEN @start THEN 'running' ELSE 'claimed' END, worker_id = @workerId, lease_token = @leaseToken,
      lease_seconds = @leaseSeconds, lease_expires_at = @leaseExpiresAt, claimed_at = @now, last_heartbeat_at = @now,
      started_at = CASE WHEN @start THEN @now END,
      attempts = attempts + 1, reserved_for = NULL, reserved_until = NULL, updated_at = @now
  WHERE id = @id AND status = 'pending'
  RETURNING *`;

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

export const COMPLETE = `
  UPDATE tasks SET status = 'completed', result = @result, completed_at = @now, lease_expires_at = NULL, updated_at = @now
  WHERE ${LEASE_HELD("complete")}
  RETURNING *`;

/** The row a failure is decided on (attempts, policy), read under the transaction's write lock. */
export const LEASED_ROW = `SELECT * FROM tasks WHERE ${LEASE_HELD("fail")}`;

export const FAIL_RETRY = `
  UPDATE tasks SET status = 'pending', scheduled_for = @retryAt, worker_id = NULL, lease_token = NULL,
      lease_expires_at = NULL, error_message = @error, updated_at = @now
  WHERE id = @id
  RETURNING *`;

export const FAIL_FINAL = `
  UPDATE tasks SET status = 'failed', completed_at = @now, lease_expires_at = NULL, error_message = @error, updated_at = @now
  WHERE id = @id
  RETURNING *`;

export const RELEASE = `
  UPDATE tasks SET status = 'pending', worker_id = NULL, lease_token = NULL, lease_expires_at = NULL,
      claimed_at = NULL, started_at = NULL, attempts = MAX(attempts - 1, 0),
      checkpoint = CASE WHEN @replace THEN @checkpoint ELSE checkpoint END, updated_at = @now
  WHERE ${LEASE_HELD("release")}
  RETURNING *`;

export const CANCEL = `
  UPDATE tasks SET status = 'cancelled', completed_at = @now, lease_expires_at = NULL,
      reserved_for = NULL, reserved_until = NULL, updated_at = @now
  WHERE id = @id AND status IN (${sqlList(TRANSITIONS.cancel.from)})
  RETURNING *`;

export const RETRY = `
  UPDATE tasks SET status = 'pending', attempts = 0, scheduled_for = @now, worker_id = NULL, lease_token = NULL,
      lease_expires_at = NULL, claimed_at = NULL, started_at = NULL, completed_at = NULL, updated_at = @now
  WHERE id = @id AND status IN (${sqlList(TRANSITIONS.retry.from)})
  RETURNING *`;

export const RESERVE = `
  UPDATE tasks SET reserved_for = @workerId, reserved_until = @reservedUntil, updated_at = @now
  WHERE id = @id AND status = 'pending'
  RETURNING *`;

export const GET = `SELECT * FROM tasks WHERE id = ?`;

export const LIST = `
  SELECT * FROM tasks
  WHERE (@statuses IS NULL OR status IN (SELECT value FROM json_each(@statuses)))
    AND (@taskType IS NULL OR task_type = @taskType)
    AND (@workerId IS NULL OR worker_id = @workerId)
    AND (@beforeId IS NULL OR id < @beforeId)
  ORDER BY id DESC
  LIMIT @limit`;

export const COUNTS = `SELECT task_type, status, count(*) AS n FROM tasks GROUP BY task_type, status`;

export const EVENTS = `SELECT * FROM task_events WHERE task_id = ? ORDER BY id`;
