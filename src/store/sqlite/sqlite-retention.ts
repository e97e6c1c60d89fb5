import { type PruneOptions, type PruneResult, pruneCutoffs } from "../../core/retention.js";
import type { SqliteConnection } from "./connection.js";
import * as sql from "./retention-queries.js";

/**
 * One retention pass (Store.prune): a write transaction per finished status, then one for the gone
 * workers, their events, old schedule ticks and idempotency keys. Each holds the file's write lock
 * for one batch only, so the workers' claims and completions get their turn between batches.
 */
export async function pruneSqlite(conn: SqliteConnection, now: Date, options: PruneOptions): Promise<PruneResult> {
  const cutoffs = pruneCutoffs(now, options);
  const result: PruneResult = { tasks: 0, events: 0, reassignments: 0, workers: 0, scheduleTicks: 0, idempotencyKeys: 0 };
  for (const { status, before } of cutoffs.tasks) {
    await conn.tx(false, () => {
      const rows = conn.stmt(sql.prunableTasks(status)).all({ before: before.toISOString(), limit: options.batchSize }) as { id: number }[];
      if (rows.length === 0) return;
      const ids = JSON.stringify(rows.map((r) => r.id));
      result.events += conn.stmt(sql.DELETE_TASK_EVENTS).run({ ids }).changes;
      result.reassignments += conn.stmt(sql.DELETE_REASSIGNMENTS).run({ ids }).changes;
      result.tasks += conn.stmt(sql.DELETE_TASKS).run({ ids }).changes;
    });
  }
  const historyBefore = cutoffs.history.toISOString();
  await conn.tx(false, () => {
    result.workers = conn.stmt(sql.PRUNE_WORKERS).run({ before: historyBefore, limit: options.batchSize }).changes;
    result.events += conn.stmt(sql.PRUNE_WORKER_EVENTS).run({ before: historyBefore, limit: options.batchSize }).changes;
    result.scheduleTicks = conn.stmt(sql.PRUNE_SCHEDULE_TICKS).run({ before: historyBefore, limit: options.batchSize }).changes;
    result.idempotencyKeys = conn.stmt(sql.PRUNE_IDEMPOTENCY_KEYS).run({ before: cutoffs.idempotencyKeys.toISOString(), limit: options.batchSize }).changes;
  });
  return result;
}
