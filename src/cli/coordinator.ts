import type { Command } from "commander";
import { dbOption, openPool, schemaOption } from "./database.js";
import { positiveInteger } from "./parse.js";

export function coordinatorCommand(program: Command): void {
  program
    .command("coordinator")
    .description("detect dead workers and recover their tasks (run as many as you like: one leads at a time)")
    .option("--sweep-interval <ms>", "time between sweeps", positiveInteger, 60_000)
    .option("--stale-after <ms>", "silence before a worker is stale", positiveInteger, 60_000)
    .option("--dead-after <ms>", "silence before a worker is dead and its tasks recovered", positiveInteger, 120_000)
    .addOption(dbOption())
    .addOption(schemaOption())
    .action(async (opts) => {
      const pool = await openPool(opts);
      const coordinator = pool.coordinator({ sweepIntervalMs: opts.sweepInterval, staleAfterMs: opts.staleAfter, deadAfterMs: opts.deadAfter });
      coordinator.start();
      const stop = async () => {
        await coordinator.stop();
        await pool.close();
        process.exit(0);
      };
      process.once("SIGTERM", stop);
      process.once("SIGINT", stop);
    });
}
