import type { ChildProcess } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";

/**
 * Freezes a worker process with SIGSTOP. On SQLite, a process frozen inside a write keeps the file's
 * write lock, and every other writer (the coordinator too) waits until it is thawed: SQLite's nature,
 * which a deployment that pauses processes lives with, but not what a scenario about frozen workers is
 * about. There the freeze is tried again until it lands outside a write. `url` is the store's: a
 * `sqlite:` file, or anything else (PostgreSQL writes hold nothing between statements).
 */
export async function freeze(child: ChildProcess, url: string): Promise<void> {
  const sqlitePath = url.startsWith("sqlite:") ? url.slice("sqlite:".length) : null;
  for (;;) {
    child.kill("SIGSTOP");
    if (sqlitePath === null || writeLockFree(sqlitePath)) return;
    child.kill("SIGCONT");
    await sleep(10);
  }
}

/** Whether a write can begin, waiting up to 200 ms for the writers that are running to finish. */
function writeLockFree(path: string): boolean {
  const db = new Database(path, { timeout: 200 });
  try {
    db.exec("BEGIN IMMEDIATE");
    db.exec("ROLLBACK");
    return true;
  } catch (error) {
    if ((error as { code?: string }).code === "SQLITE_BUSY") return false;
    throw error;
  } finally {
    db.close();
  }
}
