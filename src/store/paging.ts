import { ValidationError } from "../core/errors.js";
import type { Page, TaskFilter, TaskStatus } from "../core/task.js";

/** A checked list request with its defaults: ids past the cursor's, in the page's order. */
export interface ResolvedList {
  statuses: TaskStatus[] | null;
  taskType: string | null;
  workerId: string | null;
  /** Text the params (as JSON text) contain, compared in lower case. */
  search: string | null;
  /** Newest first (ids below the cursor) or oldest first (ids above it). */
  order: "newest" | "oldest";
  afterCursor: number | null;
  limit: number;
}

export function resolveList(filter: TaskFilter = {}, page: Page = {}): ResolvedList {
  return {
    statuses: filter.status === undefined ? null : [filter.status].flat(),
    taskType: filter.taskType ?? null,
    workerId: filter.workerId ?? null,
    search: filter.search?.toLowerCase() ?? null,
    order: page.order ?? "newest",
    afterCursor: page.cursor === undefined ? null : decodeCursor(page.cursor),
    limit: page.limit ?? 100,
  };
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
