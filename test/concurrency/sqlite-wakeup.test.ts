import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CommitWatcher } from "../../src/store/sqlite/commit-watcher.js";
import { SqliteConnection } from "../../src/store/sqlite/connection.js";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { eventually } from "../helpers/logs.js";
import { createSqlite, type TestStore } from "../helpers/stores.js";
import { script } from "../helpers/processes.js";

const run = promisify(execFile);
const ENQUEUER = fileURLToPath(new URL("./sqlite-enqueuer.ts", import.meta.url));

describe("SQLite wake-ups from other connections to the file", () => {
  let handle: TestStore<SqliteStore>;
  beforeEach(async () => {
    handle = await createSqlite();
  });
  afterEach(() => handle.cleanup());

  it("a subscriber hears another process's enqueue within 500 ms", async () => {
    const heard: { at: number; types: string[] }[] = [];
    const unsubscribe = await handle.store.subscribe((types) => heard.push({ at: Date.now(), types }));
    const { stdout } = await run(process.execPath, [script(ENQUEUER), handle.store.db.name, "crawl"], { timeout: 60_000 });
    const { id, committedAt } = JSON.parse(stdout.trim().split("\n").at(-1) as string) as { id: number; committedAt: number };
    const first = await eventually(() => heard[0], 2_000, "a wake-up");
    await unsubscribe();

    // Which types the commit touched cannot be told from another process: [] means "re-check".
    expect(first.types).toEqual([]);
    expect(first.at - committedAt).toBeLessThan(500);
    expect((await handle.store.get(id))?.status).toBe("pending");
  }, 60_000);

  it("stops watching when the last subscriber leaves", async () => {
    // A bare connection, not a store: only the data_version watcher can hear its commits.
    const other = new Database(handle.store.db.name);
    try {
      const heard: string[][] = [];
      const unsubscribe = await handle.store.subscribe((types) => heard.push(types));
      other.pragma("user_version = 1");
      await eventually(() => heard.length === 1, 2_000, "a wake-up");
      await unsubscribe();
      other.pragma("user_version = 2");
      await new Promise((r) => setTimeout(r, 200)); // four watcher ticks: nothing may arrive
      expect(heard).toEqual([[]]);
    } finally {
      other.close();
    }
  });
});

/** How many times `conn` reads PRAGMA data_version from now on (the watcher's looks). */
function countLooks(conn: SqliteConnection): () => number {
  const statement = conn.stmt("PRAGMA data_version");
  let n = 0;
  const get = statement.get.bind(statement);
  statement.get = ((...args: unknown[]) => (n++, get(...(args as [])))) as typeof statement.get;
  return () => n;
}

describe("SQLite commit watcher", () => {
  let handle: TestStore<SqliteStore>;
  let conn: SqliteConnection;
  let other: Database.Database;
  beforeEach(async () => {
    handle = await createSqlite();
    conn = new SqliteConnection(handle.store.db.name, 5000);
    other = new Database(handle.store.db.name);
  });
  afterEach(async () => {
    other.close();
    conn.db.close();
    await handle.cleanup();
  });

  it("hears a commit through the WAL file, with no timer to look but after a write", async () => {
    const afterWritesOnly = { afterWrite: 1, writeWindow: 20, busy: 600_000, quiet: 600_000 };
    const watcher = new CommitWatcher(conn, `${handle.store.db.name}-wal`, afterWritesOnly);
    const heard: string[][] = [];
    const stop = watcher.add((types) => heard.push(types));
    try {
      other.pragma("user_version = 1");
      await eventually(() => heard.length === 1, 5_000, "a wake-up from the WAL file's change");
      // Its own connection's commits change nothing it reports.
      conn.db.pragma("user_version = 2");
      await new Promise((r) => setTimeout(r, 100));
      expect(heard).toEqual([[]]);
    } finally {
      stop();
    }
  });

  it("keeps its idle pace when the wall clock steps back: it times its looks on the monotonic clock", async () => {
    const watcher = new CommitWatcher(conn, `${handle.store.db.name}-wal`);
    const stop = watcher.add(() => {});
    const realNow = Date.now;
    try {
      other.pragma("user_version = 1"); // a write: the WAL file changes
      await new Promise((r) => setTimeout(r, 50));
      // The wall clock steps back an hour (NTP, an operator): the last write would look an hour ahead.
      Date.now = () => realNow() - 3_600_000;
      const looks = countLooks(conn);
      await new Promise((r) => setTimeout(r, 500));
      // Idle, it looks every 50 ms: about 10 in 500 ms, not the 1 ms after-write pace (hundreds).
      expect(looks()).toBeLessThan(40);
    } finally {
      Date.now = realNow;
      stop();
    }
  });

  it("looks on its timer alone where the WAL file cannot be watched", async () => {
    const watcher = new CommitWatcher(conn, `${handle.store.db.name}-not-there`);
    const heard: string[][] = [];
    const stop = watcher.add((types) => heard.push(types));
    try {
      other.pragma("user_version = 1");
      await eventually(() => heard.length === 1, 5_000, "a wake-up from the timer");
    } finally {
      stop();
    }
  });
});
