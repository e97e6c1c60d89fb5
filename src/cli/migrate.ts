import type { Command } from "commander";
import { dbOption, schemaOption, withPool } from "./database.js";

export function migrateCommand(program: Command): void {
  program
    .command("migrate")
    .description("apply pending database migrations (safe to run from several machines at once)")
    .addOption(dbOption())
    .addOption(schemaOption())
    // Connecting migrates.
    .action((opts: { db: string; schema?: string }) => withPool(opts, async () => console.log(`Migrated ${opts.db}`)));
}
