import { createHash } from "node:crypto";
import Database from "better-sqlite3";
import pg from "pg";
import { PG_URL, type TestStore } from "../helpers/stores.js";

/**
 * A fingerprint of every table of a test database (rows and all their columns), to prove a request
 * changed nothing. Read straight from the database, not through taskpool, so a change the API would
 * not show (an event row, a counter) is seen too.
 */
export interface Snapshotter {
  /** One line per table: name, row count and a hash of its rows. */
  take(): Promise<string[]>;
  close(): Promise<void>;
}

export async function snapshotter(handle: TestStore): Promise<Snapshotter> {
  if (handle.schema !== undefined) {
    const client = new pg.Client({ connectionString: PG_URL, application_name: "chaos-snapshot" });
    await client.connect();
    const tables = (
      await client.query<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE' ORDER BY 1`, [handle.schema])
    ).rows.map((r) => r.table_name);
    const sql = tables
      .map((t) => `SELECT '${t}' AS name, count(*)::int AS n, md5(coalesce(string_agg(r::text, '|' ORDER BY r::text), '')) AS hash FROM "${handle.schema}"."${t}" r`)
      .join(" UNION ALL ");
    return {
      take: async () => (await client.query<{ name: string; n: number; hash: string }>(sql)).rows.map((r) => `${r.name} ${r.n} ${r.hash}`),
      close: () => client.end(),
    };
  }
  const db = new Database(handle.url.slice("sqlite:".length), { readonly: true, fileMustExist: true });
  const tables = (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY 1`).all() as { name: string }[]).map((r) => r.name);
  return {
    take: async () =>
      tables.map((t) => {
        const rows = db.prepare(`SELECT * FROM "${t}"`).all();
        const lines = rows.map((r) => JSON.stringify(r)).sort();
        return `${t} ${rows.length} ${createHash("md5").update(lines.join("|")).digest("hex")}`;
      }),
    close: async () => {
      db.close();
    },
  };
}
