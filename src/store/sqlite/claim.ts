/**
 * The SQLite claim, whole: its statements and the procedure that runs them.
 *
 * A claim is one BEGIN IMMEDIATE transaction, so it holds the database's only write lock from its first
 * read to its last write: the candidate SELECTs and the UPDATEs that follow cannot race another claimer
 * (no SKIP LOCKED or row locks needed). Inside it:
 * 0. the waiting tasks come due join the claim indexes (WAITING_COME_DUE);
 * 1. room: how many more tasks of each capped type (max_running) may be claimed now;
 * 2. candidates: tasks reserved for this worker first, then the open pool in the requested order,
 *    leaving out full types and concurrency keys already held by a claimed or running task;
 * 3. each candidate is claimed with CLAIM_ONE, skipping a second task of one concurrency key and a type
 *    that filled up during the pass. When that left the batch short, the scans run again: without the
 *    newly full types (at most once per capped type), and past the keys just taken, now held (the scan
 *    stops at its limit, so a key's other tasks at the head of the queue could fill it; each such pass
 *    takes at least one more task).
 * `now` is read once the write lock is held, so time spent waiting for it does not shorten the lease.
 */
import { randomUUID } from "node:crypto";
import type { Clock } from "../../core/clock.js";
import { AlreadyClaimedError, ConcurrencyKeyBusyError, TaskTypeAtCapacityError } from "../../core/errors.js";
import { LEASED_STATUSES } from "../../core/state-machine.js";
import type { ClaimedTask, JsonObject, SortBy, SortOrder } from "../../core/task.js";
import { type ClaimMemory, claimShape, KEY_ROUNDS, type ResolvedClaim, WAITING_DUE_PER_CLAIM } from "../claim-options.js";
import { type LeaseRow, refusalError } from "../refusal.js";
import { isUniqueViolation, type SqliteConnection } from "./connection.js";
import { LEASE_STATE } from "./queries.js";
import { type SqliteTaskRow, toTask } from "./rows.js";
import { IS_LATEST } from "./task-type-queries.js";

// --- Statements -------------------------------------------------------------------------------

const LEASED = LEASED_STATUSES.map((s) => `'${s}'`).join(", ");

const placeholders = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `@${prefix}${i}`).join(", ");

/**
 * The types a claim may take whose latest version sets max_running, with how many more of each may be
 * claimed now (the cap less the claimed and running ones). @type0.. as in the candidates' type filter.
 */
function capRoomStatement(typeCount: number): string {
  return `
  SELECT t.name, t.max_running - (SELECT count(*) FROM tasks a WHERE a.task_type = t.name AND a.status IN (${LEASED})) AS room
  FROM task_types t
  WHERE t.max_running IS NOT NULL AND ${IS_LATEST}
  ${typeCount > 0 ? `AND t.name IN (${placeholders("type", typeCount)})` : ""}`;
}

/**
 * @type0..: the claim's task types. @full0..: capped types with no room left (see capRoomStatement),
 * left out of the scan; the filter is only there when there are some, so uncapped claims scan as before.
 */
const candidateFilters = (typeCount: number, fullCount: number) => `
    ${typeCount > 0 ? `AND t.task_type IN (${placeholders("type", typeCount)})` : ""}
    ${fullCount > 0 ? `AND t.task_type NOT IN (${placeholders("full", fullCount)})` : ""}
    AND (@maxAttemptsRemaining IS NULL OR t.max_attempts - t.attempts > @maxAttemptsRemaining)
    AND (t.concurrency_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM tasks a WHERE a.concurrency_key = t.concurrency_key AND a.status IN (${LEASED})))`;

/** Candidates reserved for this worker (reassigned to it), taken before the open pool. */
function reservedCandidatesStatement(typeCount: number, fullCount: number): string {
  return `
  SELECT t.id, t.task_type, t.concurrency_key FROM tasks t
  WHERE t.status = 'pending' AND t.reserved_for = @workerId AND t.reserved_until > @now AND t.scheduled_for <= @now
  ${candidateFilters(typeCount, fullCount)}
  ORDER BY t.priority DESC, t.id
  LIMIT @limit`;
}

const ORDER_BY: Record<SortBy, Record<SortOrder, string>> = {
  priority: { desc: "priority DESC, created_at, id", asc: "priority, created_at, id" },
  created_at: { asc: "created_at, id", desc: "created_at DESC, id DESC" },
  random: { asc: "random()", desc: "random()" },
};

