/**
 * The worker crash `taskpool dev` stages, so that a newcomer sees recovery happen rather than reads
 * about it: an extra worker, a real `taskpool worker` process on dev's database, takes one task of a
 * role whose handler checkpoints, and is killed (SIGKILL: no goodbye, no release) once it has saved a
 * checkpoint or two. Its heartbeats stop; dev's coordinator declares it dead, takes the task back and
 * reserves it for a healthy worker of the role, which resumes from the checkpoint.
 */
import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { Taskpool } from "../api/taskpool.js";
import type { Task } from "../core/task.js";

/** What the staged crash runs and where. */
export interface CrashOptions {
  /** dev's handlers module, database and schema: the extra worker runs the same code on the same data. */
  handlersPath: string;
  db: string;
  schema?: string;
  /** The task type it takes: one whose handler checkpoints as it goes (the example's product_discovery). */
  role: string;
  /** Checkpoints the task must have saved before the worker is killed. */
  checkpoints: number;
  logger: Logger;
}

/** The staged crash under way. */
export interface SimulatedCrash {
  workerId: string;
  /** Settles once the extra worker holds its task, or the simulation gave up: start the role's other workers then. */
  claimed: Promise<void>;
  /** Calls the crash off: the extra worker runs on, and is not killed mid-task any more. */
  disarm(): void;
  /**
   * Disarms, and stops the extra worker if it still runs as a worker stops on SIGTERM: the task it
   * holds goes back to the pool at once (within STOP_WITHIN_MS, or it is killed).
   */
  stop(): Promise<void>;
}

// How long each step may take before the simulation gives up: a start slowed by a busy machine, a
// pipeline that never reaches the role, a recovery held up by the role's backlog.
const CLAIM_WITHIN_MS = 30_000;
const CHECKPOINTS_WITHIN_MS = 30_000;
const RECOVERY_WITHIN_MS = 180_000;
const STOP_WITHIN_MS = 5_000;
const POLL_MS = 100;
/** Connection settings the extra worker must not inherit from dev's environment: they would point it somewhere else than dev's database. */
const NOT_INHERITED = new Set(["TASKPOOL_URL", "TASKPOOL_API_KEY", "TASKPOOL_DATABASE_URL", "TASKPOOL_SCHEMA", "WORKER_ID", "WORKER_ROLE"]);

const holding = (task: Task | null, workerId: string) => task !== null && task.workerId === workerId && (task.status === "claimed" || task.status === "running");

/**
 * Starts the extra worker with the CLI this process runs (the same Node.js, its flags such as tsx's
 * loader, and the same entry: the sources or dist/ alike), then watches through `pool` and kills it.
 */
