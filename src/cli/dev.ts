import type { Command } from "commander";
import { consoleLogger } from "./console-log.js";
import { dbOption, openPool } from "./database.js";
import { DEMO_ROLES, DEMO_SEED, demoHandlers } from "./demo.js";
import { positiveInteger } from "./parse.js";
import { printStatus } from "./status.js";

export function devCommand(program: Command): void {
  program
    .command("dev")
    .description("everything in one process on embedded SQLite: a coordinator, a worker and the demo pipeline")
    .addOption(dbOption())
    .option("--no-demo", "do not enqueue the demo pipeline")
    .option("--concurrency <n>", "tasks the worker runs at once", positiveInteger, 4)
    .option("--status-every <seconds>", "print the status table this often (0: never)", Number, 10)
    .action(async (opts: { db: string; demo: boolean; concurrency: number; statusEvery: number }) => {
      // The tour shows every task move; a worker in production logs them at debug only.
      const logger = consoleLogger("debug");
      const pool = await openPool(opts);
      logger.info(`taskpool dev on ${opts.db}; Ctrl-C stops gracefully`);
      const coordinator = pool.coordinator({ sweepIntervalMs: 5000, staleAfterMs: 10_000, deadAfterMs: 20_000, reservationMs: 10_000, logger });
      coordinator.start();
      const worker = pool.worker({
        roles: DEMO_ROLES,
        handlers: demoHandlers,
        workerId: "dev-worker",
        concurrency: opts.concurrency,
        pollIntervalMs: 1000,
        heartbeatIntervalMs: 2000,
        shutdownGraceMs: 5000,
        handleSignals: false,
        logger,
      });
      await worker.start();
      if (opts.demo) {
        const { task, created } = await pool.protocol.enqueue(DEMO_SEED);
        logger.info(created ? `Enqueued demo pipeline: task ${task.id} (store_discovery)` : `Demo pipeline already pending as task ${task.id}`);
      }
      const status = opts.statusEvery > 0 ? setInterval(() => void printStatus(pool, (l) => logger.info(l)), opts.statusEvery * 1000) : null;

      let stopping = false;
      const stop = async () => {
        if (stopping) process.exit(130);
        stopping = true;
        logger.info("Stopping: running tasks get 5 s to finish (Ctrl-C again to quit at once)");
        if (status) clearInterval(status);
        await worker.stop();
        await coordinator.stop();
        await printStatus(pool, (l) => logger.info(l));
        await pool.close();
        process.exit(0);
      };
      process.on("SIGINT", stop);
      process.on("SIGTERM", stop);
    });
}
