/**
 * A real `taskpool serve` process SIGKILLed while producers enqueue through it over HTTP, and
 * started again on the same port and database. Requests in flight at the kill may have been written
 * or not; the client cannot tell, and sends each again with its idempotency key once the server is
 * back. Before keys, a restart in 2 s doubled 7 tasks of 150 (the client repeated creates it took for
 * a kept-alive race), and then the client refused to repeat them at all (maybeApplied): callers saw
 * errors for tasks that might exist. Now every call is answered and every task exists once.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { HttpStore } from "../../src/client/http-store.js";
import { CheckedStore } from "../../src/api/checked-store.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { CLI } from "../helpers/cli.js";
import { eventually } from "../helpers/logs.js";
import { removeSqliteFiles, sqlitePath } from "../helpers/stores.js";

/** `taskpool serve` on `port` (0: a free one) of 127.0.0.1; resolves with its URL once it listens. */
async function serve(db: string, port: number): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [CLI, "serve", "--port", String(port), "--no-coordinator", "--db", db], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, LOG_LEVEL: "info" } });
  let output = "";
  child.stdout?.on("data", (d) => (output += d));
  child.stderr?.on("data", (d) => (output += d));
  const url = (await eventually(() => /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output), 20_000, "the server to listen"))[1];
  return { child, url };
}

const exited = (child: ChildProcess) => new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve(null) : child.once("exit", resolve)));

describe("producers over HTTP while taskpool serve is SIGKILLed and restarted", () => {
  const db = `sqlite:${sqlitePath()}`;
  const children: ChildProcess[] = [];
  afterEach(async () => {
    for (const child of children.splice(0)) {
      child.kill("SIGKILL");
      await exited(child);
    }
    removeSqliteFiles(db.slice("sqlite:".length));
  });

  it("every enqueue is answered and every task exists once", { timeout: 60_000 }, async () => {
    const first = await serve(db, 0);
    children.push(first.child);
    const port = Number(new URL(first.url).port);
    // The client's defaults: an enqueue is sent for long enough to outlast a restart.
    const producers = await Promise.all(
      Array.from({ length: 4 }, async () => {
        const client = new HttpStore(first.url);
        await client.migrate();
        return client;
      }),
    );
    let sent = 0;
    const PER_PRODUCER = 40;
    const runs = producers.map(async (client, p) => {
      const answers: number[] = [];
      for (let n = 0; n < PER_PRODUCER; n++) {
        sent++;
        answers.push((await client.enqueue({ taskType: "once", params: { p, n } })).task.id);
      }
      return answers;
    });
    // Killed mid-stream: four producers each have a request in flight or about to be.
    await eventually(() => sent >= 40, 20_000, "producers to be under way");
    first.child.kill("SIGKILL");
    await exited(first.child);
    const second = await serve(db, port);
    children.push(second.child);
    const ids = (await Promise.all(runs)).flat();
    await Promise.all(producers.map((c) => c.close()));

    const store = new CheckedStore(new SqliteStore({ path: db.slice("sqlite:".length) }));
    try {
      const { tasks } = await store.list({}, { limit: 1000 });
      expect(tasks).toHaveLength(4 * PER_PRODUCER);
      expect(new Set(tasks.map((t) => `${t.params.p}:${t.params.n}`)).size).toBe(4 * PER_PRODUCER);
      expect(new Set(ids).size).toBe(4 * PER_PRODUCER);
    } finally {
      await store.close();
    }
  });

  it("an enqueue sent while the server is down is written once it is back, with the client's default retries", { timeout: 60_000 }, async () => {
    const first = await serve(db, 0);
    children.push(first.child);
    const port = Number(new URL(first.url).port);
    const client = new HttpStore(first.url);
    await client.migrate();
    first.child.kill("SIGKILL");
    await exited(first.child);
    const answer = client.enqueue({ taskType: "during-deploy", params: { order: 7 } });
    // Down longer than other calls' retries last (about 2 to 3 s): a deploy, not a blip.
    await new Promise((resolve) => setTimeout(resolve, 3500));
    const second = await serve(db, port);
    children.push(second.child);
    const { task, created } = await answer;
    await client.close();
    expect([task.taskType, task.params, created]).toEqual(["during-deploy", { order: 7 }, true]);
    const store = new CheckedStore(new SqliteStore({ path: db.slice("sqlite:".length) }));
    try {
      expect((await store.list({}, { limit: 10 })).tasks.map((t) => t.id)).toEqual([task.id]);
    } finally {
      await store.close();
    }
  });
});
