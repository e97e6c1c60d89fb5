import type { Command } from "commander";
import { coordinatorNotOverHttp } from "../client/errors.js";
import { addDatabaseOnlyOptions, openPool } from "./database.js";
import { serviceLogger } from "./service-log.js";
import { addRetentionOptions, retentionFrom } from "./retention-options.js";
import { addSweepOptions, checkCoordinatorFlags, sweepFrom } from "./sweep-options.js";

export function coordinatorCommand(program: Command): void {
  const command = program
    .command("coordinator")
    .addHelpText("after", "\nExample:\n  $ taskpool coordinator --db postgres://app@db/app\n  $ taskpool coordinator --retain-completed 3d --retain-failed 30d")
    .description("detect dead workers and recover their tasks, and delete old finished tasks (run as many as you like: one leads at a time)");
  addSweepOptions(command);
  // The library's answer to a coordinator over HTTP, with the server named.
  addDatabaseOnlyOptions(command, (server) => `${coordinatorNotOverHttp().message}, not through ${server}`);
  addRetentionOptions(command).action(async (opts) => {
    const retention = retentionFrom(opts);
    // Bad settings are refused before the database is opened.
    checkCoordinatorFlags(sweepFrom(opts), retention);
    const logger = serviceLogger();
    const pool = await openPool(opts);
    const coordinator = pool.coordinator({ ...sweepFrom(opts), retention, logger });
    coordinator.start();
    let stopping = false;
    const stop = async (signal: NodeJS.Signals) => {
      // A sweep under way is finished first, which with the database hanging takes up to a statement's 10 s.
      if (stopping) {
        logger.warn(`Second ${signal}: exiting now; another coordinator leads once this one's lease runs out`);
        process.exit(1);
      }
      stopping = true;
      logger.info(`${signal}: stopping after the sweep under way, if any (a second signal exits at once)`);
      await coordinator.stop();
      await pool.close();
      process.exit(0);
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
  });
}
