import { setTimeout as delay } from "node:timers/promises";
import type { FastifyInstance } from "fastify";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { connect, type Taskpool } from "../../src/api/taskpool.js";
import { buildServer } from "../../src/server/server.js";
import { eventually } from "../helpers/logs.js";
import { ChaosCluster } from "./cluster.js";
import { PrivatePostgres } from "./private-postgres.js";

/**
 * PostgreSQL gone for a while (stopped, then started again: a restart that takes its time, a
 * failover), on a server of the test's own, in front of a taskpool HTTP server started here. What
 * the server answers meanwhile, and whether its clients ride the outage out on their own.
 */
describe.runIf(PrivatePostgres.available())("PostgreSQL down for a while, behind a taskpool server", () => {
  const schema = "down";
  let server: PrivatePostgres;
  let serverPool: Taskpool | null = null;
  let app: FastifyInstance | null = null;
  let cluster: ChaosCluster | null = null;
  let httpUrl = "";
  let down = false;
  const shutDown = () => {
    server.shutDown("fast");
    down = true;
  };
  const startAgain = () => {
    server.startAgain();
    down = false;
  };

  beforeAll(async () => {
    server = await PrivatePostgres.start();
    await (await connect(server.url, { schema })).close(); // migrates
    serverPool = await connect(server.url, { schema, migrate: false });
    app = await buildServer(serverPool, { auth: "none", rateLimitPerMinute: false, dashboard: false });
    httpUrl = await app.listen({ host: "127.0.0.1", port: 0 });
  }, 60_000);
  // A test that failed mid-outage leaves the database up for the next one.
  afterEach(() => {
    if (down) startAgain();
  });
  afterAll(async () => {
    await cluster?.close();
    await app?.close();
    await serverPool?.close();
    await server?.stop();
  }, 60_000);

  const post = (path: string, body: unknown) => fetch(`${httpUrl}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  it("answers 503 database_unavailable (nothing written) rather than 500, and a producer over HTTP has its enqueue go through once the database is back", { timeout: 30_000 }, async () => {
    const producer = await connect(httpUrl);
    try {
      shutDown();
      const calls: [string, unknown][] = [
        ["/api/tasks", { task_type: "down_a", params: {} }],
        ["/api/tasks/claim", { worker_id: "w1" }],
        ["/api/tasks/claim", { worker_id: "w1", wait_ms: 1000 }],
        ["/api/workers/heartbeat", { worker_id: "w1", roles: ["down_a"], capacity: 1, current_load: 0, tasks_processed: 0 }],
      ];
      for (const [path, body] of calls) {
        const reply = await post(path, body);
        expect({ path, status: reply.status }).toEqual({ path, status: 503 });
        expect(await reply.json()).toMatchObject({ success: false, error: "database_unavailable", message: expect.stringMatching(/database cannot be reached.*nothing was written/), retry_after: 1 });
        expect(reply.headers.get("retry-after")).toBe("1");
      }
      expect((await fetch(`${httpUrl}/readyz`)).status).toBe(503);

      // After a 503 nothing was written: the client sends the enqueue again with backoff (with its
      // idempotency key, as after any lost answer), and it lands once the database is back.
      const enqueued = producer.enqueue("down_b", { n: 1 });
      await delay(300);
      startAgain();
      const task = await enqueued;
      const { tasks } = await serverPool!.list({ taskType: "down_b" });
      expect(tasks.map((t) => t.id)).toEqual([task.id]);
      expect((await fetch(`${httpUrl}/readyz`)).status).toBe(200);
      await serverPool!.cancel(task.id); // no worker takes it: ended, so the next test's checker finds every task ended
    } finally {
      await producer.close();
    }
  });

  it("a scrape of /metrics with a key the server accepted before is answered during the outage, with taskpool_database_up 0", { timeout: 30_000 }, async () => {
    // Keys remembered 100 ms, so the outage outlasts the memory: the key has to be looked up again, and cannot be.
    const keyed = await buildServer(serverPool!, { auth: "keys", apiKeyCacheMs: 100, rateLimitPerMinute: false, dashboard: false });
    try {
      const url = await keyed.listen({ host: "127.0.0.1", port: 0 });
      const { key } = await serverPool!.createApiKey({ scope: "admin" });
      const scrape = () => fetch(`${url}/metrics`, { headers: { "x-api-key": key } });
      expect((await scrape()).status).toBe(200);
      shutDown();
      await delay(300);
      const during = await scrape();
      expect(during.status).toBe(200);
      expect(await during.text()).toMatch(/^taskpool_database_up 0$/m);
      // A key it never accepted is not let in by the outage.
      expect((await fetch(`${url}/metrics`, { headers: { "x-api-key": "tp_never-seen-before" } })).status).toBe(503);
      startAgain();
      await eventually(async () => /^taskpool_database_up 1$/m.test(await (await scrape()).text()), 15_000, "the database to be up again");
    } finally {
      await keyed.close();
    }
  });

  // Over HTTP, a failed call became an error the worker runtime took for a refusal, so it gave up
  // after the client's few seconds of retries: the checkpoint failed the run, or the outcome was
  // dropped and the task had to run again once its lease ran out.
  it("an HTTP worker rides out an outage shorter than the lease: a handler that checkpoints and finishes meanwhile completes in one run", { timeout: 45_000 }, async () => {
    cluster = await ChaosCluster.open({ url: server.url, schema });
    // A 30 s lease: the outage (8 s) ends before it, so no run is fenced and none needs to run twice.
    const http = { TASKPOOL_URL: httpUrl, TASKPOOL_SCHEMA: "", LEASE_SECONDS: "30", CONCURRENCY: "1" };
    await cluster.startWorker(http, "http-worker");
    const [task] = await cluster.pool.enqueueMany([{ taskType: "step", params: { steps: 1, stepMs: 1500 } }]);
    await eventually(async () => (await cluster!.pool.get(task.task.id))?.status === "running", 10_000, "the task to run");
    shutDown();
    await delay(8000);
    startAgain();
    await eventually(async () => (await cluster!.pool.get(task.task.id))?.status === "completed", 25_000, "the task to complete").catch((error: Error) => {
      throw new Error(`${error.message}\nthe worker's log:\n${cluster!.runtimeLog("http-worker")}`);
    });

    const done = await cluster.pool.get(task.task.id);
    expect(done).toMatchObject({ attempts: 1, workerId: "http-worker", checkpoint: { step: 1 } });
    expect((await cluster.pool.events(task.task.id)).map((e) => e.event)).toEqual(["created", "claimed", "checkpoint", "completed"]);
    expect(cluster.crashed()).toEqual([]);
    const summary = await cluster.check();
    expect(summary.violations).toEqual([]);
  });
});
