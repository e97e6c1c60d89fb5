import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, describe, expect, it, type TestContext } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { connect, Taskpool } from "../../src/api/taskpool.js";
import type { Coordinator } from "../../src/coordinator/coordinator.js";
import { buildServer } from "../../src/server/server.js";
import { captureLogs, eventually } from "../helpers/logs.js";
import { createPostgres, PG_URL, type TestStore } from "../helpers/stores.js";
import type { WorkerProcess } from "../process/harness.js";
import { ChaosCluster } from "./cluster.js";
import type { HistoryEntry } from "./history.js";
import { CHAOS_COORDINATION, report } from "./settings.js";
import { TcpProxy } from "./tcp-proxy.js";

/**
 * Scenario 4, network partitions, on PostgreSQL. A worker is cut off from the rest mid-task: the
 * coordinator declares it dead, its tasks are claimed by a worker elsewhere and completed (from its
 * checkpoints); then the network comes back and everything the cut-off worker sends under its old
 * leases must be refused, and its handlers aborted (lease_lost). Two ways to cut:
 *
 *   - a worker in a network namespace of its own, reaching a taskpool HTTP server (started here,
 *     listening on the host end of a veth pair, 10.213.x.1/30) over that link; the link is set down,
 *     then up;
 *   - a half-open connection: a worker reaching PostgreSQL through a TCP proxy that stops forwarding
 *     without closing anything, then delivers what it held.
 */
const ip = (...args: string[]) => execFileSync("ip", args, { stdio: "pipe" }).toString();

/** Whether this machine lets the test make network namespaces (root, or CAP_NET_ADMIN). */
function netnsPermitted(): boolean {
  const probe = `tp-probe-${randomBytes(3).toString("hex")}`;
  try {
    ip("netns", "add", probe);
    ip("netns", "del", probe);
    return true;
  } catch {
    return false;
  }
}

const TASK = { steps: 30, stepMs: 100 };

/**
 * The run both ways share: `isolated` holds two tasks mid-way; `cut()`; they are recovered and
 * completed by a worker elsewhere; `heal()`; the isolated worker's handlers must abort with
 * lease_lost and none of its writes sent after the cut may be accepted. Then the history is checked
 * and its figures reported as `scenario`.
 */
async function cutOff(cluster: ChaosCluster, isolated: WorkerProcess, cut: () => void, heal: () => void, scenario: string): Promise<void> {
  const tasks = await cluster.pool.enqueueMany([0, 1].map(() => ({ taskType: "step", params: TASK, maxAttempts: 50 })));
  const ids = tasks.map((t) => t.task.id);
  const held = await eventually(async () => {
    const running = (await cluster.pool.list({ workerId: isolated.id, status: "running" })).tasks;
    return running.length === 2 && running.every((t) => t.checkpoint !== null) ? running : null;
  }, 30_000, `${isolated.id} to run both tasks`);
  const tokens = new Map(held.map((t) => [t.id, t.leaseToken as string]));
  // Cut at once, and only then start the worker elsewhere: its start (up to 4 s on a loaded machine)
  // outlasted the tasks' 3 s, so the isolated worker had finished them before the cut.
  cut();
  // Taken once the cut is in force: a write sent a moment before could still reach the server, be
  // accepted under a lease that was valid, and have its answer held by the link until the heal.
  const cutAt = Date.now();
  await cluster.startWorker({ CONCURRENCY: "2" }, "elsewhere");
  await eventually(async () => {
    for (const id of ids) {
      const events = await cluster.pool.events(id);
      if (!events.some((e) => e.event === "completed" && e.fromWorkerId === "elsewhere")) return false;
    }
    return true;
  }, 30_000, "the cut-off worker's tasks to be completed elsewhere");
  const partitionMs = Date.now() - cutAt;
  heal();
  const lines = async () => (await cluster.history()).log.filter((e) => e.worker === isolated.id && tokens.get(e.taskId) === (e as { token?: string }).token);
  const aborted = await eventually(async () => {
    const stopped = (await lines()).filter((e): e is Extract<HistoryEntry, { kind: "aborted" }> => e.kind === "aborted");
    return stopped.length === 2 ? stopped : null;
  }, 30_000, `the handlers of ${isolated.id} to abort once the network is back`);
  expect(aborted.map((a) => a.reason)).toEqual(["lease_lost", "lease_lost"]);
  const late = (await lines()).filter((e): e is Extract<HistoryEntry, { kind: "write" }> => e.kind === "write" && e.sentAt >= cutAt);
  expect(late.filter((e) => e.ok === true)).toEqual([]);
  await cluster.drained(30_000);
  const summary = await cluster.check();
  report(scenario, { lateWrites: late.length, lateRefused: late.filter((e) => e.ok === false).length, partitionMs, ...summary });
  expect(summary.violations.slice(0, 20)).toEqual([]);
  expect(summary.completed).toBe(2);
  expect(cluster.crashed()).toEqual([]);
}