/**
 * The claim index for a sort, where one fits. SQLite's planner, without statistics, preferred another
 * index (tasks_by_status, since dropped) and then sorted every pending row (about 1 ms per 10k
 * pending, all of it under the write lock); naming the partial index makes the scan stop after
 * `limit` rows.
 */
function claimIndex(sortBy: SortBy, sortOrder: SortOrder, typeCount: number): string {
  if (sortBy === "priority" && sortOrder === "desc") return typeCount > 0 ? "INDEXED BY tasks_claim_by_type_priority" : "INDEXED BY tasks_claim_by_priority";
  if (sortBy === "created_at" && typeCount > 0) return "INDEXED BY tasks_claim_by_type_created";
  return "";
}

/** Candidates from the open pool in the requested order (from a fixed allowlist, never input); `named`: through claimIndex's index. */
function openCandidatesStatement(sortBy: SortBy, sortOrder: SortOrder, typeCount: number, fullCount: number, named: boolean): string {
  return `
  SELECT t.id, t.task_type, t.concurrency_key FROM tasks t ${named ? claimIndex(sortBy, sortOrder, typeCount) : ""}
  WHERE t.status = 'pending' AND t.waiting = 0 AND t.scheduled_for <= @now AND (t.reserved_until IS NULL OR t.reserved_until <= @now)
  ${candidateFilters(typeCount, fullCount)}
  ORDER BY ${ORDER_BY[sortBy][sortOrder]}
  LIMIT @limit`;
}

/**
 * Moves the waiting tasks come due into the claim indexes (migration 025), oldest due first. It runs
 * first in every claim's transaction, under the write lock, so the scans that follow see them in
 * their place in the claim order. With none come due it is one index probe.
 */
const WAITING_COME_DUE = `
  UPDATE tasks SET waiting = 0 WHERE id IN (
    SELECT id FROM tasks WHERE status = 'pending' AND waiting = 1 AND scheduled_for <= @now ORDER BY scheduled_for LIMIT ${WAITING_DUE_PER_CLAIM})`;

/** Claims one task; `status = 'pending'` keeps it safe even outside the candidate query. */
const CLAIM_ONE = `
  UPDATE tasks
  SET status = CASE WHEN @start THEN 'running' ELSE 'claimed' END, worker_id = @workerId, lease_token = @leaseToken,
      lease_seconds = @leaseSeconds, lease_expires_at = @leaseExpiresAt, claimed_at = @now, last_heartbeat_at = @now,
      started_at = CASE WHEN @start THEN @now END,
      attempts = attempts + 1, reserved_for = NULL, reserved_until = NULL, updated_at = @now
  WHERE id = @id AND status = 'pending'
  RETURNING *`;

// --- Procedure --------------------------------------------------------------------------------

interface Candidate {
  id: number;
  task_type: string;
  concurrency_key: string | null;
}

/**
 * Connections whose database no longer has the claim indexes as this build names them: a later
 * build's migration changed them while this process runs. SQLite refuses a statement that names such
 * an index ("no such index", or "no query solution" where its predicate changed), so from then on
 * this connection's scans do not name it and the planner chooses: perhaps slower, but still claiming,
 * so a rolling upgrade need not stop this build's processes first.
 */
const claimIndexesChanged = new WeakSet<SqliteConnection>();

const indexRefused = (error: unknown) => error instanceof Error && /^no such index: |^no query solution$/.test(error.message);

function openCandidates(conn: SqliteConnection, c: ResolvedClaim, typeCount: number, fullCount: number, params: Record<string, unknown>): Candidate[] {
  if (!claimIndexesChanged.has(conn)) {
    try {
      return conn.stmt(openCandidatesStatement(c.sortBy, c.sortOrder, typeCount, fullCount, true)).all(params) as Candidate[];
    } catch (error) {
      if (!indexRefused(error)) throw error;
      claimIndexesChanged.add(conn);
    }
  }
  return conn.stmt(openCandidatesStatement(c.sortBy, c.sortOrder, typeCount, fullCount, false)).all(params) as Candidate[];
}

/**
 * Claims up to `c.limit` ready tasks for `c.workerId` (see the top of this file). `fruitless`: the
 * shapes whose passes past concurrency keys found nothing a moment ago, which make none
 * (FRUITLESS_ROUND_MS). Passes past keys, each walking the scan again under the write lock, are at
 * most KEY_ROUNDS − 1 after the first.
 */
