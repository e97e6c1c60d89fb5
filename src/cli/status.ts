import type { Taskpool } from "../api/taskpool.js";
import { COORDINATOR_LEADERSHIP, sweepOverdue } from "../coordinator/coordinator.js";
import type { LeadershipStatus } from "../store/store.js";
import { TASK_STATUSES, type TaskStatus } from "../core/task.js";
import { type TaskpoolCommand, withPool } from "./database.js";
import { type Column, formatTable, jsonOption } from "./table.js";
import { leftOutLines, WORKER_COLUMNS } from "./workers.js";

const NOT_SWEEPING = "dead workers are not being detected and expired leases not recovered";

/** Counts by status in the lifecycle's order (pending, claimed, running, completed, …), whatever order the database answered them in. */
const inOrder = (byStatus: Partial<Record<TaskStatus, number>>) =>
  TASK_STATUSES.filter((s) => byStatus[s] !== undefined)
    .map((s) => `${s} ${byStatus[s]}`)
    .join(", ");

/** Task counts, the worker registry as plain tables, and whether a coordinator is sweeping. */
export async function printStatus(pool: Taskpool, out: (line: string) => void = console.log, json = false): Promise<void> {
  const counts = await pool.counts();
  const registry = await pool.workers();
  const { workers } = registry;
  const leadership = await pool.protocol.leadershipStatus(COORDINATOR_LEADERSHIP);
  if (json) {
    out(JSON.stringify({ counts, workers, workerCounts: registry.counts, coordinator: { ...leadership, sweepOverdue: sweepOverdue(leadership) } }, null, 2));
    return;
  }
  out(`Tasks: ${inOrder(counts.byStatus)}`);
  const byType = Object.entries(counts.byType).sort();
  const typeColumns: Column<(typeof byType)[number]>[] = [
    { header: "type", value: ([type]) => type },
    { header: "counts", value: ([, byStatus]) => inOrder(byStatus) },
  ];
  for (const line of formatTable(typeColumns, byType, { header: false })) out(`  ${line}`);
  const registered = Object.values(registry.counts).reduce((a, b) => a + b, 0);
  out(`Workers: ${registered}`);
  if (workers.length > 0) for (const line of formatTable(WORKER_COLUMNS, workers)) out(`  ${line}`);
  for (const line of leftOutLines(registry, "taskpool workers")) out(`  ${line}`);
  const inUse = registered > 0 || Object.values(counts.byStatus).some((n) => n > 0);
  out(coordinatorLine(leadership, inUse));
}

function coordinatorLine(s: LeadershipStatus, inUse: boolean): string {
  const leader = s.holder === null ? "no coordinator leads" : `${s.holder} leads (lease until ${s.leaseExpiresAt?.toISOString()})`;
  if (s.lastSweptAt === null) {
    return inUse ? `Coordinator: WARNING ${leader} and none has ever swept: ${NOT_SWEEPING} (start one: taskpool coordinator)` : `Coordinator: ${leader}; no sweep yet`;
  }
  const last = `last sweep by ${s.lastSweptBy} at ${s.lastSweptAt.toISOString()}`;
  if (sweepOverdue(s)) {
    return `Coordinator: WARNING no coordinator has swept for ${s.secondsSinceSweep} s (${leader}; ${last}): ${NOT_SWEEPING}`;
  }
  return `Coordinator: ${leader}; ${last}, ${s.secondsSinceSweep} s ago`;
}

export function statusCommand(program: TaskpoolCommand): void {
  program
    .command("status")
    .addHelpText("after", "\nExample:\n  $ taskpool status\n  $ taskpool status --json | jq .counts.byStatus")
    .description("task counts by status and type, and the worker registry")
    .poolOptions()
    .addOption(jsonOption())
    .action((opts: { db: string; schema?: string; json?: boolean }) => withPool(opts, (pool) => printStatus(pool, console.log, opts.json === true)));
}
