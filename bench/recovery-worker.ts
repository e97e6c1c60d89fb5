/**
 * One worker process of bench/recovery.ts (not meant to be run by hand), modelled on
 * test/fixtures/worker-process.ts. Configured by environment: TASKPOOL_URL, TASKPOOL_SCHEMA, WORKER_ID,
 * HEARTBEAT_INTERVAL_MS, POLL_INTERVAL_MS and PAGE_MS.
 *
 * Its one role, `crawl`, pages from the checkpoint on, PAGE_MS per page, saving a checkpoint after
 * every page, so it is always mid-task with a resume point when the bench kills it. It reports on
 * stdout as JSON lines; `at` is a wall-clock time in ms with sub-ms resolution, comparable with the
 * parent's: both use performance.timeOrigin + performance.now() on the same machine.
 */
import { pino } from "pino";
import { connect } from "../src/api/taskpool.js";

export type WorkerLine =
  | { event: "ready"; workerId: string; at: number }
  | { event: "start"; taskId: number; attempt: number; checkpoint: { page: number } | null; at: number }
  | { event: "page"; taskId: number; page: number; at: number };

const env = process.env;
const wallClock = () => performance.timeOrigin + performance.now();
const out = (line: WorkerLine) => process.stdout.write(`${JSON.stringify(line)}\n`);
const pageMs = Number(env.PAGE_MS ?? 100);

const pool = await connect(env.TASKPOOL_URL as string, { schema: env.TASKPOOL_SCHEMA || undefined, migrate: false });
const worker = pool.worker({
  roles: ["crawl"],
  workerId: env.WORKER_ID,
  pollIntervalMs: env.POLL_INTERVAL_MS === undefined ? undefined : Number(env.POLL_INTERVAL_MS),
  heartbeatIntervalMs: env.HEARTBEAT_INTERVAL_MS === undefined ? undefined : Number(env.HEARTBEAT_INTERVAL_MS),
  logger: pino({ level: "silent" }),
  handlers: {
    async crawl(_params, ctx) {
      // Stamped first thing in the handler: this is "running on the other worker".
      const checkpoint = ctx.checkpoint as { page: number } | null;
      out({ event: "start", taskId: ctx.task.id, attempt: ctx.attempt, checkpoint, at: wallClock() });
      // Endless: the task only ends when the bench kills its worker (or cancels it at the end).
      for (let page = (checkpoint?.page ?? 0) + 1; !ctx.signal.aborted; page++) {
        await new Promise((resolve) => setTimeout(resolve, pageMs));
        await ctx.saveCheckpoint({ page });
        out({ event: "page", taskId: ctx.task.id, page, at: wallClock() });
      }
    },
  },
});
// The task never ends, so a worker orphaned by a bench that was killed would run forever: leave when
// the bench's end of our stdin closes.
process.stdin.on("end", () => process.exit(1)).resume();
await worker.start();
out({ event: "ready", workerId: worker.id, at: wallClock() });