export function claimTasks(conn: SqliteConnection, clock: Clock, c: ResolvedClaim, fruitless: ClaimMemory): Promise<ClaimedTask[]> {
  const types = c.taskTypes ?? [];
  // Worked out once a pass skips a key, not for every claim.
  let shape: string | null = null;
  const capRoom = conn.stmt(capRoomStatement(types.length));
  return conn.tx(false, () => {
    const now = clock.now();
    const params: Record<string, unknown> = {
      workerId: c.workerId,
      now: now.toISOString(),
      limit: c.limit,
      maxAttemptsRemaining: c.maxAttemptsRemaining,
    };
    types.forEach((t, i) => (params[`type${i}`] = t));
    conn.stmt(WAITING_COME_DUE).run({ now: params.now });
    const room = new Map((capRoom.all(params) as { name: string; room: number }[]).map((r) => [r.name, r.room]));
    const keys = new Set<string>();
    const claimed: ClaimedTask[] = [];
    let keyRounds = 1; // this pass, and each one more past keys: KEY_ROUNDS in all
    let pastKeys = false;
    for (;;) {
      const before = claimed.length;
      const full = [...room].filter(([, left]) => left <= 0).map(([type]) => type);
      full.forEach((t, i) => (params[`full${i}`] = t));
      const reserved = conn.stmt(reservedCandidatesStatement(types.length, full.length)).all(params) as Candidate[];
      const rows = [...reserved, ...openCandidates(conn, c, types.length, full.length, params)];
      let filledUp = false;
      let keySkipped = false;
      for (const row of rows) {
        if (claimed.length === c.limit) break;
        const left = room.get(row.task_type);
        if (left !== undefined && left <= 0) {
          filledUp = true;
          continue;
        }
        if (row.concurrency_key !== null) {
          if (keys.has(row.concurrency_key)) {
            keySkipped = true;
            continue;
          }
          keys.add(row.concurrency_key);
        }
        claimed.push(claimRow(conn, row.id, c.workerId, c.leaseSeconds, now, c.start) as ClaimedTask);
        if (left !== undefined) room.set(row.task_type, left - 1);
      }
      if (pastKeys && claimed.length === before) fruitless.remember(shape as string);
      pastKeys = keySkipped && keyRounds++ < KEY_ROUNDS && !fruitless.holds((shape ??= claimShape(c)));
      if (!(filledUp || pastKeys) || claimed.length === c.limit) return claimed;
    }
  });
}

/**
 * Claims one named pending task, whatever its schedule or reservation, unless it is leased, its type is
 * at its cap or its concurrency key is held (each refused with its own typed error).
 */
export function claimTaskById(conn: SqliteConnection, clock: Clock, id: number, workerId: string, leaseSeconds: number): Promise<ClaimedTask> {
  return conn.tx(false, () => {
    const state = conn.stmt(LEASE_STATE).get(id) as (LeaseRow & { concurrency_key: string | null; task_type: string }) | undefined;
    if (state && (state.status === "claimed" || state.status === "running")) throw new AlreadyClaimedError(id, state.worker_id, workerId);
    if (!state || state.status !== "pending") throw refusalError(id, state, "claim");
    const [cap] = conn.stmt(capRoomStatement(1)).all({ type0: state.task_type }) as { room: number }[];
    if (cap && cap.room <= 0) throw new TaskTypeAtCapacityError(id, state.task_type);
    try {
      return claimRow(conn, id, workerId, leaseSeconds, clock.now()) as ClaimedTask;
    } catch (error) {
      // The unique index on held concurrency keys refuses a second holder; say which key, in a typed error.
      if (isUniqueViolation(error, "concurrency_key")) throw new ConcurrencyKeyBusyError(id, state.concurrency_key as string);
      throw error;
    }
  });
}

/** Claims one pending row inside the caller's transaction, with its events; undefined if it is not pending. */
function claimRow(conn: SqliteConnection, id: number, workerId: string, leaseSeconds: number, now: Date, start = false): ClaimedTask | undefined {
  const row = conn.stmt(CLAIM_ONE).get({
    id,
    workerId,
    leaseToken: randomUUID(),
    leaseSeconds,
    leaseExpiresAt: new Date(now.getTime() + leaseSeconds * 1000).toISOString(),
    now: now.toISOString(),
    start: start ? 1 : 0,
  }) as SqliteTaskRow | undefined;
  if (!row) return undefined;
  // Claimed and started in one step is one transition, so one event (see claimStatement on PostgreSQL).
  const data: JsonObject = start ? { attempt: row.attempts, started: true } : { attempt: row.attempts };
  conn.logEvent({ taskId: id, event: "claimed", toWorkerId: workerId, data }, now.toISOString());
  return toTask(row) as ClaimedTask;
}
