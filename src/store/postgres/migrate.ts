import type pg from "pg";
import { DatabaseNotFoundError, SchemaTooNewError } from "../../core/errors.js";
import { loadMigrations, type Migration } from "../migrations.js";
import { LIFT_STATEMENT_TIMEOUT, UNTIMED } from "./timeouts.js";
import { inTransaction } from "./transaction.js";

const MIGRATIONS = new URL("./migrations/", import.meta.url);

/**
 * Applies the migrations this schema lacks, in one transaction behind an advisory lock keyed on the
 * schema, so processes starting together take turns: the first migrates, the others find it done.
 * A schema already up to date is only read: creating the schema and the migrations table "if not
 * exists" needs CREATE on the database even when they exist, so a user without it (the owner ran
 * `taskpool migrate`) could not open an up-to-date schema. A schema a newer taskpool migrated is
 * refused (SchemaTooNewError) before anything is written; so is, with `create` false, a schema taskpool
 * never set up (DatabaseNotFoundError, naming the schemas it did set up in that database).
 */
export async function migratePostgres(pool: pg.Pool, schema: string, create = true): Promise<number[]> {
  const migrations = loadMigrations(MIGRATIONS);
  const applied = await appliedVersions(pool, schema);
  if (!create && applied.size === 0) throw new DatabaseNotFoundError(`PostgreSQL schema ${schema}`, schema, await taskpoolSchemas(pool));
  if (pendingMigrations(schema, migrations, applied).length === 0) return [];
  return inTransaction(pool, async (client) => {
    // Waiting for another process's migration, and building an index on a large table, rightly take long.
    const run = (text: string, values?: unknown[]) => client.query({ text, values, ...UNTIMED });
    await run(LIFT_STATEMENT_TIMEOUT);
    await run("SELECT pg_advisory_xact_lock(hashtext($1))", [`taskpool:migrate:${schema}`]);
    await run(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await run(`CREATE TABLE IF NOT EXISTS taskpool_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const applied = new Set((await run("SELECT version FROM taskpool_migrations")).rows.map((r: { version: number }) => r.version));
    const pending = pendingMigrations(schema, migrations, applied);
    for (const m of pending) {
      await run(m.sql);
      await run("INSERT INTO taskpool_migrations (version, name) VALUES ($1, $2)", [m.version, m.name]);
    }
    return pending.map((m) => m.version);
  });
}

/**
 * The migrations the schema records, read without a lock; none for a schema never migrated. A schema
 * the user may not use is left out of its search_path without a word, its tables then missing too:
 * taken for one never migrated, it was said to be "no taskpool schema" while being listed among them,
 * or to need CREATE on the database. It is refused as PostgreSQL refuses a table of it (42501).
 */
async function appliedVersions(pool: pg.Pool, schema: string): Promise<Set<number>> {
  try {
    const { rows } = await pool.query<{ version: number }>("SELECT version FROM taskpool_migrations");
    return new Set(rows.map((r) => r.version));
  } catch (error) {
    if ((error as { code?: string }).code !== "42P01") throw error; // undefined_table: not migrated yet, or not ours to see
    const { rows } = await pool.query<{ usable: boolean }>("SELECT has_schema_privilege(oid, 'USAGE') AS usable FROM pg_namespace WHERE nspname = $1", [schema]);
    if (rows[0]?.usable === false) throw Object.assign(new Error(`permission denied for schema ${schema}`), { code: "42501" });
    return new Set();
  }
}

/** The schemas of the database holding taskpool's migrations table: where taskpool was set up. */
async function taskpoolSchemas(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ schema: string }>(
    "SELECT n.nspname AS schema FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = 'taskpool_migrations' AND c.relkind = 'r' ORDER BY 1",
  );
  return rows.map((r) => r.schema);
}

/** The migrations not applied yet; a schema with migrations this build lacks is refused (SchemaTooNewError). */
function pendingMigrations(schema: string, migrations: Migration[], applied: Set<number>): Migration[] {
  const newest = Math.max(0, ...applied);
  const known = migrations.at(-1)?.version ?? 0;
  if (newest > known) throw new SchemaTooNewError(`PostgreSQL schema ${schema}`, newest, known);
  return migrations.filter((m) => !applied.has(m.version));
}
