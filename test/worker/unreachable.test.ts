import { getEventListeners } from "node:events";
import { expect, it } from "vitest";
import { connect } from "../../src/api/taskpool.js";
import { HttpStore } from "../../src/client/http-store.js";
import { RateLimitedError } from "../../src/core/errors.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { buildServer } from "../../src/server/server.js";
import { Worker } from "../../src/worker/worker.js";
import { withOverrides } from "../helpers/stores.js";
import { captureLogs, eventually } from "../helpers/logs.js";

/** A SQLite store whose `method` fails as an unreachable database does while `outage.down` is set; `outage.failed` counts those calls. */
async function storeWithOutage(method: "claim" | "workerHeartbeat") {
  const store = new SqliteStore({ path: ":memory:" });
  await store.migrate();
  const outage = { down: false, failed: 0 };
  const real = store[method].bind(store) as (...args: unknown[]) => Promise<unknown>;
  const flaky = withOverrides(store, {
    [method]: async (...args: unknown[]) => {
      if (!outage.down) return real(...args);
      outage.failed++;
      throw new Error("network unreachable (simulated)");
    },
  });
  return { store, flaky, outage };
}

it("a worker whose database is unreachable logs, backs off, keeps running and stops cleanly", async () => {
  const store = new PostgresStore({ url: "postgres://postgres@127.0.0.1:1/none", poolSize: 1 });
  const logs = captureLogs();
  const worker = new Worker(store, {
    roles: ["x"],
    handlers: { x: async () => {} },
    pollIntervalMs: 50,
    heartbeatIntervalMs: 50,
    handleSignals: false,
    heartbeatThread: false,
    logger: logs.logger,
  });
  await worker.start();
  await eventually(() => logs.messages().filter((m) => m.startsWith("Claim failed")).length >= 3, 10_000, "three claim failures");
  const messages = logs.messages();
  expect(messages).toContain("Cannot reach the database to register; will keep trying");
  expect(messages).toContain("Heartbeat failed; retrying at the next interval");
  const claims = logs.lines().filter((l) => l.msg.startsWith("Claim failed"));
  // An error once for the outage, then debug lines while it lasts.
  expect(claims.map((l) => [l.level, l.msg.replace(/\d+ ms$/, "N ms")]).slice(0, 3)).toEqual([
    [50, "Claim failed; not claiming for N ms"],
    [20, "Claim failed again; not claiming for N ms"],
    [20, "Claim failed again; not claiming for N ms"],
  ]);
  const delays = claims.map((l) => Number(/for (\d+) ms/.exec(l.msg)?.[1]));
  expect(delays[1]).toBeGreaterThan(delays[0]);
  await worker.stop(0);
  await store.close();
});

it("over HTTP, its log lines name the taskpool server it cannot reach, not a database", async () => {
  const store = new HttpStore("http://127.0.0.1:1", { retryForMs: 0 });
  const logs = captureLogs();
  const worker = new Worker(store, { roles: ["x"], handlers: { x: async () => {} }, pollIntervalMs: 50, heartbeatIntervalMs: 50, handleSignals: false, heartbeatThread: false, logger: logs.logger });
  await worker.start();
  await eventually(() => logs.messages().some((m) => m.startsWith("Claim failed; not claiming for")), 10_000, "a claim failure");
  expect(logs.messages()).toContain("Cannot reach the taskpool server to register; will keep trying");
  await worker.stop(0);
  await store.close();
});

