import { type ChildProcess, execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { Taskpool } from "../../src/api/taskpool.js";
import { UnavailableError } from "../../src/core/errors.js";
import { buildServer } from "../../src/server/server.js";
import { SqliteConnection } from "../../src/store/sqlite/connection.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { taskpool } from "../helpers/cli.js";
import { script } from "../helpers/processes.js";
import { removeSqliteFiles, sqlitePath } from "../helpers/stores.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const WRITER = fileURLToPath(new URL("../concurrency/sqlite-writer.ts", import.meta.url));

/**
 * Another process holding a lock on the file until its stdin closes. "write": the write lock (BEGIN
 * IMMEDIATE), what a long write elsewhere (a big batch, a migration, a process stopped with ^Z
 * mid-transaction) looks like to everyone else. "read": a read snapshot (a slow query, a sqlite3
 * shell left in a transaction), which no checkpoint may overtake.
 */
async function holdLock(path: string, kind: "write" | "read"): Promise<{ release(): Promise<void> }> {
  const begin = kind === "write" ? `db.exec("BEGIN IMMEDIATE");` : `db.exec("BEGIN"); db.prepare("SELECT count(*) FROM tasks").get();`;
  const code = `const db = new (require("better-sqlite3"))(process.argv[1]);
${begin}
process.stdout.write("locked\\n");
process.stdin.on("end", () => { db.exec("COMMIT"); db.close(); }).resume();`;
  const child: ChildProcess = spawn(process.execPath, ["-e", code, path], { cwd: ROOT, stdio: ["pipe", "pipe", "inherit"] });
  holders.push(child);
  await once(child.stdout!, "data");
  return {
    async release() {
      child.stdin!.end();
      await once(child, "exit");
    },
  };
}

const holders: ChildProcess[] = [];
const cleanups: (() => Promise<unknown> | void)[] = [];

afterEach(async () => {
  for (const h of holders.splice(0)) if (h.exitCode === null) h.kill("SIGKILL");
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A migrated file holding one pending task of type "old". */
async function migratedFile(): Promise<string> {
  const path = sqlitePath();
  cleanups.push(() => removeSqliteFiles(path));
  const store = new SqliteStore({ path });
  await store.migrate();
  await store.enqueue({ taskType: "old" });
  await store.close();
  return path;
}

describe("SQLite: many processes writing at once", () => {
  /**
   * Six processes, each saving checkpoints back to back (a durable write each): no write holds the lock
   * for more than a few milliseconds. SQLite's own wait sleeps up to 100 ms between its tries, so a
   * waiter lost the lock to every newer one: writes failed after the whole busy timeout (2 s here), and
   * each wait stood the process's event loop still for as long (1.0–2.1 s seen). The store waits itself now.
   */
  it("every write gets its turn well within the busy timeout, and the event loop keeps turning", { timeout: 60_000 }, async () => {
    const path = await migratedFile();
    const startAt = Date.now() + 3000;
    const outputs = await Promise.all(
      Array.from({ length: 6 }, (_, n) => promisify(execFile)(process.execPath, [script(WRITER), path, `writer-${n}`, String(startAt), "4", "2000"], { timeout: 45_000 })),
    );
    const runs = outputs.map((o) => JSON.parse(o.stdout.trim().split("\n").at(-1) as string) as { saved: number; refused: number; stalledMs: number });
    expect(runs.map((r) => r.refused)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(Math.max(...runs.map((r) => r.stalledMs))).toBeLessThan(1000);
    expect(Math.min(...runs.map((r) => r.saved))).toBeGreaterThan(0);
  });
});

describe("SQLite: another process holds the write lock", () => {
  it("a durable write that waited for the lock commits durably, whatever another write of its connection set meanwhile", { timeout: 30_000 }, async () => {
    const path = await migratedFile();
    const conn = new SqliteConnection(path, 10_000);
    cleanups.push(() => conn.close());
    const lock = await holdLock(path, "write");
    // A completion (durable: synchronous FULL) and a heartbeat (NORMAL) on one connection both wait.
    const durable = conn.tx(true, () => conn.db.pragma("synchronous", { simple: true }));
    const quick = conn.tx(false, () => conn.db.pragma("synchronous", { simple: true }));
    await new Promise((resolve) => setTimeout(resolve, 100));
    await lock.release();
    // 2 is FULL (an fsync at commit), 1 NORMAL.
    expect(await Promise.all([durable, quick])).toEqual([2, 1]);
  });

  it("read-only CLI commands still answer; a write fails with one line saying the file is locked, and works once it is released", { timeout: 30_000 }, async () => {
    const path = await migratedFile();
    const db = `sqlite:${path}`;
    const lock = await holdLock(path, "write");

    // Together: the write waits out its busy timeout (5 s) whatever the reads do meanwhile.
    const [status, list, refused] = await Promise.all([
      taskpool("status", "--db", db),
      taskpool("tasks", "list", "--db", db),
      taskpool("enqueue", "job", "--db", db).then(
        () => null,
        (e: { code: number; stderr: string }) => e,
      ),
    ]);
    expect(status.stdout).toMatch(/pending 1/);
    expect(list.stdout).toMatch(/old/);
    expect(refused?.code).toBe(1);
    expect(refused?.stderr).toMatch(/stayed locked by other processes' writes for 5000 ms \(one long write, or too many at once\); nothing was written: try again/);
    expect(refused?.stderr).not.toMatch(/permissions|--verbose/);

    await lock.release();
    await taskpool("enqueue", "job", "--db", db);
    expect((await taskpool("status", "--db", db)).stdout).toMatch(/pending 2/);
  });

  it("the HTTP API answers 503 database_unavailable (nothing written), not 500, and the same request goes through once it is released", { timeout: 30_000 }, async () => {
    const path = await migratedFile();
    const store = new SqliteStore({ path, busyTimeoutMs: 200 });
    cleanups.push(() => store.close());
    const app = await buildServer(new Taskpool(new CheckedStore(store), null), { auth: "none" });
    cleanups.push(() => app.close());
    const url = await app.listen({ host: "127.0.0.1", port: 0 });
    const post = (path: string, body: unknown) => fetch(url + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const lock = await holdLock(path, "write");

    const enqueue = await post("/api/tasks", { task_type: "job" });
    expect(enqueue.status).toBe(503);
    expect(await enqueue.json()).toMatchObject({ success: false, error: "database_unavailable", message: expect.stringMatching(/locked.*nothing was written/) });
    expect((await post("/api/tasks/claim", { worker_id: "w1", task_types: ["old"] })).status).toBe(503);
    expect((await fetch(`${url}/api/tasks/counts`)).status).toBe(200);
    // The library says the same: not a refusal, so a worker retries it. So do the coordinator's own writes.
    await expect(store.enqueue({ taskType: "job" })).rejects.toBeInstanceOf(UnavailableError);
    await expect(store.recordSweep("coordinator", "c1", 60)).rejects.toBeInstanceOf(UnavailableError);
    await expect(store.resign("coordinator", "c1")).rejects.toBeInstanceOf(UnavailableError);

    await lock.release();
    expect((await post("/api/tasks", { task_type: "job" })).status).toBe(201);
    expect((await store.counts()).byStatus.pending).toBe(2);
  });
});

describe("SQLite: another process holds a read snapshot", () => {
  it("the WAL grows meanwhile, and is cut back to 16 MiB once checkpointed, not kept at its largest while the file is open", { timeout: 30_000 }, async () => {
    const path = await migratedFile();
    const store = new SqliteStore({ path });
    cleanups.push(() => store.close());
    const walBytes = () => statSync(`${path}-wal`).size;
    const lock = await holdLock(path, "read");
    // ~40 MiB of writes no checkpoint can move into the file past the reader's snapshot.
    const params = { blob: "x".repeat(512 * 1024) };
    for (let i = 0; i < 80; i++) await store.enqueue({ taskType: "big", params });
    expect(walBytes()).toBeGreaterThan(32 * 1024 * 1024);

    await lock.release();
    // The first write after the reader left checkpoints the whole log; the next starts it over.
    for (let i = 0; i < 3; i++) await store.enqueue({ taskType: "small" });
    expect(walBytes()).toBeLessThanOrEqual(16 * 1024 * 1024);
    expect((await store.counts()).byType.big.pending).toBe(80);
  });
});
