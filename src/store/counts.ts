import type { RecountResult } from "../core/recount.js";
import { TASK_STATUSES, type TaskCounts, type TaskStatus } from "../core/task.js";

/** Rows of (task_type, status, n) into the counts shape, with every status present. */
export function tallyCounts(rows: { task_type: string; status: TaskStatus; n: number }[]): TaskCounts {
  const byStatus = Object.fromEntries(TASK_STATUSES.map((s) => [s, 0])) as TaskCounts["byStatus"];
  const byType: TaskCounts["byType"] = {};
  for (const r of rows) {
    byStatus[r.status] += r.n;
    (byType[r.task_type] ??= {})[r.status] = r.n;
  }
  return { byStatus, byType };
}

/**
 * A recount's rows of (task_type, before, after) into its answer: the types that changed, by name (in
 * code, so that both stores sort alike whatever the database's collation). A type whose count was and
 * stays 0 (a total left at 0 after its tasks were deleted) was not looked at, as far as the answer goes.
 */
export function recountResult(rows: { task_type: string; before: number; after: number }[], dryRun: boolean): RecountResult {
  const changed = rows
    .filter((r) => r.before !== r.after)
    .map((r) => ({ taskType: r.task_type, before: r.before, after: r.after }))
    .sort((x, y) => (x.taskType < y.taskType ? -1 : x.taskType > y.taskType ? 1 : 0));
  return { changed, taskTypes: rows.filter((r) => r.before !== 0 || r.after !== 0).length, dryRun };
}
