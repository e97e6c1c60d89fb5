import { createHash } from "node:crypto";
import { ValidationError } from "../core/errors.js";
import type { Page, Task, TaskFilter, TaskStatus } from "../core/task.js";

/** A checked list request with its defaults: ids past the cursor's, in the page's order. */
export interface ResolvedList {
  statuses: TaskStatus[] | null;
  taskType: string | null;
  workerId: string | null;
  /**
   * Text the params contain, as it is written in their JSON (a quote as \", a backslash as \\), so
   * that it is found in their stored text; the statement compares both in lower case, one way.
   */
  search: string | null;
  /** Newest first (ids below the cursor) or oldest first (ids above it). */
  order: "newest" | "oldest";
  afterCursor: number | null;
  limit: number;
  /** What the statement reads: one row past the page, which says whether another page follows. */
  readLimit: number;
}

/**
 * The listing a cursor belongs to. Checked against its cursor (and refused if it is another listing's),
 * and throws a ValidationError naming `cursor` if it is not one.
 */
export function resolveList(filter: TaskFilter = {}, page: Page = {}): ResolvedList {
  const q: ResolvedList = {
    statuses: filter.status === undefined ? null : [filter.status].flat(),
    taskType: filter.taskType ?? null,
    workerId: filter.workerId ?? null,
    search: filter.search === undefined ? null : JSON.stringify(filter.search).slice(1, -1),
    order: page.order ?? "newest",
    afterCursor: null,
    limit: page.limit ?? 100,
    readLimit: (page.limit ?? 100) + 1,
  };
  if (page.cursor !== undefined) q.afterCursor = decodeCursor(page.cursor, q);
  return q;
}

/**
 * How much of the tasks' own data (params, checkpoint, result, error) a page holds at most: past it the
 * page ends early, with a cursor to the rest. 1,000 tasks of 1 MB params made an answer longer than
 * a JavaScript string can be (a 500, `Invalid string length`), after holding the event loop for seconds.
 */
export const PAGE_BYTES = 8 * 1024 * 1024;

/** The task's own data, in characters of JSON: what makes a page large. */
const bytesOf = (task: Task) =>
  JSON.stringify(task.params).length + (task.checkpoint === null ? 0 : JSON.stringify(task.checkpoint).length) + (task.result === null ? 0 : JSON.stringify(task.result).length) + (task.errorMessage?.length ?? 0);

/**
 * A page of what a statement read with `readLimit`: a cursor only when a row lay past the page (a full
 * last page has none), or when the page ended early at PAGE_BYTES (it holds one task at least).
 */
export function pageOf(rows: Task[], q: ResolvedList): { tasks: Task[]; nextCursor: string | null } {
  let end = 0;
  for (let bytes = 0; end < Math.min(rows.length, q.limit); end++) {
    bytes += bytesOf(rows[end]);
    if (bytes > PAGE_BYTES && end > 0) break;
  }
  if (end === rows.length) return { tasks: rows, nextCursor: null };
  const tasks = rows.slice(0, end);
  return { tasks, nextCursor: encodeCursor(tasks[tasks.length - 1].id, q) };
}

/**
 * The filters of a listing, as a short digest a cursor carries: the same set of statuses in any
 * order or repeated is the same listing; the page size is not part of it.
 */
function filterDigest(q: ResolvedList): string {
  const filters = [q.statuses && [...new Set(q.statuses)].sort(), q.taskType, q.workerId, q.search];
  return createHash("sha256").update(JSON.stringify(filters)).digest("base64url").slice(0, 12);
}

/**
 * Cursors are opaque to callers so the paging key can change without breaking them. One carries
 * the listing it pages (its order and filters): followed with another order it would page from the
 * wrong end, with other filters another listing, and either is refused rather than read.
 */
export function encodeCursor(lastId: number, q: ResolvedList): string {
  return Buffer.from(`id:${lastId};order:${q.order};filters:${filterDigest(q)}`).toString("base64url");
}

const invalidCursor = (why: string, message: string) => new ValidationError(`Invalid cursor: ${why}`, [{ path: "cursor", message }]);

/** The id a cursor of listing `q` pages past; refused when it is no cursor, or another listing's (one an earlier version made, `id:N` alone, pages any). */
export function decodeCursor(cursor: string, q: ResolvedList): number {
  const match = /^id:(\d{1,15})(?:;order:(newest|oldest);filters:([A-Za-z0-9_-]{12}))?$/.exec(Buffer.from(cursor, "base64url").toString());
  if (!match) throw invalidCursor("pass back the next cursor a previous page gave, unchanged", "not a cursor");
  const [, id, order, filters] = match;
  if (order !== undefined && order !== q.order) {
    throw invalidCursor(
      `it pages ${order} first, and this call asks for ${q.order} first: pass the order of the page that gave it (${order}), or start again without a cursor`,
      `a cursor of the ${order}-first order`,
    );
  }
  if (filters !== undefined && filters !== filterDigest(q)) {
    throw invalidCursor("it was made for a listing with other filters: pass the filters of the page that gave it, or start again without a cursor", "a cursor of other filters");
  }
  return Number(id);
}
