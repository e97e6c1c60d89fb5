/**
 * Paging of the worker registry, the same for both stores; each keeps only its SQL.
 *
 * A run with a generated id leaves one gone (dead or inactive) worker behind for good, so a long-lived
 * registry is mostly gone workers: 20,000 of them made a 6.9 MB answer. A page therefore lists the
 * live workers (active, stale) in full, by id, up to MAX_LIVE_LISTED, then the `limit` gone ones most
 * recently heard from (last_seen_at newest first, then id). Its cursor names the last worker it listed
 * and which of the two parts it was in: the next page goes on from there, in the same order.
 */
import { createHash } from "node:crypto";
import { ValidationError } from "../core/errors.js";
import {
  DEFAULT_GONE_LISTED,
  GONE_WORKER_STATUSES,
  LIVE_WORKER_STATUSES,
  MAX_LIVE_LISTED,
  WORKER_STATUSES,
  type WorkerList,
  type WorkerQuery,
  type WorkerRecord,
  type WorkerStatus,
} from "../core/worker.js";

/** A checked registry query with its defaults, as the statements take it. */
export interface ResolvedWorkerList {
  /** The statuses asked for, which the cursors of the listing carry. */
  statuses: readonly WorkerStatus[];
  /** What each part reads of them: only its own (an empty part reads nothing). */
  liveStatuses: WorkerStatus[];
  goneStatuses: WorkerStatus[];
  workerId: string | null;
  /** Live workers past this id (a page that stopped at MAX_LIVE_LISTED). */
  liveAfter: string | null;
  /** Gone workers past this one: heard from before `at`, or at `at` with a greater id. */
  goneAfter: { at: Date; workerId: string } | null;
  /** Gone workers a page lists. */
  limit: number;
  /** What each part reads: one row past its page, which says whether another page follows. */
  liveReadLimit: number;
  goneReadLimit: number;
}

/** Throws a ValidationError naming `cursor` if it is not one of this query's cursors. */
export function resolveWorkerList(query: WorkerQuery = {}): ResolvedWorkerList {
  const asked = query.status === undefined ? WORKER_STATUSES : [query.status].flat();
  const q: ResolvedWorkerList = {
    statuses: asked,
    liveStatuses: LIVE_WORKER_STATUSES.filter((s) => asked.includes(s)),
    goneStatuses: GONE_WORKER_STATUSES.filter((s) => asked.includes(s)),
    workerId: query.workerId ?? null,
    liveAfter: null,
    goneAfter: null,
    limit: query.limit ?? DEFAULT_GONE_LISTED,
    liveReadLimit: MAX_LIVE_LISTED + 1,
    goneReadLimit: (query.limit ?? DEFAULT_GONE_LISTED) + 1,
  };
  if (query.cursor === undefined) return q;
  const after = decodeWorkerCursor(query.cursor, q);
  if (after.gone) {
    // The live part was listed in full on an earlier page.
    q.liveStatuses = [];
    q.goneAfter = { at: after.at, workerId: after.workerId };
  } else {
    q.liveAfter = after.workerId;
  }
  return q;
}

/** The page of what the statements read (`live` by id, `gone` newest first), with `counts` of the whole registry. */
export function workerPageOf(live: WorkerRecord[], gone: WorkerRecord[], q: ResolvedWorkerList, counts: WorkerList["counts"]): WorkerList {
  if (live.length > MAX_LIVE_LISTED) {
    const workers = live.slice(0, MAX_LIVE_LISTED);
    return { workers, counts, nextCursor: encodeWorkerCursor(workers[workers.length - 1], false, q) };
  }
  if (gone.length <= q.limit) return { workers: [...live, ...gone], counts, nextCursor: null };
  const listed = gone.slice(0, q.limit);
  return { workers: [...live, ...listed], counts, nextCursor: encodeWorkerCursor(listed[listed.length - 1], true, q) };
}

/** Every status with its count, zeros included, from the rows of a `GROUP BY status`. */
export function workerCounts(rows: { status: WorkerStatus; n: number | string }[]): WorkerList["counts"] {
  const counts = Object.fromEntries(WORKER_STATUSES.map((s) => [s, 0])) as WorkerList["counts"];
  for (const row of rows) counts[row.status] = Number(row.n);
  return counts;
}

/** The filters a cursor belongs to, as a digest: the same statuses in any order are the same listing; the limit is not part of it. */
function filterDigest(q: ResolvedWorkerList): string {
  const filters = [[...new Set(q.statuses)].sort(), q.workerId];
  return createHash("sha256").update(JSON.stringify(filters)).digest("base64url").slice(0, 12);
}

/** Opaque to callers, as task cursors are (paging.ts): the part, the last worker's beat (gone part) and id, the filters. */
function encodeWorkerCursor(last: WorkerRecord, gone: boolean, q: ResolvedWorkerList): string {
  return Buffer.from(`workers:${gone ? "gone" : "live"}:${gone ? last.lastSeenAt.getTime() : 0}:${filterDigest(q)}:${last.workerId}`).toString("base64url");
}

const invalidCursor = (why: string, message: string) => new ValidationError(`Invalid cursor: ${why}`, [{ path: "cursor", message }]);

function decodeWorkerCursor(cursor: string, q: ResolvedWorkerList): { gone: boolean; at: Date; workerId: string } {
  // Worker ids hold no colon (WORKER_ID_PATTERN), so the id, last, is read whole.
  const match = /^workers:(live|gone):(\d{1,15}):([A-Za-z0-9_-]{12}):([A-Za-z0-9_.-]{1,128})$/.exec(Buffer.from(cursor, "base64url").toString());
  if (!match) throw invalidCursor("pass back the next cursor a previous page of workers gave, unchanged", "not a cursor of the worker registry");
  const [, part, at, filters, workerId] = match;
  if (filters !== filterDigest(q)) {
    throw invalidCursor("it was made for a listing with other filters: pass the filters of the page that gave it, or start again without a cursor", "a cursor of other filters");
  }
  return { gone: part === "gone", at: new Date(Number(at)), workerId };
}