it("heartbeats failing through an outage warn once, then log at debug, and say when they get through again and after how long", async () => {
  const { store, flaky, outage } = await storeWithOutage("workerHeartbeat");
  const logs = captureLogs();
  const worker = new Worker(flaky, { roles: ["x"], handlers: { x: async () => {} }, heartbeatIntervalMs: 20, handleSignals: false, heartbeatThread: false, logger: logs.logger });
  await worker.start();
  outage.down = true;
  await eventually(() => outage.failed >= 6, 10_000, "six failed heartbeats");
  outage.down = false;
  const back = await eventually(() => logs.lines().find((l) => l.msg.startsWith("Heartbeats reach the database again")), 10_000, "a heartbeat to get through");
  await worker.stop(0);
  await store.close();
  const beats = logs.lines().filter((l) => l.msg.startsWith("Heartbeat failed"));
  expect(beats.filter((l) => l.level === 40).map((l) => l.msg)).toEqual(["Heartbeat failed; retrying at the next interval"]);
  expect(beats.filter((l) => l.level === 20).length).toBeGreaterThanOrEqual(5);
  expect(back).toMatchObject({ level: 30, msg: expect.stringMatching(/^Heartbeats reach the database again, after failing for \d+ s$/) });
});

it("claims failing through an outage log an error once, then debug, and say when they get through again and after how long", async () => {
  const { store, flaky, outage } = await storeWithOutage("claim");
  outage.down = true;
  const logs = captureLogs();
  const worker = new Worker(flaky, { roles: ["x"], handlers: { x: async () => {} }, pollIntervalMs: 20, handleSignals: false, heartbeatThread: false, logger: logs.logger });
  await worker.start();
  await eventually(() => outage.failed >= 3, 10_000, "three failed claims");
  outage.down = false;
  const back = await eventually(() => logs.lines().find((l) => l.msg.startsWith("Claims reach the database again")), 10_000, "a claim to get through");
  await worker.stop(0);
  await store.close();
  const claims = logs.lines().filter((l) => l.msg.startsWith("Claim failed"));
  expect(claims.filter((l) => l.level === 50).map((l) => l.msg)).toEqual(["Claim failed; not claiming for 500 ms"]);
  expect(claims.filter((l) => l.level === 20).length).toBeGreaterThanOrEqual(2);
  expect(back).toMatchObject({ level: 30, msg: expect.stringMatching(/^Claims reach the database again, after failing for \d+ s$/) });
});

it("once heartbeats get through again, a claim loop backing off after failed claims claims at once, not after its backoff", async () => {
  const store = new SqliteStore({ path: ":memory:" });
  await store.migrate();
  const outage = { down: false, claimsFailed: 0 };
  const failWhileDown = <A extends unknown[], R>(real: (...args: A) => Promise<R>, counted = false) => async (...args: A) => {
    if (!outage.down) return real(...args);
    if (counted) outage.claimsFailed++;
    throw new Error("network unreachable (simulated)");
  };
  const flaky = withOverrides(store, {
    claim: failWhileDown(store.claim.bind(store), true),
    workerHeartbeat: failWhileDown(store.workerHeartbeat.bind(store)),
    // No wake-ups: the enqueue's notification would otherwise end the backoff as well.
    subscribe: async () => async () => {},
  });
  const logs = captureLogs();
  const started: number[] = [];
  // Polling once a minute and no wake-ups: only the heartbeats' recovery can end the backoff.
  const worker = new Worker(flaky, { roles: ["x"], handlers: { x: async () => void started.push(performance.now()) }, pollIntervalMs: 60_000, heartbeatIntervalMs: 50, handleSignals: false, heartbeatThread: false, logger: logs.logger });
  outage.down = true;
  await worker.start();
  // Five failed claims: 0.5 + 1 + 2 + 4 s of backoff, and the loop now waits 8 s before its next.
  await eventually(() => outage.claimsFailed >= 5, 20_000, "five failed claims");
  await store.enqueue({ taskType: "x" });
  const back = performance.now();
  outage.down = false;
  await eventually(() => started.length > 0, 7000, "the task to start before the 8 s backoff ended");
  expect(started[0] - back).toBeLessThan(7000);
  expect(logs.messages().some((m) => /^Heartbeats reach the database again, after failing for \d+ s$/.test(m))).toBe(true);
  await worker.stop(0);
  await store.close();
}, 30_000);

