import type { Command } from "commander";
import { openStore } from "../store/open-store.js";
import { dbOption, schemaOption } from "./database.js";

export function migrateCommand(program: Command): void {
  program
    .command("migrate")
    .description("apply pending database migrations (safe to run from several machines at once)")
    .addOption(dbOption())
    .addOption(schemaOption())
    .action(async (opts: { db: string; schema?: string }) => {
      const store = await openStore(opts.db, { schema: opts.schema });
      await store.close();
      console.log(`Migrated ${opts.db}`);
    });
}
