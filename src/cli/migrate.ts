import type { Command } from "commander";
import { addDatabaseOnlyOptions, withPool } from "./database.js";

export function migrateCommand(program: Command): void {
  const command = program.command("migrate").description("apply pending database migrations (safe to run from several machines at once)");
  // Over HTTP, connecting only asks the server whether it is ready: "Migrated" would be untrue.
  addDatabaseOnlyOptions(command, (server) => `Migrating is not available over HTTP: a server migrates its database as it starts; run taskpool migrate --db … with the database's URL, not ${server}`)
    // Connecting migrates.
    .action((opts: { db: string; schema?: string }) => withPool(opts, async () => console.log(`Migrated ${opts.db}`)));
}
