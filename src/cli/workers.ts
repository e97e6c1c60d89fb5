import type { WorkerRecord } from "../core/worker.js";
import { ValidationError } from "../core/errors.js";
import { CliError, namedAsFlags } from "./errors.js";
import { type TaskpoolCommand, withPool } from "./database.js";
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

export function workersCommand(program: TaskpoolCommand): void {
  const workers = program
    .command("workers")
    .description("the worker registry: list it (the default), or shut down a worker whose process is gone")
    .addHelpText("after", "\nExample:\n  $ taskpool workers\n  $ taskpool workers shutdown crawler-7");
  // The default, so `taskpool workers` lists. A subcommand rather than the group's own action: the group's
  // options would take `workers shutdown w1 --db …`'s --db. A word that names no subcommand would reach
  // it as an argument ("too many arguments for 'list'"): it is refused as what it is.
  workers.hook("preSubcommand", (group, sub) => {
    const [word] = group.args;
    if (sub.name() === "list" && word !== undefined && word !== "list" && !word.startsWith("-")) {
      group.error(`error: unknown command '${word}'`, { code: "commander.unknownCommand" });
    }
  });
  workers
    .command("list", { isDefault: true })
    .description("the worker registry: status, seconds since heartbeat, load/capacity, tasks held and processed, host, pid")
    .addOption(jsonOption())
    .poolOptions()
    .addHelpText("after", "\nExample:\n  $ taskpool workers\n  $ taskpool workers --json | jq '.[] | select(.status != \"active\") | .workerId'")
    .action((opts) =>
      withPool(opts, async (pool) => {
        const workers = await pool.workers();
        emit(opts.json, workers, () => (workers.length === 0 ? ["No workers have registered (start one: taskpool worker --handlers ./handlers.js)"] : formatTable(WORKER_COLUMNS, workers)));
      }),
    );
  workers
    .command("shutdown <worker-id>")
    .description("mark a worker shut down now and put the tasks it holds back in the pool (no attempt charged), for one whose process is gone without saying so; the coordinator would otherwise wait until it is found dead")
    .option("--run-id <id>", "only if this run (the run_id of its beats) is still the worker's current one: a run that restarted under the id since keeps its tasks")
    .option("--force", "also when the worker is active: its process, if it still runs, has its tasks taken back and its writes refused")
    .addOption(jsonOption())
    .poolOptions()
    .addHelpText("after", "\nExample:\n  $ taskpool workers shutdown crawler-7\n  $ taskpool workers shutdown crawler-7 --force --json")
    .action((workerId: string, opts) =>
      withPool(opts, async (pool) => {
        const worker = (await pool.workers()).find((w) => w.workerId === workerId);
        // An active worker is most likely running: what it holds would run twice. A stopped process says
        // so itself (SIGTERM shuts it down); this is for one that could not.
        if (worker?.status === "active" && opts.force !== true) {
          throw new CliError(
            `Worker ${workerId} is active (heard ${worker.secondsSinceHeartbeat} s ago): if its process still runs, ${worker.activeTasks === 0 ? "it would run on, marked shut down" : `its ${worker.activeTasks} task${worker.activeTasks === 1 ? "" : "s"} would run twice`}. ` +
              "Stop the process instead (SIGTERM: it shuts itself down), or pass --force if it is gone",
          );
        }
        const released = await pool.protocol
          .shutdownWorker(workerId, opts.runId)
          .catch((error: unknown) => Promise.reject(error instanceof ValidationError ? namedAsFlags(error, { workerId: "<worker-id>", runId: "--run-id" }) : error));
        // A run another has replaced changes nothing (Store.shutdownWorker): the worker stays as it was.
        const replaced = opts.runId !== undefined && released.length === 0 && (await pool.workers()).find((w) => w.workerId === workerId)?.status !== "inactive";
        emit(opts.json, { workerId, shutDown: !replaced, released }, () => [
          replaced
            ? `Run ${opts.runId} of worker ${workerId} is no longer its current one: nothing changed (the run that replaced it keeps its tasks)`
            : worker?.status === "inactive" && released.length === 0
              ? `Worker ${workerId} was already shut down: nothing changed`
              : released.length === 0
              ? `Worker ${workerId} shut down; it held no tasks`
              : `Worker ${workerId} shut down; ${released.length} task${released.length === 1 ? "" : "s"} back in the pool: ${released.join(", ")}`,
        ]);
      }),
    );
}
