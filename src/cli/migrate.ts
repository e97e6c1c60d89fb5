import type { Command } from "commander";
import { dbOption, schemaOption, withStore } from "./database.js";

export function migrateCommand(program: Command): void {
  program
    .command("migrate")
    .description("apply pending database migrations (safe to run from several machines at once)")
    .addOption(dbOption())
    .addOption(schemaOption())
    // Opening a store migrates it.
    .action((opts: { db: string; schema?: string }) => withStore(opts, async () => console.log(`Migrated ${opts.db}`)));
}
