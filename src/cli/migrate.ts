import type { Command } from "commander";
import { addDatabaseOnlyOptions, withPool } from "./database.js";
import { redactUrl } from "./errors.js";

export function migrateCommand(program: Command): void {
  const command = program.command("migrate").description("apply pending database migrations (safe to run from several machines at once)");
  // Over HTTP, connecting only asks the server whether it is ready: "Migrated" would be untrue.
  addDatabaseOnlyOptions(command, (server) => `Migrating is not available over HTTP: a server migrates its database as it starts; run taskpool migrate --db … with the database's URL, not ${server}`)
    // Connecting migrates. The password stays out of the output; on PostgreSQL the schema is half the answer.
    .action((opts: { db: string; schema?: string }) =>
      withPool(opts, async (pool) => {
        const schema = pool.protocol.dialect === "postgres" ? `, schema ${opts.schema ?? "taskpool"}` : "";
        console.log(`Migrated ${redactUrl(opts.db)}${schema}`);
      }, {}, true),
    );
}