/**
 * What one test opened, closed when it ends: the tests of a group run side by side (most of their
 * time is spent waiting out timeouts on silent connections), so each keeps its own.
 */
class Opened {
  handle: TestStore | null = null;
  cluster: ChaosCluster | null = null;
  coordinator: Coordinator | null = null;
  readonly cleanups: (() => Promise<void> | void)[] = [];

  constructor(onTestFinished: TestContext["onTestFinished"]) {
    onTestFinished(() => this.close());
  }

  async postgres(): Promise<TestStore> {
    return (this.handle = await createPostgres());
  }

  /** A chaos cluster on a schema of its own, with a coordinator leading. */
  async start(): Promise<ChaosCluster> {
    const cluster = (this.cluster = await ChaosCluster.open(await this.postgres()));
    this.coordinator = cluster.pool.coordinator(CHAOS_COORDINATION);
    this.coordinator.start();
    return cluster;
  }

  /** A TCP proxy in front of PostgreSQL, closed after the test, and the database URL through it. */
  async proxyToPostgres(): Promise<{ proxy: TcpProxy; url: string }> {
    const target = new URL(PG_URL);
    const proxy = await TcpProxy.start(target.hostname, Number(target.port || 5432));
    this.cleanups.push(() => proxy.close());
    const through = new URL(PG_URL);
    through.hostname = "127.0.0.1";
    through.port = String(proxy.port);
    return { proxy, url: through.toString() };
  }

  private async close(): Promise<void> {
    await this.coordinator?.stop();
    await this.cluster?.close();
    for (const c of this.cleanups.splice(0).reverse()) {
      try {
        await c();
      } catch {
        /* already gone */
      }
    }
    await this.handle?.cleanup();
  }
}

