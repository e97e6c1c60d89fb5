/**
 * Worker processes that talk only HTTP (`connect("http://…", { apiKey })`) to a real server on a
 * random port, with a worker-scoped key: real work with checkpoints, a SIGKILL mid-task, the task
 * recovered by the coordinator beside the server and resumed elsewhere from its checkpoint, and the
 * dead worker's lease refused over HTTP.
 */
import { createServer } from "node:http";
import type { FastifyInstance } from "fastify";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { Taskpool } from "../../src/api/taskpool.js";
import { HttpStore } from "../../src/client/http-store.js";
import { LeaseLostError } from "../../src/core/errors.js";
import { buildServer } from "../../src/server/server.js";
import { eventually } from "../helpers/logs.js";
import { createPostgres, createSqlite, type TestStore } from "../helpers/stores.js";
import { killAll, startWorker, type WorkerProcess } from "./harness.js";

const silent = (await import("pino")).pino({ level: "silent" });

describe.each([
  ["postgres", createPostgres],
  ["sqlite", createSqlite],
] as const)("HTTP worker processes, server on %s", (_name, create) => {
  let handle: TestStore;
  let pool: Taskpool;
  let app: FastifyInstance;
  let url: string;
  let key: string;
  const procs: WorkerProcess[] = [];
  beforeEach(async () => {
    handle = await create();
    pool = new Taskpool(new CheckedStore(handle.store), null);
    key = (await pool.createApiKey({ scope: "worker", name: "http workers", rateLimitPerMinute: 100_000 })).key;
    app = await buildServer(pool, {
      dashboard: false,
      runCoordinator: true,
      coordinator: { sweepIntervalMs: 200, staleAfterMs: 1000, deadAfterMs: 2000, reservationMs: 10_000, logger: silent },
    });
    url = await app.listen({ host: "127.0.0.1", port: 0 });
  });
  afterEach(async () => {
    await killAll(procs.splice(0));
    await app.close();
    await handle.cleanup();
  });

  const worker = async (id: string, env: Record<string, string>) => {
    const p = await startWorker({ url, schema: undefined }, id, { TASKPOOL_API_KEY: key, ...env });
    procs.push(p);
    return p;
  };

  it("SIGKILL mid-task: recovered beside the server, resumed from the checkpoint over HTTP, completed once; the dead lease is refused", async () => {
    const { task } = await handle.store.enqueue({ taskType: "crawl", params: { pages: 60 } });
    const victim = await worker("http-victim", { WORKER_ROLE: "crawl", PAGE_MS: "150" });
    await victim.waitFor({ event: "page", page: 2 });
    const held = (await pool.get(task.id))!;
    expect(held).toMatchObject({ status: "running", workerId: "http-victim" });
    const heir = await worker("http-heir", { WORKER_ROLE: "crawl", PAGE_MS: "5" });

    victim.child.kill("SIGKILL");
    const resumed = await heir.waitFor({ event: "start", taskId: task.id });
    expect(resumed.attempt).toBe(2);
    const from = (resumed.checkpoint as { page: number }).page;
    expect(from).toBeGreaterThanOrEqual(2);
    await eventually(async () => (await pool.get(task.id))?.status === "completed", 20_000, "completion");
    expect(await pool.get(task.id)).toMatchObject({ attempts: 2, workerId: "http-heir", result: { pages: 60, resumedFrom: from } });
    expect((await pool.workers()).workers.find((w) => w.workerId === "http-victim")?.status).toBe("dead");
    const story = (await pool.events(task.id)).map((e) => e.event).filter((e) => e !== "checkpoint");
    expect(story).toEqual(["created", "claimed", "requeued", "reassigned", "claimed", "completed"]);

    // The dead worker's lease, presented over HTTP after its successor finished: refused, nothing changes.
    const zombie = new HttpStore(url, { apiKey: key });
    await expect(zombie.complete(task.id, { workerId: "http-victim", leaseToken: held.leaseToken! }, { result: { forged: true } })).rejects.toBeInstanceOf(LeaseLostError);
    await expect(zombie.checkpoint(task.id, { workerId: "http-victim", leaseToken: held.leaseToken! }, { page: 0 })).rejects.toBeInstanceOf(LeaseLostError);
    await zombie.close();
    expect((await pool.get(task.id))?.result).toEqual({ pages: 60, resumedFrom: from });
  });

  // A worker whose claims failed while the server was away sat out its claim backoff (up to 30 s)
  // after the server was back, though its wake-up subscription had reconnected: a reconnected wait
  // only speaks when new work is announced, and what happened during the gap never is.
  it("a wake-up subscription that lost the server says 're-check' ([]) as soon as the server answers again", async () => {
    const { port } = new URL(url);
    await app.close();
    // In the server's place meanwhile: something answering 503 (a proxy with no server behind it), so the test sees the wait fail.
    let refused = 0;
    const standIn = createServer((_request, response) => {
      refused++;
      response.writeHead(503, { "content-type": "application/json" }).end('{"success":false,"error":"unavailable","message":"restarting"}');
    });
    await new Promise<void>((resolve) => standIn.listen(Number(port), "127.0.0.1", resolve));
    const client = new HttpStore(url, { apiKey: key, retryForMs: 0 });
    const heard: string[][] = [];
    const unsubscribe = await client.subscribe((types) => heard.push(types));
    try {
      await eventually(() => refused >= 1, 10_000, "a wait to be refused");
      await new Promise((resolve) => standIn.close(resolve));
      app = await buildServer(pool, { dashboard: false });
      await app.listen({ host: "127.0.0.1", port: Number(port) });
      await eventually(() => heard.length > 0, 10_000, "the subscription to report the server back");
      expect(heard).toEqual([[]]);
    } finally {
      await unsubscribe();
      await client.close();
      standIn.close();
    }
  });

  it("runs many tasks over HTTP with batched completions and wakes at once when work arrives", async () => {
    const w = await worker("http-many", { WORKER_ROLE: "crawl", CONCURRENCY: "8", PAGE_MS: "1", POLL_INTERVAL_MS: "60000" });
    // Polling every minute: only the wake-up (POST /api/tasks/wait) can start these promptly.
    const started = Date.now();
    await pool.enqueueMany(Array.from({ length: 40 }, () => ({ taskType: "crawl", params: { pages: 2 } })));
    // The handlers first (the wake-up's part), then the completions they sent, so that a failure says which.
    await eventually(() => w.lines.filter((l) => l.event === "done").length >= 40, 20_000, "the worker to run 40 tasks");
    expect(Date.now() - started).toBeLessThan(15_000);
    let seen = {};
    await eventually(async () => (seen = (await pool.counts()).byStatus).completed === 40, 10_000, "40 completions").catch((error: Error) => {
      throw new Error(`${error.message}; the counts said ${JSON.stringify(seen)}`);
    });
    expect((await pool.list({ status: "completed" }, { limit: 100 })).tasks).toHaveLength(40);
    expect(w.lines.filter((l) => l.event === "done")).toHaveLength(40);
  });
});

