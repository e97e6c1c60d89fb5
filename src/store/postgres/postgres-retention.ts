import type pg from "pg";
import type { PruneOptions, PruneResult } from "../../core/retention.js";
import * as sql from "./retention-queries.js";

type Finished = "completed" | "cancelled" | "failed";

/** One retention pass (Store.prune): a statement per finished status, then the gone workers and their events. */
export async function prunePostgres(pool: pg.Pool, now: Date, options: PruneOptions): Promise<PruneResult> {
  const before = (seconds: number) => new Date(now.getTime() - seconds * 1000);
  const ages: [Finished, number | null][] = [
    ["completed", options.completedAfterSeconds],
    ["cancelled", options.cancelledAfterSeconds],
    ["failed", options.failedAfterSeconds],
  ];
  const result: PruneResult = { tasks: 0, events: 0, reassignments: 0, workers: 0 };
  for (const [status, age] of ages) {
    if (age === null) continue;
    const { rows } = await pool.query<{ tasks: number; events: number; reassignments: number }>({
      name: `tp_prune_${status}`,
      text: sql.pruneTasks(status),
      values: [before(age), options.batchSize],
    });
    result.tasks += rows[0].tasks;
    result.events += rows[0].events;
    result.reassignments += rows[0].reassignments;
  }
  const historyBefore = before(options.completedAfterSeconds);
  const workers = await pool.query<{ workers: number }>({ name: "tp_prune_workers", text: sql.PRUNE_WORKERS, values: [historyBefore, options.batchSize] });
  const events = await pool.query<{ events: number }>({ name: "tp_prune_worker_events", text: sql.PRUNE_WORKER_EVENTS, values: [historyBefore, options.batchSize] });
  result.workers = workers.rows[0].workers;
  result.events += events.rows[0].events;
  return result;
}