export function simulateCrash(pool: Taskpool, options: CrashOptions): SimulatedCrash {
  const { logger } = options;
  const workerId = `dev-${options.role}-crashing`;
  // The database and schema go in its environment, not its arguments: a URL's password on a command line is any local user's to read (ps).
  const args = ["worker", "--handlers", options.handlersPath, "--role", options.role, "--concurrency", "1", "--id", workerId];
  // Polls and beats as often as dev's own workers, so it gets a task as soon as the role has one. Stopped
  // by dev before the crash, it releases its task at once. Through the IPC channel it hears dev end,
  // however it ends: a dev killed with SIGKILL left it running, claiming tasks, with nobody to stop it.
  args.push("--poll-interval", "250", "--heartbeat-interval", "1000", "--shutdown-grace", "0", "--exit-with-parent");
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !NOT_INHERITED.has(name)));
  const connection = { TASKPOOL_DATABASE_URL: options.db, ...(options.schema ? { TASKPOOL_SCHEMA: options.schema } : {}) };
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1], ...args], { env: { ...env, ...connection, LOG_LEVEL: "warn" }, stdio: ["ignore", "ignore", "pipe", "ipc"] });
  let stderr = "";
  child.stderr?.on("data", (chunk) => (stderr = (stderr + chunk).slice(-2000)));
  const kill = () => void child.kill("SIGKILL");
  process.on("exit", kill);
  const watching = new AbortController();
  let killed = false;
  let stopped = false;
  const exited = new Promise<void>((resolve) =>
    child.on("exit", (code, signal) => {
      process.off("exit", kill);
      resolve();
      if (killed || watching.signal.aborted) return;
      const why = stderr.trim().split("\n").at(-1);
      watching.abort(new Error(`worker ${workerId} exited by itself (${signal ?? `code ${code}`})${why ? `: ${why}` : ""}`));
    }),
  );
  child.on("error", (error) => watching.abort(new Error(`cannot start worker ${workerId}: ${error.message}`)));

  /** The first truthy value of `check`, polled until `withinMs` has passed (then null). */
  const poll = async <T>(withinMs: number, check: () => Promise<T | null>): Promise<T | null> => {
    const deadline = Date.now() + withinMs;
    for (;;) {
      const value = await check();
      if (value) return value;
      if (Date.now() > deadline) return null;
      await sleep(POLL_MS, undefined, { signal: watching.signal });
    }
  };

  let claimedTask: () => void = () => {};
  const claimed = new Promise<void>((resolve) => (claimedTask = resolve));
  const run = async (): Promise<string | null> => {
    const task = await poll(CLAIM_WITHIN_MS, async () => (await pool.list({ workerId, status: ["claimed", "running"] }, { limit: 1 })).tasks[0] ?? null);
    if (!task) return `worker ${workerId} found no ${options.role} task within ${CLAIM_WITHIN_MS / 1000} s`;
    claimedTask();
    logger.info(`Crash simulation: worker ${workerId} (its own process, pid ${child.pid}) runs task ${task.id} (${task.taskType}); it will be killed after ${options.checkpoints} checkpoints`);

    let saves = 0;
    let checkpoint = JSON.stringify(task.checkpoint);
    const ready = await poll(CHECKPOINTS_WITHIN_MS, async () => {
      const now = await pool.get(task.id);
      if (!holding(now, workerId)) return "ended";
      if (JSON.stringify(now?.checkpoint) !== checkpoint) [saves, checkpoint] = [saves + 1, JSON.stringify(now?.checkpoint)];
      return saves >= options.checkpoints ? "saved" : null;
    });
    if (ready !== "saved") return `task ${task.id} ${ready === "ended" ? "ended" : "saved no checkpoint"} before worker ${workerId} could be killed mid-task`;
    killed = true;
    child.kill("SIGKILL");
    await exited;
    // What it left, which may be a save later than the one seen: the checkpoint its successor gets.
    checkpoint = JSON.stringify((await pool.get(task.id))?.checkpoint);
    logger.warn(`Simulating a worker crash: killed worker ${workerId} mid-task ${task.id} (${task.taskType}, checkpoint ${checkpoint}); watch the coordinator recover it`);

    const end = await pool.waitFor(task.id, { signal: AbortSignal.any([watching.signal, AbortSignal.timeout(RECOVERY_WITHIN_MS)]) }).catch(() => null);
    if (end?.status === "completed") logger.info(`Recovered: task ${end.id} completed by ${end.workerId} on attempt ${end.attempts}, from the dead worker's checkpoint ${checkpoint}`);
    else if (end) logger.warn(`Task ${end.id}, taken back from the crashed worker, ended ${end.status}: ${end.errorMessage}`);
    return null;
  };
  void run()
    .then((gaveUp) => gaveUp && logger.warn(`No simulated crash: ${gaveUp}`))
    .catch((error: Error) => {
      const cause = watching.signal.reason as Error | undefined;
      if (cause?.message !== "stopped") logger.warn(`No simulated crash: ${(cause ?? error).message}`);
    })
    .finally(() => {
      // Stopped by stop(), the worker is given its chance to release its task there.
      if (!stopped) kill();
      claimedTask();
    });

  const disarm = () => {
    stopped = true;
    watching.abort(new Error("stopped"));
  };
  return {
    workerId,
    claimed,
    disarm,
    stop: async () => {
      disarm();
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const late = setTimeout(kill, STOP_WITHIN_MS);
      await exited;
      clearTimeout(late);
    },
  };
}
