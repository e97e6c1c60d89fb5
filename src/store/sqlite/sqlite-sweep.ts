import { CLAIMED_AFTER_SHUTDOWN, LEASE_EXPIRED, type RecoveryPolicy, type SweepOptions, type SweepResult, timedOut, WORKER_DIED } from "../../core/worker.js";
import { planReassignments } from "../../core/worker-selection.js";
import type { SqliteConnection } from "./connection.js";
import * as sql from "./worker-queries.js";

interface RecoverRow {
  id: number;
  task_type: string;
  attempts: number;
  max_attempts: number;
  worker_id: string | null;
  checkpoint: string | null;
  registered_policy: RecoveryPolicy | null;
  timeout_seconds: number | null;
  timed_out: 0 | 1;
  abandoned: 0 | 1;
}

/** One coordinator pass in one write transaction; see postgres-sweep.ts for the steps. */
export function sweepSqlite(conn: SqliteConnection, nowDate: Date, options: SweepOptions): Promise<SweepResult> {
  const now = nowDate.toISOString();
  const staleBefore = new Date(nowDate.getTime() - options.staleAfterSeconds * 1000).toISOString();
  const deadBefore = new Date(nowDate.getTime() - options.deadAfterSeconds * 1000).toISOString();
  const reservedUntil = new Date(nowDate.getTime() + options.reservationSeconds * 1000).toISOString();
  const policies = options.recoveryPolicies ?? {};

  return conn.tx(true, () => {
    const staleWorkers = (conn.stmt(sql.MARK_STALE).all({ staleBefore, deadBefore }) as { worker_id: string }[]).map((r) => r.worker_id);
    const dead = conn.stmt(sql.MARK_DEAD).all({ deadBefore, now }) as { worker_id: string; last_seen_at: string }[];
    for (const w of dead) {
      conn.logEvent({ taskId: null, event: "worker_dead", fromWorkerId: w.worker_id, message: `No heartbeat since ${w.last_seen_at.slice(0, 19)}Z` }, now);
    }
    const deadWorkers = dead.map((w) => w.worker_id).sort();
    conn.stmt(sql.UNRESERVE_FOR).run({ workers: JSON.stringify(deadWorkers) });
    const rows = conn.stmt(sql.TASKS_TO_RECOVER).all({ deadWorkers: JSON.stringify(deadWorkers), now }) as RecoverRow[];

    const result: SweepResult = { staleWorkers, deadWorkers, requeued: [], failed: [], reassigned: [], unassigned: [] };
    const requeued = [];
    for (const row of rows) {
      const abandoned = row.abandoned === 1;
      const reason = row.worker_id !== null && deadWorkers.includes(row.worker_id) ? WORKER_DIED : abandoned ? CLAIMED_AFTER_SHUTDOWN : row.timed_out ? timedOut(row.timeout_seconds as number) : LEASE_EXPIRED;
      // The sweep's policy for the type wins, then the registered version's (as RECOVER_TASKS on PostgreSQL).
      const policy = Object.hasOwn(policies, row.task_type) ? policies[row.task_type] : (row.registered_policy ?? "retry");
      const giveUp = !abandoned && (policy === "fail" || row.attempts >= row.max_attempts);
      if (giveUp) conn.stmt(sql.RECOVER_TO_FAILED).run({ id: row.id, reason, now });
      else conn.stmt(sql.RECOVER_TO_PENDING).run({ id: row.id, reason, refund: abandoned ? 1 : 0, now });
      const checkpoint = row.checkpoint === null ? null : JSON.parse(row.checkpoint);
      conn.logEvent({ taskId: row.id, event: giveUp ? "failed" : abandoned ? "released" : "requeued", fromWorkerId: row.worker_id, message: reason, data: checkpoint }, now);
      if (giveUp) result.failed.push(row.id);
      else requeued.push({ id: row.id, taskType: row.task_type, fromWorkerId: row.worker_id, reason, checkpoint: row.checkpoint });
    }
    result.requeued = requeued.map((t) => t.id);
    if (requeued.length === 0) return result;

    const candidates = conn.stmt(sql.REASSIGNMENT_CANDIDATES).all({ staleBefore, now }) as { worker_id: string; roles: string; capacity: number; current_load: number }[];
    const plan = planReassignments(
      requeued,
      candidates.map((c) => ({ workerId: c.worker_id, roles: JSON.parse(c.roles), capacity: c.capacity, load: c.current_load })),
    );
    const checkpoints = new Map(requeued.map((t) => [t.id, t.checkpoint]));
    for (const t of plan.assigned) {
      conn.stmt(sql.RESERVE_FOR).run({ id: t.id, workerId: t.workerId, reservedUntil, now });
      conn.logEvent({ taskId: t.id, event: "reassigned", fromWorkerId: t.fromWorkerId, toWorkerId: t.workerId, message: t.reason, data: { reserved_until: reservedUntil } }, now);
    }
    for (const [t, toWorkerId, errorMessage] of [
      ...plan.assigned.map((t) => [t, t.workerId, null] as const),
      ...plan.unassigned.map((t) => [t, null, t.errorMessage] as const),
    ]) {
      conn.stmt(sql.INSERT_REASSIGNMENT).run({
        taskId: t.id,
        fromWorkerId: t.fromWorkerId,
        toWorkerId,
        reason: t.reason,
        checkpoint: checkpoints.get(t.id) ?? null,
        success: toWorkerId === null ? 0 : 1,
        errorMessage,
        now,
      });
    }
    result.reassigned = plan.assigned.map((t) => ({ taskId: t.id, workerId: t.workerId }));
    result.unassigned = plan.unassigned.map((t) => t.id);
    return result;
  });
}
