import { SchemaTooNewError } from "../../core/errors.js";
import { loadMigrations } from "../migrations.js";
import type { SqliteConnection } from "./connection.js";

const MIGRATIONS = new URL("./migrations/", import.meta.url);

/**
 * How long opening a file waits for the write lock when it has migrations to apply. Another process
 * may be migrating it, and the migrations of a large file hold the lock for seconds (a million tasks
 * from 7 to 12: 2.5 s alone), past the busy timeout ordinary writes wait once the machine is busy: a
 * worker started together with two servers on such a file failed, "stayed locked … for 5000 ms".
 */
const MIGRATION_WAIT_MS = 10 * 60_000;

/**
 * Applies the migrations the file lacks. The version lives in PRAGMA user_version. A file already up
 * to date is left alone without taking the write lock (every process opening the file migrates, and a
 * `taskpool status` must not wait behind, or fail on, another process's write); otherwise the version
 * is read again inside a BEGIN IMMEDIATE transaction, so of two processes migrating at once the second
 * waits for the write lock (up to MIGRATION_WAIT_MS) and then sees the first one's version. A file a
 * newer taskpool migrated is refused (SchemaTooNewError) before anything is written.
 */
export async function migrateSqlite(conn: SqliteConnection): Promise<number[]> {
  const migrations = loadMigrations(MIGRATIONS);
  const known = migrations.at(-1)?.version ?? 0;
  if (checkSqliteSchema(conn, known) === known) return [];
  return conn.tx(
    true,
    () => {
      const current = checkSqliteSchema(conn, known);
      const pending = migrations.filter((m) => m.version > current);
      for (const m of pending) {
        conn.db.exec(m.sql);
        conn.db.pragma(`user_version = ${m.version}`);
      }
      return pending.map((m) => m.version);
    },
    MIGRATION_WAIT_MS,
  );
}

/** The file's schema version (0: a new file), after refusing one a newer taskpool migrated. */
function checkSqliteSchema(conn: SqliteConnection, known: number): number {
  const version = conn.db.pragma("user_version", { simple: true }) as number;
  if (version > known) throw new SchemaTooNewError(`SQLite file ${conn.db.name}`, version, known);
  return version;
}
