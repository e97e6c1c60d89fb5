import type pg from "pg";
import { type PruneOptions, type PruneResult, pruneCutoffs } from "../../core/retention.js";
import * as sql from "./retention-queries.js";

/** One retention pass (Store.prune): a statement per finished status, then the gone workers, their events, old schedule ticks and idempotency keys. */
export async function prunePostgres(pool: pg.Pool, now: Date, options: PruneOptions): Promise<PruneResult> {
  const cutoffs = pruneCutoffs(now, options);
  const result: PruneResult = { tasks: 0, events: 0, reassignments: 0, workers: 0, scheduleTicks: 0, idempotencyKeys: 0 };
  for (const { status, before } of cutoffs.tasks) {
    const { rows } = await pool.query<{ tasks: number; events: number; reassignments: number }>({
      name: `tp_prune_${status}`,
      text: sql.pruneTasks(status),
      values: [before, options.batchSize],
    });
    result.tasks += rows[0].tasks;
    result.events += rows[0].events;
    result.reassignments += rows[0].reassignments;
  }
  const workers = await pool.query<{ workers: number }>({ name: "tp_prune_workers", text: sql.PRUNE_WORKERS, values: [cutoffs.history, options.batchSize] });
  const events = await pool.query<{ events: number }>({ name: "tp_prune_worker_events", text: sql.PRUNE_WORKER_EVENTS, values: [cutoffs.history, options.batchSize] });
  const ticks = await pool.query<{ ticks: number }>({ name: "tp_prune_schedule_ticks", text: sql.PRUNE_SCHEDULE_TICKS, values: [cutoffs.history, options.batchSize] });
  result.workers = workers.rows[0].workers;
  result.events += events.rows[0].events;
  result.scheduleTicks = ticks.rows[0].ticks;
  const keys = await pool.query<{ keys: number }>({ name: "tp_prune_idempotency_keys", text: sql.PRUNE_IDEMPOTENCY_KEYS, values: [cutoffs.idempotencyKeys, options.batchSize] });
  result.idempotencyKeys = keys.rows[0].keys;
  return result;
}
