import { loadMigrations } from "../migrations.js";
import type { SqliteConnection } from "./connection.js";

const MIGRATIONS = new URL("./migrations/", import.meta.url);

/**
 * Applies the migrations the file lacks. The version lives in PRAGMA user_version. A file already up
 * to date is left alone without taking the write lock (every process opening the file migrates, and a
 * `taskpool status` must not wait behind, or fail on, another process's write); otherwise the version
 * is read again inside a BEGIN IMMEDIATE transaction, so of two processes migrating at once the second
 * waits for the write lock and then sees the first one's version.
 */
export function migrateSqlite(conn: SqliteConnection): void {
  const migrations = loadMigrations(MIGRATIONS);
  const version = () => conn.db.pragma("user_version", { simple: true }) as number;
  if (version() >= (migrations.at(-1)?.version ?? 0)) return;
  conn.tx(true, () => {
    const current = version();
    for (const m of migrations) {
      if (m.version <= current) continue;
      conn.db.exec(m.sql);
      conn.db.pragma(`user_version = ${m.version}`);
    }
  });
}