it("a completion refused by a server's rate limit (429) is sent again once its Retry-After has passed: the task completes once, in its first attempt", async () => {
  const store = new SqliteStore({ path: ":memory:" });
  await store.migrate();
  const refusedAt: number[] = [];
  const completeMany = store.completeMany.bind(store);
  const complete = store.complete.bind(store);
  const limited = () => {
    refusedAt.push(performance.now());
    return new RateLimitedError("Rate limit exceeded: this API key may make 100 requests per minute; retry in 1 s", 1);
  };
  const flaky = withOverrides(store, {
    completeMany: async (items, options) => (refusedAt.length === 0 ? Promise.reject(limited()) : completeMany(items, options)),
    complete: async (id, lease, options) => (refusedAt.length === 0 ? Promise.reject(limited()) : complete(id, lease, options)),
  });
  const { task } = await store.enqueue({ taskType: "x" });
  const logs = captureLogs();
  const worker = new Worker(flaky, { roles: ["x"], handlers: { x: async () => ({ done: true }) }, handleSignals: false, heartbeatThread: false, logger: logs.logger });
  await worker.start();
  try {
    await eventually(async () => (await store.get(task.id))?.status === "completed", 10_000, "the completion");
    // It was dropped as a refusal: the task stayed running until its lease ran out, then ran again.
    expect(await store.get(task.id)).toMatchObject({ status: "completed", attempts: 1, result: { done: true } });
    expect(refusedAt).toHaveLength(1);
    expect(logs.messages().filter((m) => m.startsWith("Could not complete"))).toEqual([]);
  } finally {
    await worker.stop(0);
    await store.close();
  }
});

it("over HTTP, claims refused for a revoked key are each logged as an error, backed off whatever wakes the worker: it does nothing until someone acts", async () => {
  const pool = await connect("sqlite::memory:");
  const app = await buildServer(pool, { auth: "keys", apiKeyCacheMs: 50, rateLimitPerMinute: false, dashboard: false });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  const { key, apiKey } = await pool.createApiKey({ scope: "worker" });
  const remote = await connect(url, { apiKey: key, retryForMs: 0 });
  const logs = captureLogs();
  const worker = remote.worker({ roles: ["x"], handlers: { x: async () => {} }, pollIntervalMs: 20, heartbeatThread: false, logger: logs.logger });
  try {
    await worker.start();
    await pool.revokeApiKey(apiKey.id);
    const refusals = () => logs.lines().filter((l) => l.level === 50 && l.msg.startsWith("Claim refused (unauthorized)"));
    await eventually(() => refusals().length >= 3, 10_000, "three refusals logged");
    // Backed off: 0.5, 1, 2 s…, not a claim per 20 ms poll.
    const [first, , third] = refusals().map((l) => l.time as number);
    expect(third - first).toBeGreaterThanOrEqual(1400);
  } finally {
    await worker.stop(0);
    await remote.close();
    await app.close();
    await pool.close();
  }
});

it("completions retried through an outage leave no listener behind on the worker's signal once they get through", async () => {
  const store = new SqliteStore({ path: ":memory:" });
  await store.migrate();
  let failed = 0;
  const completeMany = store.completeMany.bind(store);
  const flaky = withOverrides(store, {
    completeMany: async (items, options) => (failed++ < 2 ? Promise.reject(new Error("network unreachable (simulated)")) : completeMany(items, options)),
  });
  for (let i = 0; i < 3; i++) await store.enqueue({ taskType: "x" });
  const logs = captureLogs();
  const worker = new Worker(flaky, { roles: ["x"], concurrency: 3, handlers: { x: async () => ({}) }, handleSignals: false, heartbeatThread: false, logger: logs.logger });
  const lastTry = (worker as unknown as { lastTry: AbortController }).lastTry.signal;
  await worker.start();
  try {
    await eventually(async () => (await store.counts()).byStatus.completed === 3, 10_000, "the three completions");
    expect(failed).toBeGreaterThan(2);
    // Each retry's pause listened for the stop's last try; one left per retry, they piled up for the worker's life.
    expect(getEventListeners(lastTry, "abort")).toHaveLength(0);
  } finally {
    await worker.stop(0);
    await store.close();
  }
});
