import type { CapacityRow } from "../core/monitoring.js";
import { type TaskpoolCommand, withPool } from "./database.js";
import { CliError } from "./errors.js";
import { type Column, emit, formatTable, jsonOption } from "./table.js";

const CAPACITY_COLUMNS: Column<CapacityRow>[] = [
  { header: "role", value: (r) => r.taskType },
  { header: "pending", value: (r) => r.pendingTasks },
  { header: "ready", value: (r) => r.readyTasks },
  { header: "oldest ready (s)", value: (r) => r.oldestReadySeconds },
  { header: "running", value: (r) => r.runningTasks },
  { header: "workers", value: (r) => r.activeWorkers },
  { header: "tasks/worker-hour", value: (r) => r.tasksPerWorkerHour },
  { header: "hours to drain", value: (r) => r.estimatedHoursToDrain },
  { header: "need 1h", value: (r) => r.workersNeeded.for1Hour },
  { header: "need 4h", value: (r) => r.workersNeeded.for4Hours },
  { header: "need 8h", value: (r) => r.workersNeeded.for8Hours },
];

export function capacityCommand(program: TaskpoolCommand): void {
  program
    .command("capacity [role]")
    .description("capacity planning per role (seed 004): backlog, how long its oldest ready task has waited, throughput, hours to drain, workers needed to drain in 1, 4 or 8 hours")
    .addOption(jsonOption())
    .poolOptions()
    .addHelpText("after", "\nA - means no throughput in the last hour to estimate from, or, with tasks\nwaiting, no active worker of the role: nothing drains them then. Under\n\"oldest ready (s)\", it means no task of the role is ready (due) now.\n\nExample:\n  $ taskpool capacity\n  $ taskpool capacity product_resync --json")
    .action((role: string | undefined, opts) =>
      withPool(opts, async (pool) => {
        const rows = await pool.capacity(role);
        if (role !== undefined && rows.length === 0) {
          // Not "no task has it": a role whose tasks all finished an hour ago, failed or were cancelled has no row either.
          throw new CliError(`no capacity figures for role "${role}": it has no pending or running task, none completed in the last hour, no active worker and no registration; \`taskpool capacity\` lists the roles that have`);
        }
        emit(opts.json, rows, () => (rows.length === 0 ? ["No roles to plan for: no pending or running tasks, none completed in the last hour, no active workers, no registered task types"] : formatTable(CAPACITY_COLUMNS, rows)));
      }),
    );
}