describe("network partitions on postgres", () => {
  // Whatever happened, no namespace or link of ours is left behind.
  const namespaces = new Set<string>();
  afterAll(() => {
    for (const ns of namespaces) {
      try {
        ip("netns", "del", ns);
      } catch {
        /* already gone */
      }
    }
  });

  // Workers (processes and in-process) that lose their database or server, or one of its connections:
  // the pool or the listener must notice and carry on. None is held to a tight time bound.
  describe("cut off, or one connection gone silent", () => {
    const netns = netnsPermitted();
    const netnsTitle = "a worker in its own network namespace, cut off from the HTTP server: recovered elsewhere, its late writes refused";
    it.skipIf(!netns).concurrent(netns ? netnsTitle : `${netnsTitle} (SKIPPED: \`ip netns add\` is not permitted here; it needs root or CAP_NET_ADMIN)`, { timeout: 90_000 }, async ({ onTestFinished }) => {
      const opened = new Opened(onTestFinished);
      const c = await opened.start();
      const tag = randomBytes(3).toString("hex");
      const ns = `tp-part-${tag}`;
      const [hostEnd, nsEnd] = [`tph${tag}`, `tpn${tag}`];
      const subnet = `10.213.${1 + (parseInt(tag, 16) % 250)}`;
      namespaces.add(ns);
      ip("netns", "add", ns);
      // Deleting the namespace deletes its end of the pair, and with it the host's.
      opened.cleanups.push(() => {
        ip("netns", "del", ns);
        namespaces.delete(ns);
      });
      ip("link", "add", hostEnd, "type", "veth", "peer", "name", nsEnd);
      // Gone with the namespace once its peer is in there; not if a step below failed first.
      opened.cleanups.push(() => void ip("link", "del", hostEnd));
      ip("link", "set", nsEnd, "netns", ns);
      ip("addr", "add", `${subnet}.1/30`, "dev", hostEnd);
      ip("link", "set", hostEnd, "up");
      ip("-n", ns, "addr", "add", `${subnet}.2/30`, "dev", nsEnd);
      ip("-n", ns, "link", "set", nsEnd, "up");
      ip("-n", ns, "link", "set", "lo", "up");

      const app = await buildServer(new Taskpool(new CheckedStore(opened.handle!.store), null), { auth: "none", rateLimitPerMinute: false, dashboard: false, longPollRecheckMs: 100 });
      const url = await app.listen({ host: `${subnet}.1`, port: 0 });
      opened.cleanups.push(() => app.close());
      const isolated = await c.startWorker({ CONCURRENCY: "2", TASKPOOL_URL: url, TASKPOOL_SCHEMA: "" }, "isolated", ["ip", "netns", "exec", ns]);

      await cutOff(c, isolated, () => ip("link", "set", hostEnd, "down"), () => ip("link", "set", hostEnd, "up"), "partition: network namespace, link down");
    });

    it.concurrent("a half-open connection to PostgreSQL (a proxy that stops forwarding without closing): recovered elsewhere, late writes refused", { timeout: 90_000 }, async ({ onTestFinished }) => {
      const opened = new Opened(onTestFinished);
      const c = await opened.start();
      const { proxy, url } = await opened.proxyToPostgres();
      const isolated = await c.startWorker({ CONCURRENCY: "2", TASKPOOL_URL: url }, "isolated");

      await cutOff(c, isolated, () => proxy.freeze(), () => proxy.thaw(), "partition: half-open connection to PostgreSQL");
    });

    // A connection that goes silent without closing (new ones would work): the store's query timeout
    // (a second past the statement timeout: 3 s here) fails the call and discards the connection, and
    // the worker claims again on a fresh one.
    it.concurrent("a worker whose PostgreSQL connections go silent (new ones would work) claims again", { timeout: 60_000 }, async ({ onTestFinished }) => {
      const opened = new Opened(onTestFinished);
      const c = await opened.start();
      const { proxy, url } = await opened.proxyToPostgres();
      await c.startWorker({ CONCURRENCY: "2", TASKPOOL_URL: url, STATEMENT_TIMEOUT_MS: "2000" }, "isolated");
      await c.pool.enqueue("step", { steps: 1, stepMs: 10 });
      await eventually(async () => (await c.pool.counts()).byStatus.completed === 1, 20_000, "a first task done");
      proxy.freeze({ existingOnly: true });
      const later = await c.pool.enqueue("step", { steps: 1, stepMs: 10 });
      // Each pooled connection the worker had is silent and costs one timeout before it is dropped.
      await eventually(async () => (await c.pool.get(later.id))?.workerId === "isolated", 45_000, "the worker to claim again");
    });

    // A LISTEN connection never sends, so one gone silent went unnoticed for good: no wake-up came
    // again (workers fell back to their poll, HTTP long-polls to their re-check) while every query ran.
    it.concurrent("a LISTEN connection that goes silent (new ones would work) is replaced: wake-ups resume", { timeout: 40_000 }, async ({ onTestFinished }) => {
      const opened = new Opened(onTestFinished);
      const c = await opened.start();
      const { proxy, url } = await opened.proxyToPostgres();
      const through = await connect(url, { schema: opened.handle!.schema, migrate: false });
      opened.cleanups.push(() => through.close());
      let heard = 0;
      await through.protocol.subscribe(() => heard++);
      await c.pool.enqueue("listen_probe", {});
      await eventually(() => heard > 0, 5_000, "a first wake-up");
      proxy.freeze({ existingOnly: true });
      const frozenAt = Date.now();
      heard = 0;
      await eventually(
        async () => {
          await c.pool.enqueue("listen_probe", {});
          await new Promise((resolve) => setTimeout(resolve, 250));
          return heard > 0;
        },
        25_000,
        "a wake-up after the LISTEN connection went silent",
      );
      report("partition: silent LISTEN connection", { resumedAfterMs: Date.now() - frozenAt });
    });
  });

  // Silent connections, each waited out to its timeout, and the times bounded: side by side (each
  // waits on timers of its own), once the processes above are gone.
  describe("a database that does not answer, in bounded time", () => {
    it.concurrent("a LISTEN left unanswered holds neither a worker's start nor its wake-ups for good, and a silent LISTEN connection does not hold its close", { timeout: 60_000 }, async ({ onTestFinished }) => {
      const opened = new Opened(onTestFinished);
      const handle = await opened.postgres();
      const { proxy, url } = await opened.proxyToPostgres();
      opened.cleanups.push(() => proxy.thaw());
      const pool = await connect(url, { schema: handle.schema, migrate: false, statementTimeoutMs: 2000 });
      let closed = false;
      opened.cleanups.push(() => (closed ? undefined : pool.close()));
      const ran: number[] = [];
      // Polling once a minute: a task run within seconds was woken by a notification.
      const worker = pool.worker({ roles: ["probe"], handlers: { probe: async (_params, ctx) => void ran.push(ctx.task.id) }, pollIntervalMs: 60_000, heartbeatThread: false, lastCallsMs: 2000, logger: captureLogs().logger });
      proxy.freezeOn("LISTEN");
      const startedAt = Date.now();
      await worker.start();
      const startSeconds = (Date.now() - startedAt) / 1000;
      expect(startSeconds).toBeLessThan(15);
      // The route heals for new connections: the listener, retrying, listens again, and says so to the
      // worker, which claims what came meanwhile (enqueued before it listened: no notification reaches it).
      proxy.freezeOn(null);
      const task = await pool.enqueue("probe", {});
      const enqueuedAt = Date.now();
      await eventually(() => ran.includes(task.id), 40_000, "the task to run, woken by the listener once it listens again");
      const wokenSeconds = (Date.now() - enqueuedAt) / 1000;
      expect(wokenSeconds).toBeLessThan(30);
      // Its connection goes silent just before the close: ending it waited for a goodbye that never came.
      proxy.freeze({ existingOnly: true });
      const closingAt = Date.now();
      closed = true;
      await pool.close();
      const closeSeconds = (Date.now() - closingAt) / 1000;
      expect(closeSeconds).toBeLessThan(20);
      report("partition: unanswered LISTEN", { startSeconds, wokenSeconds, closeSeconds });
    });

    // Opening a connection had no time limit: behind an address that swallows packets every request
    // (readiness checks included) hung until the client gave up, and went on hanging.
    it.concurrent("a scrape while the database hangs answers taskpool_database_up 0 within Prometheus' 10 s, with a key whose cached lookup ran out", { timeout: 40_000 }, async ({ onTestFinished }) => {
      const opened = new Opened(onTestFinished);
      const handle = await opened.postgres();
      const { proxy, url } = await opened.proxyToPostgres();
      const pool = await connect(url, { schema: handle.schema, migrate: false });
      opened.cleanups.push(() => pool.close());
      const app = await buildServer(pool, { auth: "keys", apiKeyCacheMs: 100, rateLimitPerMinute: false, dashboard: false });
      const httpUrl = await app.listen({ host: "127.0.0.1", port: 0 });
      opened.cleanups.push(() => app.close());
      opened.cleanups.push(() => proxy.thaw());
      const { key } = await pool.createApiKey({ scope: "producer" });
      const scrape = () => fetch(`${httpUrl}/metrics`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(30_000) });
      expect((await scrape()).status).toBe(200);
      // The connections the pool holds go silent: each statement on them waits for its 10 s timeout.
      proxy.freeze();
      await delay(300);
      // Two Prometheus replicas, or a scrape retried: they overlap. Queued, each waited out its own deadline.
      const timed = async () => {
        const scrapedAt = Date.now();
        const answer = await scrape();
        return { status: answer.status, text: await answer.text(), seconds: (Date.now() - scrapedAt) / 1000 };
      };
      const scrapes = await Promise.all([timed(), delay(1000).then(timed), delay(2000).then(timed)]);
      for (const during of scrapes) {
        expect(during.status).toBe(200);
        expect(during.text).toMatch(/^taskpool_database_up 0$/m);
        expect(during.seconds).toBeLessThan(9);
      }
      report("partition: scrapes while the database hangs", { seconds: scrapes.map((s) => s.seconds) });
    });

    it.concurrent("a sweep on a connection gone silent fails at the statement timeout, not hangs, and does not wait again for its rollback", { timeout: 40_000 }, async ({ onTestFinished }) => {
      const opened = new Opened(onTestFinished);
      const handle = await opened.postgres();
      const { proxy, url } = await opened.proxyToPostgres();
      const pool = await connect(url, { schema: handle.schema, migrate: false, statementTimeoutMs: 4000 });
      opened.cleanups.push(() => pool.close());
      opened.cleanups.push(() => proxy.thaw());
      const sweep = { staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 };
      // A connection in the pool, idle: the next sweep takes it and sends its BEGIN into the silence.
      await pool.protocol.sweep(sweep);
      proxy.freeze();
      const sweptAt = Date.now();
      const outcome = await pool.protocol.sweep(sweep).then(() => "answered", (error: Error) => error.message);
      const seconds = (Date.now() - sweptAt) / 1000;
      expect(outcome).toMatch(/timeout/i);
      // One statement's limit (5 s on a silent connection: pg's own, a second past the statement timeout):
      // a ROLLBACK queued behind it waited as long again.
      expect(seconds).toBeGreaterThanOrEqual(4.9);
      expect(seconds).toBeLessThan(8);
      report("partition: sweep on a silent connection", { seconds });
    });

    it.concurrent("a server closing while its database hangs stops its coordinator at once, beside the requests in flight, not after them", { timeout: 60_000 }, async ({ onTestFinished }) => {
      const opened = new Opened(onTestFinished);
      const handle = await opened.postgres();
      const { proxy, url } = await opened.proxyToPostgres();
      const pool = await connect(url, { schema: handle.schema, migrate: false });
      opened.cleanups.push(() => pool.close());
      const logs = captureLogs();
      const app = await buildServer(pool, { auth: "none", rateLimitPerMinute: false, dashboard: false, runCoordinator: true, coordinator: { sweepIntervalMs: 300 }, logger: logs.logger });
      const httpUrl = await app.listen({ host: "127.0.0.1", port: 0 });
      opened.cleanups.push(() => proxy.thaw());
      await eventually(async () => logs.messages().some((m) => m.startsWith("Leading")), 10_000, "the coordinator to lead");
      proxy.freeze();
      // A request in flight holds the close for up to a statement's 11 s (pg's limit on a silent
      // connection); the coordinator's ticks went on meanwhile. After them, its sweep waited as long again.
      const inFlight = fetch(`${httpUrl}/api/tasks/counts`, { signal: AbortSignal.timeout(30_000) }).catch(() => null);
      await delay(500);
      const closingAt = Date.now();
      await app.close();
      const seconds = (Date.now() - closingAt) / 1000;
      await inFlight;
      expect(seconds).toBeLessThan(16);
      expect(logs.messages()).toContain("Coordinator stopped; leadership not handed back (the database did not answer): another coordinator leads once its lease runs out");
      report("partition: server closing while the database hangs", { seconds });
    });

    it.concurrent("a server whose database address accepts and never answers: requests answer 503 database_unavailable in bounded time, not hang", { timeout: 40_000 }, async ({ onTestFinished }) => {
      const opened = new Opened(onTestFinished);
      const handle = await opened.postgres();
      const { proxy, url } = await opened.proxyToPostgres();
      const pool = await connect(url, { schema: handle.schema, migrate: false, statementTimeoutMs: 2000 });
      opened.cleanups.push(() => pool.close());
      const app = await buildServer(pool, { auth: "none", rateLimitPerMinute: false, dashboard: false });
      const httpUrl = await app.listen({ host: "127.0.0.1", port: 0 });
      opened.cleanups.push(() => app.close());
      // Undone first: a request still waiting on the frozen address would hold app.close().
      opened.cleanups.push(() => proxy.thaw());
      proxy.freeze();
      const call = (path: string, body?: unknown) =>
        fetch(`${httpUrl}${path}`, body === undefined ? { signal: AbortSignal.timeout(25_000) } : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: AbortSignal.timeout(25_000) });
      // A load balancer's probe gives up after a few seconds: readiness is said within 2 s, not at the statement's limit.
      const probedAt = Date.now();
      expect((await call("/readyz")).status).toBe(503);
      expect(Date.now() - probedAt).toBeLessThan(4000);
      const startedAt = Date.now();
      const replies = await Promise.all([
        call("/api/tasks", { task_type: "a", params: {} }),
        call("/api/tasks/claim", { worker_id: "w1" }),
        call("/api/workers/heartbeat", { worker_id: "w1", roles: ["a"], capacity: 1, current_load: 0, tasks_processed: 0 }),
        call("/api/tasks/counts"),
        call("/readyz"),
      ]);
      const seconds = (Date.now() - startedAt) / 1000;
      expect(replies.map((r) => r.status)).toEqual([503, 503, 503, 503, 503]);
      expect(await replies[0].json()).toMatchObject({ error: "database_unavailable" });
      report("partition: database address that never answers", { seconds });
    });
  });
});
