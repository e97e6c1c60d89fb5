import type pg from "pg";
import { SchemaTooNewError } from "../../core/errors.js";
import { loadMigrations, type Migration } from "../migrations.js";
import { inTransaction } from "./transaction.js";

const MIGRATIONS = new URL("./migrations/", import.meta.url);

/**
 * Applies the migrations this schema lacks, in one transaction behind an advisory lock keyed on the
 * schema, so processes starting together take turns: the first migrates, the others find it done.
 * A schema already up to date is only read: creating the schema and the migrations table "if not
 * exists" needs CREATE on the database even when they exist, so a user without it (the owner ran
 * `taskpool migrate`) could not open an up-to-date schema. A schema a newer taskpool migrated is
 * refused (SchemaTooNewError) before anything is written.
 */
export async function migratePostgres(pool: pg.Pool, schema: string): Promise<void> {
  const migrations = loadMigrations(MIGRATIONS);
  if (pendingMigrations(schema, migrations, await appliedVersions(pool)).length === 0) return;
  await inTransaction(pool, async (client) => {
    await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`taskpool:migrate:${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS taskpool_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const applied = new Set((await client.query<{ version: number }>("SELECT version FROM taskpool_migrations")).rows.map((r) => r.version));
    for (const m of pendingMigrations(schema, migrations, applied)) {
      await client.query(m.sql);
      await client.query("INSERT INTO taskpool_migrations (version, name) VALUES ($1, $2)", [m.version, m.name]);
    }
  });
}

/** The migrations the schema records, read without a lock; none for a schema never migrated. */
async function appliedVersions(pool: pg.Pool): Promise<Set<number>> {
  try {
    const { rows } = await pool.query<{ version: number }>("SELECT version FROM taskpool_migrations");
    return new Set(rows.map((r) => r.version));
  } catch (error) {
    if ((error as { code?: string }).code === "42P01") return new Set(); // undefined_table: not migrated yet
    throw error;
  }
}

/** The migrations not applied yet; a schema with migrations this build lacks is refused (SchemaTooNewError). */
function pendingMigrations(schema: string, migrations: Migration[], applied: Set<number>): Migration[] {
  const newest = Math.max(0, ...applied);
  const known = migrations.at(-1)?.version ?? 0;
  if (newest > known) throw new SchemaTooNewError(`PostgreSQL schema ${schema}`, newest, known);
  return migrations.filter((m) => !applied.has(m.version));
}
