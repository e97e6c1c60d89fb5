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
