import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { Taskpool } from "../../src/api/taskpool.js";
import { UnavailableError } from "../../src/core/errors.js";
import { buildServer } from "../../src/server/server.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { taskpool } from "../helpers/cli.js";
import { removeSqliteFiles, sqlitePath } from "../helpers/stores.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Another process holding the file's write lock (BEGIN IMMEDIATE) until its stdin closes: what a
 * long write elsewhere (a big batch, a migration, a process stopped with ^Z mid-transaction) looks
 * like to everyone else on the file.
 */
async function holdWriteLock(path: string): Promise<{ release(): Promise<void> }> {
  const code = `const db = new (require("better-sqlite3"))(process.argv[1]);
db.exec("BEGIN IMMEDIATE");
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

describe("SQLite: another process holds the write lock", () => {
  afterEach(async () => {
    for (const h of holders.splice(0)) if (h.exitCode === null) h.kill("SIGKILL");
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function migratedFile(): Promise<string> {
    const path = sqlitePath();
    cleanups.push(() => removeSqliteFiles(path));
    const store = new SqliteStore({ path });
    await store.migrate();
    await store.enqueue({ taskType: "old" });
    await store.close();
    return path;
  }

  it("read-only CLI commands still answer; a write fails with one line saying the file is locked, and works once it is released", { timeout: 30_000 }, async () => {
    const path = await migratedFile();
    const db = `sqlite:${path}`;
    const lock = await holdWriteLock(path);

    expect((await taskpool("status", "--db", db)).stdout).toMatch(/pending 1/);
    expect((await taskpool("tasks", "list", "--db", db)).stdout).toMatch(/old/);
    const refused = await taskpool("enqueue", "job", "--db", db).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(refused?.code).toBe(1);
    expect(refused?.stderr).toMatch(/locked by another process's write for 5000 ms; nothing was written: try again/);
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
    const lock = await holdWriteLock(path);

    const enqueue = await post("/api/tasks", { task_type: "job" });
    expect(enqueue.status).toBe(503);
    expect(await enqueue.json()).toMatchObject({ success: false, error: "database_unavailable", message: expect.stringMatching(/locked.*nothing was written/) });
    expect((await post("/api/tasks/claim", { worker_id: "w1", task_types: ["old"] })).status).toBe(503);
    expect((await fetch(`${url}/api/tasks/counts`)).status).toBe(200);
    // The library says the same: not a refusal, so a worker retries it.
    await expect(store.enqueue({ taskType: "job" })).rejects.toBeInstanceOf(UnavailableError);

    await lock.release();
    expect((await post("/api/tasks", { task_type: "job" })).status).toBe(201);
    expect((await store.counts()).byStatus.pending).toBe(2);
  });
});