describe.each([
  ["postgres", createPostgres],
  ["sqlite", createSqlite],
] as const)("the HTTP client's enqueues, when the server on %s resets the connection after writing", (_name, create) => {
  // A server killed while handling a request resets a kept-alive connection just as one closing an
  // idle socket does (the race Node documents retrying). Sent again without more, a create the server
  // had written was made twice (a server SIGKILLed and restarted in 2 s doubled 7 tasks of 150); so
  // the client gave up with "maybe applied". Every enqueue now carries an idempotency key, so it is
  // sent again and the server answers the first write's tasks.
  let handle: TestStore;
  let app: FastifyInstance;
  let client: HttpStore;
  /** Each enqueue request: its path and Idempotency-Key; the first of each path is cut after the write. */
  const received: { url: string; key: string | undefined }[] = [];
  beforeEach(async () => {
    received.length = 0;
    handle = await create();
    app = await buildServer(new Taskpool(new CheckedStore(handle.store), null), { auth: "none", dashboard: false, rateLimitPerMinute: false });
    app.addHook("onSend", async (request, _reply, payload) => {
      if (request.method !== "POST" || !request.url.startsWith("/api/tasks")) return payload;
      const key = request.headers["idempotency-key"] as string | undefined;
      received.push({ url: request.url, key });
      // The tasks are committed; the answer never leaves: the socket is reset as a killed server's is.
      if (received.filter((r) => r.url === request.url).length === 1) request.raw.socket.resetAndDestroy();
      return payload;
    });
    const url = await app.listen({ host: "127.0.0.1", port: 0 });
    client = new HttpStore(url);
    await client.migrate(); // a first request, so that the enqueue goes on a kept-alive socket
  });
  afterEach(async () => {
    await client.close();
    await app.close();
    await handle.cleanup();
  });

  it("sends an enqueue again with the same idempotency key; the task exists once and the answer is the first write's", async () => {
    const answer = await client.enqueue({ taskType: "once", params: { n: 1 } });
    expect(received.map((r) => r.url)).toEqual(["/api/tasks", "/api/tasks"]);
    expect(received[0].key).toMatch(/^[0-9a-f-]{36}$/);
    expect(received[1].key).toBe(received[0].key);
    const { tasks } = await handle.store.list({}, { limit: 10 });
    expect(tasks.map((t) => t.id)).toEqual([answer.task.id]);
    expect(answer).toMatchObject({ created: false, replayed: true, task: { taskType: "once", params: { n: 1 } } });
  });

  it("does the same for a batch, and keeps a key the caller gave", async () => {
    const answer = await client.enqueueMany([{ taskType: "a" }, { taskType: "b" }, { taskType: "c" }], { idempotencyKey: "import-2026-11-25" });
    expect(received).toEqual([
      { url: "/api/tasks/batch", key: "import-2026-11-25" },
      { url: "/api/tasks/batch", key: "import-2026-11-25" },
    ]);
    const { tasks } = await handle.store.list({}, { limit: 10, order: "oldest" });
    expect(tasks.map((t) => t.id)).toEqual(answer.map((r) => r.task.id));
    expect(tasks.map((t) => t.taskType)).toEqual(["a", "b", "c"]);
  });

  it("gives each call its own key: two calls of the same task make two tasks", async () => {
    const first = await client.enqueue({ taskType: "twice" });
    const second = await client.enqueue({ taskType: "twice" });
    expect(second.created).toBe(true);
    expect(second.task.id).not.toBe(first.task.id);
    expect(new Set(received.map((r) => r.key)).size).toBe(2);
  });
});
