import { Option } from "commander";
import type { ReassignmentStats } from "../core/monitoring.js";
import type { ReassignmentEvent } from "../core/worker.js";
import { type TaskpoolCommand, withPool } from "./database.js";
import { CliError } from "./errors.js";
import { integerFrom, taskId } from "./parse.js";
import { type Column, emit, formatTable, jsonOption } from "./table.js";

const REASSIGNMENT_COLUMNS: Column<ReassignmentEvent>[] = [
  { header: "id", value: (r) => r.id },
  { header: "task", value: (r) => r.taskId },
  { header: "time", value: (r) => r.createdAt },
  { header: "from", value: (r) => r.fromWorkerId },
  { header: "to", value: (r) => r.toWorkerId },
  { header: "outcome", value: (r) => (r.success ? "reassigned" : "unassigned") },
  { header: "reason", value: (r) => r.reason },
  { header: "error", value: (r) => r.errorMessage },
];

const indent = (lines: string[]) => lines.map((l) => `  ${l}`);

function showStats(s: ReassignmentStats): string[] {
  const { total, successful, successRatePercent } = s.last24Hours;
  return [
    `Last 24 hours: ${total} reassignment ${total === 1 ? "attempt" : "attempts"}, ${successful} found a worker${successRatePercent === null ? "" : ` (${successRatePercent}%)`}`,
    "",
    "Workers whose tasks were taken back, last 7 days:",
    ...(s.failingWorkers.length === 0
      ? ["  none"]
      : indent(formatTable([{ header: "worker", value: (r) => r.workerId }, { header: "failures", value: (r) => r.failureCount }, { header: "last", value: (r) => r.lastFailureAt }], s.failingWorkers))),
    "",
    "Tasks reassigned more than once:",
    ...(s.repeatedTasks.length === 0
      ? ["  none"]
      : indent(formatTable([{ header: "task", value: (r) => r.taskId }, { header: "reassignments", value: (r) => r.reassignmentCount }, { header: "last", value: (r) => r.lastReassignmentAt }], s.repeatedTasks))),
  ];
}

export function reassignmentsCommand(program: TaskpoolCommand): void {
  program
    .command("reassignments")
    .description("tasks taken back from dead or stuck workers and where they went, newest first; --stats for seed 003's statistics")
    .option("--limit <n>", "at most this many (1-1000)", integerFrom(1, 1000))
    .option("--task <id>", "only this task's reassignments", taskId)
    .addOption(new Option("--stats", "the 24-hour success rate, the workers that failed most and the tasks reassigned more than once").conflicts(["limit", "task"]))
    .addOption(jsonOption())
    .poolOptions()
    .addHelpText("after", "\nExample:\n  $ taskpool reassignments --limit 20\n  $ taskpool reassignments --task 42\n  $ taskpool reassignments --stats --json")
    .action((opts) =>
      withPool(opts, async (pool) => {
        if (opts.stats) {
          const stats = await pool.reassignmentStats();
          emit(opts.json, stats, () => showStats(stats));
          return;
        }
        const history = await pool.reassignments({ limit: opts.limit, taskId: opts.task });
        // No history of a task that does not exist is a mistyped id, not a quiet task.
        if (history.length === 0 && opts.task !== undefined && (await pool.get(opts.task)) === null) {
          throw new CliError(`task ${opts.task} does not exist; \`taskpool tasks list\` shows the ids`);
        }
        emit(opts.json, history, () => (history.length === 0 ? ["No reassignments"] : formatTable(REASSIGNMENT_COLUMNS, history)));
      }),
    );
}
