import { rmSync } from "node:fs";
import pg from "pg";

/** The PostgreSQL every benchmark runs against. */
export const PG_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/** The server's version, commit durability and autovacuum setting, read once for the report header. */
export async function postgresServer(client: pg.Client): Promise<{ version: string; synchronousCommit: string; autovacuum: string }> {
  return {
    // "15.20 (Debian 15.20-0+deb12u1)": the packaging suffix is noise in a table header.
    version: String((await client.query("SHOW server_version")).rows[0].server_version).split(" ")[0],
    synchronousCommit: (await client.query("SHOW synchronous_commit")).rows[0].synchronous_commit,
    autovacuum: (await client.query("SHOW autovacuum")).rows[0].autovacuum,
  };
}

/** Drops a bench schema from a session of its own, so it works whatever state the store was left in. */
export async function dropSchema(schema: string): Promise<void> {
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await admin.end().catch(() => {});
  }
}

/** A SQLite database is up to three files. */
export function removeSqliteFiles(path: string): void {
  for (const ext of ["", "-wal", "-shm"]) rmSync(path + ext, { force: true });
}
