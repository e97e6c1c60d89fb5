import type { Command } from "commander";
import type { WorkerRecord } from "../core/worker.js";
import { apiKeyOption, dbOption, schemaOption, timeoutOption, urlOption, withPool } from "./database.js";
import { type Column, emit, formatTable, jsonOption } from "./table.js";

/** The worker registry as table columns (also what `taskpool status` prints). */
export const WORKER_COLUMNS: Column<WorkerRecord>[] = [
  { header: "worker", value: (w) => w.workerId },
  { header: "status", value: (w) => w.status },
  { header: "roles", value: (w) => w.roles.join(",") },
  { header: "heartbeat", value: (w) => `${w.secondsSinceHeartbeat}s ago` },
  { header: "load", value: (w) => `${w.currentLoad}/${w.capacity} (${w.loadPercent}%)` },
  { header: "active", value: (w) => w.activeTasks },
  { header: "processed", value: (w) => w.tasksProcessed },
  { header: "host", value: (w) => w.hostname },
  { header: "pid", value: (w) => w.pid },
];

export function workersCommand(program: Command): void {
  program
    .command("workers")
    .description("the worker registry: status, seconds since heartbeat, load/capacity, tasks held and processed, host, pid")
    .addOption(jsonOption())
    .addOption(dbOption())
    .addOption(urlOption())
    .addOption(apiKeyOption())
    .addOption(timeoutOption())
    .addOption(schemaOption())
    .addHelpText("after", "\nExample:\n  $ taskpool workers\n  $ taskpool workers --json | jq '.[] | select(.status != \"active\") | .workerId'")
    .action((opts) =>
      withPool(opts, async (pool) => {
        const workers = await pool.workers();
        emit(opts.json, workers, () => (workers.length === 0 ? ["No workers have registered (start one: taskpool worker --handlers ./handlers.js)"] : formatTable(WORKER_COLUMNS, workers)));
      }),
    );
}
