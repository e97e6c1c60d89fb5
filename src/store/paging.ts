import { ValidationError } from "../core/errors.js";
import type { Page, TaskFilter, TaskStatus } from "../core/task.js";

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

export function resolveList(filter: TaskFilter = {}, page: Page = {}): ResolvedList {
  return {
    statuses: filter.status === undefined ? null : [filter.status].flat(),
    taskType: filter.taskType ?? null,
    workerId: filter.workerId ?? null,
    search: filter.search === undefined ? null : JSON.stringify(filter.search).slice(1, -1),
    order: page.order ?? "newest",
    afterCursor: page.cursor === undefined ? null : decodeCursor(page.cursor),
    limit: page.limit ?? 100,
    readLimit: (page.limit ?? 100) + 1,
  };
}

/** A page of what a statement read with `readLimit`: a cursor only when a row lay past the page (a full last page has none). */
export function pageOf<T extends { id: number }>(rows: T[], q: ResolvedList): { tasks: T[]; nextCursor: string | null } {
  if (rows.length <= q.limit) return { tasks: rows, nextCursor: null };
  const tasks = rows.slice(0, q.limit);
  return { tasks, nextCursor: encodeCursor(tasks[tasks.length - 1].id) };
}

/** Cursors are opaque to callers so the paging key can change without breaking them. */
export function encodeCursor(lastId: number): string {
  return Buffer.from(`id:${lastId}`).toString("base64url");
}

export function decodeCursor(cursor: string): number {
  const match = /^id:(\d{1,15})$/.exec(Buffer.from(cursor, "base64url").toString());
  if (!match) throw new ValidationError("Invalid cursor: pass back the next cursor a previous page gave, unchanged", [{ path: "cursor", message: "not a cursor" }]);
  return Number(match[1]);
}
