import { InvalidArgumentError } from "commander";
import { GONE_WORKER_STATUSES, WORKER_STATUSES, type WorkerList, type WorkerRecord, type WorkerStatus } from "../core/worker.js";
import { ValidationError } from "../core/errors.js";
import { counted } from "../core/counted.js";
import { CliError, namedAsFlags } from "./errors.js";
import { type TaskpoolCommand, withPool } from "./database.js";
import { integerFrom } from "./parse.js";
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

/**
 * What a page of the registry left out, in a line (none when it listed every worker): the gone ones
 * it folded, by status, and how to read on. `command` is what printed the page.
 */
export function leftOutLines(page: WorkerList, command: string): string[] {
  if (page.nextCursor === null) return [];
  const listed = page.workers.filter((w) => (GONE_WORKER_STATUSES as readonly string[]).includes(w.status)).length;
  const gone = GONE_WORKER_STATUSES.map((s) => `${page.counts[s]} ${s}`).join(", ");
  return [
    `Listed ${listed} of ${counted(page.counts.dead + page.counts.inactive, "gone worker")} (${gone}), the most recently heard from.`,
    `More: ${command} --cursor ${page.nextCursor}, or one worker: taskpool workers --worker <id>`,
  ];
}

function statuses(value: string, previous: WorkerStatus[] = []): WorkerStatus[] {
  const next = value.split(",").map((s) => s.trim());
  for (const s of next) {
    if (!(WORKER_STATUSES as readonly string[]).includes(s)) throw new InvalidArgumentError(`"${s}" is not a worker status; use one of ${WORKER_STATUSES.join(", ")}`);
  }
  return [...new Set([...previous, ...(next as WorkerStatus[])])];
}

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
    .description(
      "the worker registry: status, seconds since heartbeat, load/capacity, tasks held and processed, host, pid. Every live worker (active, stale), " +
        "then the gone ones (dead, inactive) most recently heard from, a page at a time",
    )
    .option("--status <status>", `only these statuses, repeatable or comma-separated: ${WORKER_STATUSES.join(", ")}`, statuses)
    .option("--worker <workerId>", "only this worker, whatever its status")
    .option("--limit <n>", "gone workers a page lists (1-1000, default 100); live ones are all listed", integerFrom(1, 1000))
    .option("--cursor <cursor>", "the next page: the cursor the previous page printed")
    .addOption(jsonOption())
    .poolOptions()
    .addHelpText(
      "after",
      "\nExample:\n  $ taskpool workers\n  $ taskpool workers --status dead --limit 500\n  $ taskpool workers --worker crawler-7\n  $ taskpool workers --json | jq '.workers[] | select(.status != \"active\") | .workerId'",
    )
    .action((opts) =>
      withPool(opts, async (pool) => {
        const page = await pool.workers({ status: opts.status, workerId: opts.worker, limit: opts.limit, cursor: opts.cursor });
        const none = opts.worker !== undefined ? `No worker ${opts.worker} in the registry` : opts.status !== undefined ? "No workers match" : "No workers have registered (start one: taskpool worker --handlers ./handlers.js)";
        emit(opts.json, page, () => (page.workers.length === 0 ? [none] : [...formatTable(WORKER_COLUMNS, page.workers), ...leftOutLines(page, "run the same command with")]));
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
        // An id that is none is left to the shutdown to refuse, which names it as the argument typed.
        const ofWorker = async () =>
          (await pool.workers({ workerId }).catch((error: unknown) => (error instanceof ValidationError ? { workers: [] } : Promise.reject(error)))).workers.find((w) => w.workerId === workerId);
        const worker = await ofWorker();
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
        const replaced = opts.runId !== undefined && released.length === 0 && (await ofWorker())?.status !== "inactive";
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
