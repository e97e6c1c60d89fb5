import type Database from "better-sqlite3";
import { loadMigrations } from "../migrations.js";

const MIGRATIONS = new URL("./migrations/", import.meta.url);

/**
 * Applies the migrations the file lacks. The version lives in PRAGMA user_version and is read inside
 * a BEGIN IMMEDIATE transaction, so of two processes migrating at once the second waits for the write
 * lock and then sees the first one's version.
 */
export function migrateSqlite(db: Database.Database): void {
  const migrations = loadMigrations(MIGRATIONS);
  db.transaction(() => {
    const current = db.pragma("user_version", { simple: true }) as number;
    for (const m of migrations) {
      if (m.version <= current) continue;
      db.exec(m.sql);
      db.pragma(`user_version = ${m.version}`);
    }
  }).immediate();
}
