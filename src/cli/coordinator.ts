import type { Command } from "commander";
import { coordinatorNotOverHttp } from "../client/errors.js";
import { addDatabaseOnlyOptions, openPool } from "./database.js";
import { serviceLogger } from "./service-log.js";
import { resolveRetention } from "../coordinator/coordinator.js";
import { addRetentionOptions, retentionFrom } from "./retention-options.js";
import { addSweepOptions, sweepFrom } from "./sweep-options.js";

export function coordinatorCommand(program: Command): void {
  const command = program
    .command("coordinator")
    .description("detect dead workers and recover their tasks, and delete old finished tasks (run as many as you like: one leads at a time)");
  addSweepOptions(command);
  // The library's answer to a coordinator over HTTP, with the server named.
  addDatabaseOnlyOptions(command, (server) => `${coordinatorNotOverHttp().message}, not through ${server}`);
  addRetentionOptions(command).action(async (opts) => {
    const retention = retentionFrom(opts);
    // Bad settings are refused before the database is opened.
    if (retention) resolveRetention(retention);
    const pool = await openPool(opts);
    const coordinator = pool.coordinator({ ...sweepFrom(opts), retention, logger: serviceLogger() });
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
