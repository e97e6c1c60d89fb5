import type { Command } from "commander";
import { addDatabaseOnlyOptions, withPool } from "./database.js";
import { redactUrl } from "../core/redact-url.js";
import { explainConnectError } from "./errors.js";

export function migrateCommand(program: Command): void {
  const command = program
    .command("migrate")
    .description("apply pending database migrations (safe to run from several machines at once)")
    .addHelpText("after", "\nExample:\n  $ taskpool migrate --db postgres://app@db/app --schema taskpool   # before a deploy of a newer taskpool");
  // Over HTTP, connecting only asks the server whether it is ready: "Migrated" would be untrue.
  addDatabaseOnlyOptions(command, (server) => `Migrating is not available over HTTP: a server migrates its database as it starts; run taskpool migrate --db … with the database's URL, not ${server}`)
    // Connected without migrating, so the migration's own answer says what it applied. The password
    // stays out of the output; on PostgreSQL the schema is half the answer.
    .action((opts: { db: string; schema?: string }) =>
      withPool(
        opts,
        async (pool) => {
          const applied = await pool.protocol.migrate().catch((error: unknown) => {
            throw explainConnectError(error, opts.db);
          });
          const where = redactUrl(opts.db) + (pool.protocol.dialect === "postgres" ? `, schema ${opts.schema ?? "taskpool"}` : "");
          if (applied.length === 0) console.log(`${where} is up to date: no migration to apply`);
          else console.log(`Migrated ${where}: applied ${applied.length === 1 ? "migration" : "migrations"} ${versions(applied)}`);
        },
        { migrate: false },
        true,
      ),
    );
}

/** Versions as their files number them: `021`, or `001 to 021` for a run. */
const versions = (applied: number[]) => {
  const name = (v: number) => String(v).padStart(3, "0");
  return applied.length === 1 ? name(applied[0]) : `${name(applied[0])} to ${name(applied.at(-1) as number)}`;
};
