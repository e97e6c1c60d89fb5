import type pg from "pg";
import { CLAIMED_AFTER_SHUTDOWN, LEASE_EXPIRED, type SweepOptions, type SweepResult, timedOut, WORKER_DIED } from "../../core/worker.js";
import { planReassignments } from "../../core/worker-selection.js";
import { inTransaction } from "./transaction.js";
import * as sql from "./worker-queries.js";

interface RecoveredRow {
  id: number;
  task_type: string;
  status: "pending" | "failed";
  checkpoint: unknown;
  error_message: string;
  old_worker: string | null;
}

/**
 * One coordinator pass in one transaction: stale and dead workers are marked, their tasks (and any
 * task whose lease ran out) are taken back, and each task back in the pool is reserved for the best
 * healthy worker of its role. A crash part-way rolls everything back; the next pass starts over.
 */
export async function sweepPostgres(pool: pg.Pool, now: Date, options: SweepOptions): Promise<SweepResult> {
  const staleBefore = new Date(now.getTime() - options.staleAfterSeconds * 1000);
  const deadBefore = new Date(now.getTime() - options.deadAfterSeconds * 1000);
  return inTransaction(pool, async (client) => {
    await client.query({ name: "tp_lock_silent_workers", text: sql.LOCK_SILENT_WORKERS, values: [staleBefore] });
    const stale = await client.query<{ worker_id: string }>({ name: "tp_mark_stale", text: sql.MARK_STALE, values: [staleBefore, deadBefore] });
    const dead = await client.query<{ worker_id: string }>({ name: "tp_mark_dead", text: sql.MARK_DEAD, values: [deadBefore, now] });
    const deadWorkers = dead.rows.map((r) => r.worker_id);
    const recovered = await client.query<RecoveredRow>({
      name: "tp_recover_tasks",
      text: sql.RECOVER_TASKS,
      values: [deadWorkers, now, JSON.stringify(options.recoveryPolicies ?? {}), WORKER_DIED, LEASE_EXPIRED, timedOut("{seconds}"), CLAIMED_AFTER_SHUTDOWN],
    });
    const requeued = recovered.rows.filter((r) => r.status === "pending");
    const result: SweepResult = {
      staleWorkers: stale.rows.map((r) => r.worker_id),
      deadWorkers,
      requeued: requeued.map((r) => r.id),
      failed: recovered.rows.filter((r) => r.status === "failed").map((r) => r.id),
      reassigned: [],
      unassigned: [],
    };
    if (requeued.length > 0) {
      const candidates = await client.query<{ worker_id: string; roles: string[]; capacity: number; current_load: number }>({
        name: "tp_reassignment_candidates",
        text: sql.REASSIGNMENT_CANDIDATES,
        values: [staleBefore, now],
      });
      const plan = planReassignments(
        requeued.map((r) => ({ id: r.id, taskType: r.task_type, fromWorkerId: r.old_worker, reason: r.error_message })),
        candidates.rows.map((c) => ({ workerId: c.worker_id, roles: c.roles, capacity: c.capacity, load: c.current_load })),
      );
      if (plan.assigned.length > 0) {
        const a = plan.assigned;
        await client.query({
          name: "tp_reserve_many",
          text: sql.RESERVE_MANY,
          values: [a.map((t) => t.id), a.map((t) => t.workerId), a.map((t) => t.fromWorkerId), a.map((t) => t.reason), new Date(now.getTime() + options.reservationSeconds * 1000), now],
        });
      }
      if (plan.unassigned.length > 0) {
        const u = plan.unassigned;
        const checkpoints = new Map(requeued.map((r) => [r.id, r.checkpoint === null ? null : JSON.stringify(r.checkpoint)]));
        await client.query({
          name: "tp_log_unassigned",
          text: sql.LOG_UNASSIGNED,
          values: [u.map((t) => t.id), u.map((t) => t.fromWorkerId), u.map((t) => t.reason), u.map((t) => checkpoints.get(t.id)), u.map((t) => t.errorMessage), now],
        });
      }
      result.reassigned = plan.assigned.map((t) => ({ taskId: t.id, workerId: t.workerId }));
      result.unassigned = plan.unassigned.map((t) => t.id);
    }
    return result;
  });
}
