import { ValidationError } from "../core/errors.js";
import type { Page, TaskFilter } from "../core/task.js";
import { TASK_STATUSES, type TaskStatus } from "../core/task.js";

/** A list request after validation: newest first, ids below `beforeId`. */
export interface ResolvedList {
  statuses: TaskStatus[] | null;
  taskType: string | null;
  workerId: string | null;
  beforeId: number | null;
  limit: number;
}

export function resolveList(filter: TaskFilter = {}, page: Page = {}): ResolvedList {
  const statuses = filter.status === undefined ? null : [filter.status].flat();
  for (const s of statuses ?? []) {
    if (!TASK_STATUSES.includes(s)) {
      throw new ValidationError(`Invalid status "${s}": use one of ${TASK_STATUSES.join(", ")}`, [{ path: "status", message: "unknown status" }]);
    }
  }
  const limit = page.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    throw new ValidationError(`Invalid limit ${limit}: use an integer from 1 to 1000`, [{ path: "limit", message: "out of range" }]);
  }
  return {
    statuses,
    taskType: filter.taskType ?? null,
    workerId: filter.workerId ?? null,
    beforeId: page.cursor === undefined ? null : decodeCursor(page.cursor),
    limit,
  };
}

/** Cursors are opaque to callers so the paging key can change without breaking them. */
export function encodeCursor(lastId: number): string {
  return Buffer.from(`id:${lastId}`).toString("base64url");
}

function decodeCursor(cursor: string): number {
  const match = /^id:(\d+)$/.exec(Buffer.from(cursor, "base64url").toString());
  if (!match) throw new ValidationError("Invalid cursor: pass back the nextCursor of a previous page unchanged", [{ path: "cursor", message: "not a cursor" }]);
  return Number(match[1]);
}
