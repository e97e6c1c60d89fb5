import { spawnSync } from "node:child_process";
import { hostname } from "node:os";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { Taskpool } from "../../src/api/taskpool.js";
import { HttpStore } from "../../src/client/http-store.js";
import { buildServer } from "../../src/server/server.js";
import { ServerUnreachableError } from "../../src/client/errors.js";
import { RateLimitedError } from "../../src/core/errors.js";
import type { Store } from "../../src/store/store.js";
import { UNKNOWN_TO_ITS_WORKER } from "../../src/core/worker.js";
import type { WorkerOptions } from "../../src/worker/options.js";
import { NonRetryableError, Worker, WorkerStoppingError } from "../../src/worker/worker.js";
import { captureLogs, eventually } from "../helpers/logs.js";
import { postgresKind, SpareSchemas, sqliteKind, type TestStore, withOverrides } from "../helpers/stores.js";

describe.each([postgresKind, sqliteKind])("worker runtime on $name", (kind) => {
  let handle: TestStore;
  let store: Store;
  const workers: Worker[] = [];
  // A schema goes back emptied once its workers are stopped and its stores closed: a write that
  // comes late fails on the closed store rather than landing in the next test's schema.
  const spares = new SpareSchemas();
  afterAll(() => spares.dropAll());
  beforeEach(async () => {
    handle = await kind.create({ spares });
    store = new CheckedStore(handle.store);
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop(0)));
    await handle.cleanup();
  });

  /** A worker on the store, or on `through` (the store with some calls overridden, whose thread could not share them). */
  const startWorker = async (options: Partial<WorkerOptions> & Pick<WorkerOptions, "handlers">, through = store) => {
    const logs = captureLogs();
    const worker = new Worker(
      through,
      // In-process heartbeats keep these tests fast; the heartbeat thread has its own tests (test/process/).
      { roles: Object.keys(options.handlers), pollIntervalMs: 100, heartbeatIntervalMs: 100, handleSignals: false, heartbeatThread: false, logger: logs.logger, ...options },
      through === store ? { url: handle.url, schema: handle.schema } : null,
    );
    workers.push(worker);
    await worker.start();
    return { worker, logs };
  };
  const settled = (id: number, status = "completed") => eventually(async () => (await store.get(id))?.status === status, 10_000, `task ${id} ${status}`);

  it("runs handlers concurrently up to its capacity and stores their results", async () => {
    let running = 0;
    let peak = 0;
    const tasks = (await store.enqueueMany(Array.from({ length: 12 }, (_, i) => ({ taskType: "square", params: { n: i } })))).map((r) => r.task);
    const { logs } = await startWorker({
      concurrency: 4,
      handlers: {
        async square(params, ctx) {
          running++;
          peak = Math.max(peak, running);
          await new Promise((r) => setTimeout(r, 30));
          running--;
          return { square: (params.n as number) ** 2, attempt: ctx.attempt };
        },
      },
    });
    for (const t of tasks) await settled(t.id);
    expect((await store.get(tasks[3].id))?.result).toEqual({ square: 9, attempt: 1 });
    expect(peak).toBe(4);
    expect(logs.messages()).toContain(`Claimed task ${tasks[0].id} (square)`);
    expect(logs.messages()).toContain(`Task ${tasks[0].id} completed`);
    const [registered] = (await store.listWorkers()).workers;
    expect(registered).toMatchObject({ capacity: 4, roles: ["square"], status: "active", pid: process.pid });
  });

  it("warns at its start of handlers its roles leave out: their tasks are never claimed here", async () => {
    const { logs } = await startWorker({ roles: ["crawl"], handlers: { async crawl() {}, async parse() {} } });
    expect(logs.lines().filter((l) => l.level === 40).map((l) => l.msg)).toEqual([
      "Handlers for parse will not run here: not among this worker's roles (crawl); add them to roles to claim their tasks",
    ]);
    const quiet = await startWorker({ handlers: { async crawl() {} } });
    expect(quiet.logs.lines().filter((l) => l.level === 40)).toEqual([]);
  });

  it("warns at its start of heartbeats as far apart as a coordinator's default stale_after or dead_after", async () => {
    // A worker beating every 120 s or more is declared dead between beats by a coordinator at its
    // defaults, again and again: each of its tasks taken back, the result discarded, and nothing said why.
    const warnings = async (heartbeatIntervalMs: number) => (await startWorker({ heartbeatIntervalMs, handlers: { async crawl() {} } })).logs.lines().filter((l) => l.level === 40).map((l) => l.msg);
    expect(await warnings(200_000)).toEqual([
      "Heartbeats every 200 s: a coordinator at its default dead_after (120 s) declares this worker dead between its beats and takes its tasks back, discarding their results. " +
        "Beat more often (heartbeatIntervalMs, HEARTBEAT_INTERVAL_MS), or run every coordinator and server with --stale-after and --dead-after above two intervals (400000 ms)",
    ]);
    expect(await warnings(120_000)).toHaveLength(1);
    expect(await warnings(90_000)).toEqual([
      "Heartbeats every 90 s: a coordinator at its default stale_after (60 s) marks this worker stale between its beats, and gives it no dead worker's task meanwhile. " +
        "Beat more often (heartbeatIntervalMs, HEARTBEAT_INTERVAL_MS), or run every coordinator and server with --stale-after above two intervals (180000 ms)",
    ]);
    expect(await warnings(59_999)).toEqual([]);
  });

  it("gives each run a logger bound to its task, made only when something logs", async () => {
    const [quiet, chatty] = (await store.enqueueMany([{ taskType: "quiet" }, { taskType: "chatty" }])).map((r) => r.task);
    const { logs } = await startWorker({
      handlers: {
        async quiet() {},
        async chatty(_params, ctx) {
          ctx.logger.info("from the handler");
        },
      },
    });
    await settled(quiet.id);
    await settled(chatty.id);
    expect(logs.lines().find((l) => l.msg === "from the handler")).toMatchObject({ taskId: chatty.id, taskType: "chatty" });
    // At debug level the worker's own per-task lines carry the task too, whichever run made the logger.
    expect(logs.lines().find((l) => l.msg === `Task ${quiet.id} completed`)).toMatchObject({ taskId: quiet.id, taskType: "quiet" });
    expect(logs.lines().find((l) => l.msg === `Task ${chatty.id} completed`)).toMatchObject({ taskId: chatty.id, taskType: "chatty" });
  });

  it("retries a failed handler, which resumes from its checkpoint with the next attempt number", async () => {
    const { task } = await store.enqueue({ taskType: "crawl", backoff: { baseSeconds: 0 } });
    const seen: { attempt: number; checkpoint: unknown }[] = [];
    await startWorker({
      handlers: {
        async crawl(_params, ctx) {
          seen.push({ attempt: ctx.attempt, checkpoint: ctx.checkpoint });
          if (ctx.attempt === 1) {
            await ctx.saveCheckpoint({ page: 3 });
            throw new Error("HTTP 503 on page 4");
          }
          return { from: ctx.checkpoint };
        },
      },
    });
    await settled(task.id);
    expect(seen).toEqual([{ attempt: 1, checkpoint: null }, { attempt: 2, checkpoint: { page: 3 } }]);
    expect((await store.get(task.id))?.result).toEqual({ from: { page: 3 } });
    expect((await store.events(task.id)).find((e) => e.event === "retry_scheduled")?.message).toBe("HTTP 503 on page 4");
  });

  it("creates follow-ups with the completion, and none when the handler fails", async () => {
    const { task: ok } = await store.enqueue({ taskType: "discover", params: { ok: true } });
    const { task: bad } = await store.enqueue({ taskType: "discover", params: { ok: false }, maxAttempts: 1 });
    await startWorker({
      handlers: {
        async discover(params, ctx) {
          ctx.enqueue("entry_point_discovery", { from: ctx.task.id });
          if (!params.ok) throw new Error("nope");
        },
      },
    });
    await settled(ok.id);
    await settled(bad.id, "failed");
    const followUps = (await store.list({ taskType: "entry_point_discovery" })).tasks;
    expect(followUps.map((t) => [t.parentId, t.params])).toEqual([[ok.id, { from: ok.id }]]);
  });

  it("refuses a follow-up enqueued after the handler returned, rather than dropping it", async () => {
    const { task } = await store.enqueue({ taskType: "hasty" });
    let late: unknown = null;
    await startWorker({
      handlers: {
        hasty(_params, ctx) {
          setTimeout(() => {
            try {
              ctx.enqueue("follow_up");
            } catch (error) {
              late = error;
            }
          }, 50);
        },
      },
    });
    await settled(task.id);
    await eventually(async () => late !== null, 5000, "the late enqueue");
    expect((late as Error).message).toBe(`Task ${task.id}'s handler has returned: ctx.enqueue("follow_up") must be called before it returns (await the work that enqueues)`);
  });

  it("fails for good on NonRetryableError", async () => {
    const { task } = await store.enqueue({ taskType: "x", maxAttempts: 5 });
    await startWorker({ handlers: { x: async () => { throw new NonRetryableError("invalid store id"); } } });
    await settled(task.id, "failed");
    expect(await store.get(task.id)).toMatchObject({ attempts: 1, errorMessage: "invalid store id" });
  });

  // A beat unanswered for longer than the lease is a transport retrying it (an HTTP pool's retryForMs):
  // the worker fenced its handler only once the retries ended, seconds past the lease.
  it.each([
    ["fail at once", 0],
    ["stay unanswered for 4 s", 4000],
  ])("stops a handler once its heartbeats have failed for the lease's length (self-fencing), not before: beats that %s", async (_, answerAfterMs) => {
    const { task } = await store.enqueue({ taskType: "long" });
    let cutOff = false;
    // The database answers everything but the heartbeats: what a worker sees when its beats cannot get through.
    const unreachable = () => new Promise<never>((_resolve, reject) => setTimeout(() => reject(new Error("network unreachable (simulated)")), answerAfterMs));
    const partitioned = withOverrides(store, {
      workerHeartbeat: async (beat) => (cutOff ? unreachable() : store.workerHeartbeat(beat)),
    });
    let reason: unknown;
    let abortedAt = 0;
    const logs = captureLogs();
    const worker = new Worker(
      partitioned,
      {
        roles: ["long"],
        pollIntervalMs: 100,
        heartbeatIntervalMs: 100,
        leaseSeconds: 1,
        // The stop after the test waits for beats that hang 4 s (the one in flight, the last one): up to lastCallsMs.
        lastCallsMs: 500,
        handleSignals: false,
        heartbeatThread: false,
        logger: logs.logger,
        handlers: {
          long: (_params, ctx) =>
            new Promise((_resolve, reject) =>
              ctx.signal.addEventListener("abort", () => {
                reason = ctx.signal.reason;
                abortedAt = Date.now();
                reject(new Error("stopped"));
              }),
            ),
        },
      },
      null,
    );
    workers.push(worker);
    await worker.start();
    await settled(task.id, "running");
    await new Promise((r) => setTimeout(r, 1500)); // beats renew the 1 s lease: a handler outliving it is fine
    expect(reason).toBeUndefined();
    const cut = Date.now();
    cutOff = true;
    await eventually(() => reason, 5000, "the handler to be fenced");
    expect(reason).toBe("lease_lost");
    expect(abortedAt - cut).toBeGreaterThanOrEqual(800); // not before the lease could have run out
    expect(abortedAt - cut).toBeLessThan(3000);
    expect(logs.messages().some((m) => m.startsWith(`Task ${task.id}: no heartbeat got through for the lease's 1 s`))).toBe(true);
  });

  // A handler that ignores its signal (a blocking call, a fetch without it) runs on after its task was
  // cancelled or its lease taken: the lease is gone, and a beat listing it was told so again each time.
  it("stops listing a lease its beats were told is gone while the handler runs on, so it is reported lost once", async () => {
    const { task } = await store.enqueue({ taskType: "stubborn" });
    let lostReports = 0;
    const counting = withOverrides(store, {
      workerHeartbeat: async (beat) => {
        const answer = await store.workerHeartbeat(beat);
        lostReports += answer.lost.length;
        return answer;
      },
    });
    let release: () => void = () => {};
    const worker = new Worker(
      counting,
      {
        roles: ["stubborn"],
        pollIntervalMs: 100,
        heartbeatIntervalMs: 100,
        handleSignals: false,
        heartbeatThread: false,
        handlers: { stubborn: () => new Promise<void>((resolve) => (release = resolve)) },
      },
      null,
    );
    workers.push(worker);
    await worker.start();
    await settled(task.id, "running");
    const running = (await store.get(task.id))!;
    // Its lease taken: the task requeued under it (as a recovery does) and claimed by another worker.
    await store.release(task.id, { workerId: running.workerId!, leaseToken: running.leaseToken! });
    const [other] = await store.claim({ workerId: "someone-else", taskTypes: ["stubborn"] });
    const claimedBySomeoneElse = other?.id === task.id;
    await new Promise((r) => setTimeout(r, 1000)); // ten beats while the handler ignores it all
    release();
    expect(claimedBySomeoneElse).toBe(true);
    expect(lostReports).toBe(1);
  });

  // Frozen between a claim's answer and reading it, past half the lease: a beat sent before the worker
  // knew of the task (it says it lists every lease) lands after, and gives the task back. Started at
  // once, the handler ran on a task any worker could claim meanwhile.
  it("starts a claimed task held up past half its lease only once a beat listing it renewed it: a beat sent before may have given it back", async () => {
    const { task } = await store.enqueue({ taskType: "held" });
    let answerUnread = false;
    let firstToken: string | null = null;
    const ranUnder: (string | null)[] = [];
    const frozen = withOverrides(store, {
      claim: async (options) => {
        const tasks = await store.claim(options);
        if (firstToken !== null || tasks.length === 0) return tasks;
        firstToken = tasks[0].leaseToken;
        answerUnread = true;
        await new Promise((r) => setTimeout(r, 1300)); // past half the 2 s lease
        answerUnread = false;
        return tasks;
      },
      workerHeartbeat: async (beat) => {
        if (answerUnread) {
          // Sent before the claim's answer was read (it lists no lease), landing after it was.
          while (answerUnread) await new Promise((r) => setTimeout(r, 10));
          await new Promise((r) => setTimeout(r, 100));
        }
        return store.workerHeartbeat(beat);
      },
    });
    await startWorker({ leaseSeconds: 2, handlers: { held: (_params, ctx) => void ranUnder.push(ctx.task.leaseToken) } }, frozen);
    await settled(task.id);
    // That beat gave the task back: the worker did not run it under the first lease, claimed it again and ran it.
    expect(firstToken).not.toBeNull();
    expect(ranUnder).not.toContain(firstToken);
    expect(ranUnder).toHaveLength(1);
  });

  // The coordinator takes a task back at its lease's end; a worker that fenced only when its next beat
  // failed went on up to an interval longer beside the next holder (a 20 s lease, beats every 9 s: 6 s).
  it("stops a handler at its lease's end when beats fail, not at the next failing beat: a lease of no whole number of intervals", async () => {
    const { task } = await store.enqueue({ taskType: "long" });
    let cutOff = false;
    let lastAnsweredSentAt = 0;
    const partitioned = withOverrides(store, {
      workerHeartbeat: async (beat) => {
        if (cutOff) return new Promise<never>((_resolve, reject) => setTimeout(() => reject(new Error("network unreachable (simulated)")), 0));
        const sentAt = Date.now();
        const answer = await store.workerHeartbeat(beat);
        lastAnsweredSentAt = sentAt;
        return answer;
      },
    });
    let abortedAt = 0;
    const worker = new Worker(
      partitioned,
      {
        roles: ["long"],
        pollIntervalMs: 100,
        heartbeatIntervalMs: 1400,
        leaseSeconds: 3,
        lastCallsMs: 500,
        handleSignals: false,
        heartbeatThread: false,
        handlers: { long: (_params, ctx) => new Promise((_resolve, reject) => ctx.signal.addEventListener("abort", () => ((abortedAt = Date.now()), reject(new Error("stopped"))))) },
      },
      null,
    );
    workers.push(worker);
    await worker.start();
    await settled(task.id, "running");
    await new Promise((r) => setTimeout(r, 1000));
    cutOff = true;
    await eventually(() => abortedAt, 8000, "the handler to be fenced");
    // The lease the last answered beat renewed ends 3 s after it was sent; the next failing beat's
    // report comes up to 1.4 s later than that.
    expect(abortedAt - lastAnsweredSentAt).toBeGreaterThanOrEqual(2900);
    expect(abortedAt - lastAnsweredSentAt).toBeLessThan(3400);
  });

  // A taskpool server being redeployed is out of reach for 20-40 s: the checkpoint write gave up
  // after 6 tries (about 5 s here, 20 s over HTTP), so every run that checkpointed meanwhile failed and
  // was charged an attempt (on its last attempt, failed for good), though its lease outlived the gap.
  // The database is beside the point here: one is enough.
  it.runIf(kind.name === "sqlite")("rides out an outage its lease outlives: a checkpoint made meanwhile is retried until it gets through, and the run completes once", async () => {
    const { task } = await store.enqueue({ taskType: "crawl" });
    let down = false;
    let tries = 0;
    const unreachable = () => Promise.reject(new ServerUnreachableError("http://127.0.0.1:1", "connect ECONNREFUSED (simulated)"));
    const outage = withOverrides(store, {
      workerHeartbeat: (beat) => (down ? unreachable() : store.workerHeartbeat(beat)),
      claim: (options) => (down ? unreachable() : store.claim(options)),
      completeMany: (items, options) => (down ? unreachable() : store.completeMany(items, options)),
      // The outage lasts past the sixth try, where the write used to give up.
      checkpoint: (id, lease, data) => {
        tries++;
        if (tries === 6) setTimeout(() => (down = false), 100);
        return down ? unreachable() : store.checkpoint(id, lease, data);
      },
    });
    const logs = captureLogs();
    const worker = new Worker(
      outage,
      {
        roles: ["crawl"],
        pollIntervalMs: 100,
        heartbeatIntervalMs: 100,
        leaseSeconds: 20,
        handleSignals: false,
        heartbeatThread: false,
        logger: logs.logger,
        handlers: {
          async crawl(_params, ctx) {
            down = true;
            await ctx.saveCheckpoint({ page: 1 });
            return { pages: 1 };
          },
        },
      },
      null,
    );
    workers.push(worker);
    await worker.start();
    await settled(task.id);
    expect(tries).toBe(7);
    expect(await store.get(task.id)).toMatchObject({ attempts: 1, checkpoint: { page: 1 }, result: { pages: 1 } });
    expect((await store.events(task.id)).map((e) => e.event)).toEqual(["created", "claimed", "checkpoint", "completed"]);
    // One warning for the whole outage, not one per try.
    expect(logs.messages().filter((m) => m.startsWith(`Could not save task ${task.id}'s checkpoint or progress; retrying for up to the lease's 20 s`))).toHaveLength(1);
    expect(logs.messages().some((m) => new RegExp(`^Saved task ${task.id}'s checkpoint or progress after \\d+ s of retries$`).test(m))).toBe(true);
  }, 20_000);

  /**
   * The worker's wall clock is stepped while a task runs (only Date is faked: timers and the monotonic
   * clock go on). The sweep runs on the store's clock: the database's on PostgreSQL, this host's
   * (stepped too) on SQLite.
   */
  const sweepAfterStep = async (stepMs: number, waitMs: number) => {
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + stepMs, shouldAdvanceTime: true });
    try {
      const deadline = performance.now() + waitMs;
      for (;;) {
        await new Promise((r) => setTimeout(r, 100));
        const swept = await handle.store.sweep({ staleAfterSeconds: 5, deadAfterSeconds: 10, reservationSeconds: 30 });
        if (swept.requeued.length + swept.failed.length > 0 || performance.now() > deadline) return swept;
      }
    } finally {
      vi.useRealTimers();
    }
  };
  const untilReleased = () => {
    let release = () => {};
    const released = new Promise<void>((r) => (release = r));
    return { release, handler: () => released };
  };

  it("keeps renewing a running task's lease until its timeout when the wall clock jumps past it", async () => {
    const { task } = await store.enqueue({ taskType: "long", timeoutSeconds: 60 });
    const { release, handler } = untilReleased();
    await startWorker({ leaseSeconds: 1, handlers: { long: handler } });
    await settled(task.id, "running");
    // Stepped 2 minutes ahead: the lease was no longer renewed, ran out, and the task went to another worker beside this run.
    const swept = await sweepAfterStep(120_000, 2000);
    release();
    expect(swept.requeued).toEqual([]);
    await settled(task.id);
  });

  it("stops renewing a timed-out task's lease when the wall clock steps back", async () => {
    const { task } = await store.enqueue({ taskType: "stuck", timeoutSeconds: 1, maxAttempts: 1 });
    // A handler that ignores its signal: past the timeout only the lease running out frees the task.
    const { release, handler } = untilReleased();
    await startWorker({ leaseSeconds: 1, handlers: { stuck: handler } });
    await settled(task.id, "running");
    // Stepped 2 minutes back: its lease was renewed for 2 minutes more.
    const swept = await sweepAfterStep(-120_000, 8000);
    release();
    expect(swept.failed).toEqual([task.id]);
  });

  /** A worker on `through` whose batched outcomes are applied, then their answers lost once: each is sent again and taken as written. */
  const outcomesWhoseAnswersAreLost = async (through: Store) => {
    const done = (await store.enqueue({ taskType: "ok" })).task;
    const broken = (await store.enqueue({ taskType: "bad" })).task;
    // Each batched write is applied, then its answer is lost once: a connection dropped after the commit.
    const lost = new Set<string>();
    const answerLostOnce = async <T>(name: string, write: () => Promise<T>): Promise<T> => {
      const outcomes = await write();
      if (lost.has(name)) return outcomes;
      lost.add(name);
      throw new Error("Connection terminated unexpectedly (simulated, after the commit)");
    };
    const dropsAnswers = withOverrides(through, {
      completeMany: (items, options) => answerLostOnce("completeMany", () => through.completeMany(items, options)),
      failMany: (items, options) => answerLostOnce("failMany", () => through.failMany(items, options)),
    });
    const logs = captureLogs();
    const worker = new Worker(
      dropsAnswers,
      {
        roles: ["ok", "bad"],
        pollIntervalMs: 100,
        heartbeatIntervalMs: 100,
        handleSignals: false,
        heartbeatThread: false,
        logger: logs.logger,
        handlers: {
          ok: async () => ({ fine: true }),
          bad: async () => {
            throw new NonRetryableError("broken input");
          },
        },
      },
      null,
    );
    workers.push(worker);
    await worker.start();
    await settled(done.id);
    await settled(broken.id, "failed");
    await eventually(async () => (await store.listWorkers()).workers[0]?.tasksProcessed === 2, 5000, "both outcomes counted once");
    expect(lost).toEqual(new Set(["completeMany", "failMany"]));
    expect(logs.messages()).toContain(`Task ${done.id} completed (the answer to its first write was lost)`);
    expect(logs.messages().filter((m) => m.startsWith("Could not"))).toEqual([]);
    expect((await store.events(done.id)).map((e) => e.event)).toEqual(["created", "claimed", "completed"]);
  };

  /** A worker whose writes fail while `down.value`, as with the database out of reach; its one task's handler has returned. */
  const withCompletionsDown = async (down: { value: boolean }) => {
    let tries = 0;
    const refused = () => Promise.reject(new Error("connect ECONNREFUSED (simulated)"));
    const unreachable = withOverrides(store, {
      completeMany: (items, options) => {
        tries++;
        return down.value ? refused() : store.completeMany(items, options);
      },
      workerHeartbeat: (beat) => (down.value ? refused() : store.workerHeartbeat(beat)),
      shutdownWorker: (workerId, runId) => (down.value ? refused() : store.shutdownWorker(workerId, runId)),
    });
    const { worker, logs } = await startWorker({ handlers: { quick: async () => ({ done: true }) } }, unreachable);
    const task = (await store.enqueue({ taskType: "quick" })).task;
    await eventually(async () => tries >= 2, 5000, "the completion failing");
    return { worker, logs, task };
  };

  it("a stop does not give back a task whose handler returned while its completion is still being written: it gets a last try", async () => {
    const down = { value: true };
    const { worker, task } = await withCompletionsDown(down);
    const stopping = worker.stop(200);
    down.value = false;
    await stopping;
    expect(await store.get(task.id)).toMatchObject({ status: "completed", result: { done: true } });
    expect((await store.events(task.id)).map((e) => e.event)).not.toContain("released");
    expect(worker.stoppedCleanly).toBe(true);
  });

  it("a handler returning while a stop releases another task is not released: its completion is written", async () => {
    const slow = withOverrides(store, {
      release: async (id, lease, options) => {
        await new Promise((r) => setTimeout(r, 500));
        return store.release(id, lease, options);
      },
    });
    let started = 0;
    const handlers = {
      // The first never returns; the second returns 200 ms after the grace ends, while the first is being released.
      h: async () => {
        if (++started === 1) await new Promise(() => {});
        await new Promise((r) => setTimeout(r, 500));
        return { done: true };
      },
    };
    const { worker } = await startWorker({ concurrency: 2, pollIntervalMs: 50, handlers }, slow);
    const [, second] = await store.enqueueMany([{ taskType: "h", priority: 2 }, { taskType: "h", priority: 1 }]);
    await eventually(async () => started === 2, 5000, "both running");
    await worker.stop(300);
    expect(await store.get(second.task.id)).toMatchObject({ status: "completed", result: { done: true } });
    expect(worker.stoppedCleanly).toBe(true);
  });

  it("a stop beginning while a completion is being written gives it its last try at once, not after the rate limit's wait", async () => {
    let writes = 0;
    const limited = withOverrides(store, {
      completeMany: async (items, options) => {
        // The first is refused after 300 ms, asked to wait 5 s; the next goes through.
        if (++writes === 1) {
          await new Promise((r) => setTimeout(r, 300));
          throw new RateLimitedError("Rate limit exceeded (simulated)", 5);
        }
        return store.completeMany(items, options);
      },
    });
    const { worker } = await startWorker({ handlers: { quick: async () => ({ done: true }) } }, limited);
    const { task } = await store.enqueue({ taskType: "quick" });
    await eventually(async () => writes === 1, 5000, "the completion on its way");
    const stoppingAt = performance.now();
    await worker.stop(0);
    expect(performance.now() - stoppingAt).toBeLessThan(3000);
    expect(await store.get(task.id)).toMatchObject({ status: "completed" });
  });

  it("a stop's grace period starts at once, not after the beat that says the worker is full (the database may hang)", async () => {
    let hanging = false;
    const slowBeats = withOverrides(store, {
      workerHeartbeat: async (beat) => {
        if (hanging) await new Promise((r) => setTimeout(r, 3000));
        return store.workerHeartbeat(beat);
      },
    });
    let abortedAt = 0;
    const { worker } = await startWorker({ lastCallsMs: 1000, handlers: { long: (_params, ctx) => new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => ((abortedAt = performance.now()), resolve()))) } }, slowBeats);
    const { task } = await store.enqueue({ taskType: "long" });
    await settled(task.id, "running");
    hanging = true;
    const stoppingAt = performance.now();
    await worker.stop(300);
    expect(abortedAt - stoppingAt).toBeLessThan(1500);
  });

  it("a stop that can write nothing leaves its task leased and says so: it is not stopped cleanly", async () => {
    const { worker, logs, task } = await withCompletionsDown({ value: true });
    await worker.stop(200);
    // Nothing reached the database: the task stays leased here until the coordinator takes it back.
    expect(await store.get(task.id)).toMatchObject({ status: "running", attempts: 1 });
    expect(worker.stoppedCleanly).toBe(false);
    expect(logs.messages()).toContain(`Worker ${worker.id} stopped with 1 task still leased to it (${task.id}): the coordinator takes them back when their leases run out, an attempt each`);
  });

  it("a stop whose store stops answering gives up on its last calls lastCallsMs after the grace period, saying what it left", { timeout: 30_000 }, async () => {
    // Over HTTP a server gone silent: each call retried for three minutes, one after another (9 minutes in all).
    let silent = false;
    const never = new Promise<never>(() => {});
    const hangs = withOverrides(store, {
      release: async (...args) => (silent ? never : store.release(...args)),
      workerHeartbeat: async (beat) => (silent ? never : store.workerHeartbeat(beat)),
      shutdownWorker: async (id, runId) => (silent ? never : store.shutdownWorker(id, runId)),
    });
    const long = (_params: unknown, ctx: { signal: AbortSignal }) => new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve()));
    const { worker, logs } = await startWorker({ concurrency: 1, lastCallsMs: 2000, handlers: { quick: async () => {}, long } }, hangs);
    // Short tasks first: the worker then keeps a buffer of claimed tasks (Prefetch).
    const quick = await store.enqueueMany(Array.from({ length: 20 }, () => ({ taskType: "quick" })));
    await settled(quick[19].task.id);
    // Three claimed together: one runs, two wait in the buffer (their release is bounded too).
    const [{ task }, ...buffered] = await store.enqueueMany([{ taskType: "long" }, { taskType: "long" }, { taskType: "long" }]);
    const ids = buffered.map((b) => b.task.id);
    await settled(task.id, "running");
    // A worker claims with start: for the store, buffered tasks are running already.
    await eventually(async () => (await Promise.all(ids.map((id) => store.get(id)))).every((t) => t?.workerId === worker.id), 10_000, "the buffer to fill");
    silent = true;
    const stoppingAt = performance.now();
    await worker.stop(200);
    const seconds = (performance.now() - stoppingAt) / 1000;
    expect(seconds).toBeGreaterThanOrEqual(2);
    expect(seconds).toBeLessThan(8);
    expect(worker.stoppedCleanly).toBe(false);
    expect(logs.messages()).toContain("Could not mark the worker inactive: no answer within 2 s of the grace period's end");
    expect(logs.messages()).toContain(`Worker ${worker.id} stopped with 3 tasks still leased to it (${[task.id, ...ids].join(", ")}): the coordinator takes them back when their leases run out, an attempt each`);
  });

  it("a claim answered after its worker's stop gave up waiting for it is given back, never run", { timeout: 30_000 }, async () => {
    let gate: (() => void) | null = null;
    let held = false;
    const slowClaims = withOverrides(store, {
      claim: async (options) => {
        if (held) await new Promise<void>((resolve) => (gate = resolve));
        return store.claim(options);
      },
    });
    let ran = 0;
    const { worker } = await startWorker({ lastCallsMs: 1000, handlers: { late: async () => void ran++ } }, slowClaims);
    held = true;
    await eventually(() => gate !== null, 5000, "a claim to hang");
    const { task } = await store.enqueue({ taskType: "late" });
    await worker.stop(100);
    (gate as unknown as () => void)();
    await eventually(async () => (await store.events(task.id)).some((e) => e.event === "released"), 10_000, "the late claim's task given back");
    expect(ran).toBe(0);
    expect(await store.get(task.id)).toMatchObject({ status: "pending", workerId: null });
  });

  // The grace period and the last calls counted from after the claim's wait: a stop took twice its bound.
  it("a stop takes at most its grace period and lastCallsMs in all, a claim that hangs included", { timeout: 30_000 }, async () => {
    let silent = false;
    let claiming = false;
    const never = new Promise<never>(() => {});
    const hangs = withOverrides(store, {
      claim: async (options) => (silent ? ((claiming = true), never) : store.claim(options)),
      release: async (...args) => (silent ? never : store.release(...args)),
    });
    const { worker } = await startWorker({ concurrency: 2, prefetch: 0, lastCallsMs: 1000, handlers: { long: () => never } }, hangs);
    const { task } = await store.enqueue({ taskType: "long" });
    await settled(task.id, "running");
    // The free slot's next claim, woken by a second task, hangs.
    silent = true;
    await store.enqueue({ taskType: "long" });
    await eventually(() => claiming, 5000, "a claim to hang");
    const stoppingAt = performance.now();
    await worker.stop(300);
    const seconds = (performance.now() - stoppingAt) / 1000;
    expect(seconds).toBeGreaterThanOrEqual(1.2);
    expect(seconds).toBeLessThan(2);
  });

  it("an outcome whose answer was lost is sent again and taken as written, not reported as refused", async () => {
    await outcomesWhoseAnswersAreLost(store);
  });

  /** Runs `check` with an HTTP client of a server on this store; the workers it started stop before the server closes. */
  const overHttp = async (check: (http: HttpStore) => Promise<void>) => {
    const app = await buildServer(new Taskpool(new CheckedStore(handle.store), null), { auth: "none", rateLimitPerMinute: false, dashboard: false });
    const http = new HttpStore(await app.listen({ host: "127.0.0.1", port: 0 }), { retryForMs: 0 });
    try {
      await check(http);
    } finally {
      await Promise.all(workers.splice(0).map((w) => w.stop(0)));
      await http.close();
      await app.close();
    }
  };

  it("over HTTP, an outcome whose answer was lost is taken as written too, though a task read there answers no lease token", async () => {
    await overHttp(async (http) => {
      await http.migrate();
      await outcomesWhoseAnswersAreLost(http);
    });
  });

  it("tells a handler it was cancelled at the next heartbeat; the task stays cancelled", async () => {
    const { task } = await store.enqueue({ taskType: "long" });
    let reason: unknown = null;
    const { logs } = await startWorker({
      handlers: {
        long: (_params, ctx) =>
          new Promise((_resolve, reject) => {
            ctx.signal.addEventListener("abort", () => {
              reason = ctx.signal.reason;
              reject(new Error("stopped"));
            });
          }),
      },
    });
    await settled(task.id, "running");
    await store.cancel(task.id);
    await eventually(() => reason, 5000, "the abort signal");
    expect(reason).toBe("cancelled");
    // An operator's decision, said at info; nothing is written over the cancel.
    const said = await eventually(() => logs.lines().find((l) => l.msg.startsWith(`Task ${task.id} stopped`)), 5000, "the worker to say so");
    expect([said.level, said.msg]).toEqual([30, `Task ${task.id} stopped: it was cancelled`]);
    expect((await store.get(task.id))?.status).toBe("cancelled");
  });

  /** A handler that runs until its signal fires, on a worker that beats every 30 s: only the cancel's notification can stop it sooner. */
  const cancelledPromptly = async (through: Store) => {
    const { task } = await store.enqueue({ taskType: "long" });
    let reason: unknown = null;
    const worker = new Worker(
      through,
      {
        roles: ["long"],
        handlers: { long: (_params, ctx) => new Promise((_resolve, reject) => ctx.signal.addEventListener("abort", () => reject(new Error(String((reason = ctx.signal.reason)))))) },
        heartbeatIntervalMs: 30_000,
        pollIntervalMs: 100,
        handleSignals: false,
        heartbeatThread: false,
        logger: captureLogs().logger,
      },
      null,
    );
    workers.push(worker);
    await worker.start();
    await settled(task.id, "running");
    const cancelledAt = performance.now();
    await store.cancel(task.id, { reason: "operator" });
    await eventually(() => reason, 10_000, "the handler's signal");
    expect(reason).toBe("cancelled");
    // It heard at the next heartbeat, up to 30 s later.
    expect(performance.now() - cancelledAt).toBeLessThan(10_000);
    expect((await store.get(task.id))?.status).toBe("cancelled");
  };

  it("a cancel reaches the running handler through the store's notification, not at the next heartbeat", async () => {
    await cancelledPromptly(store);
  });

  it("over HTTP, a cancel reaches the running handler through the wake-up wait, not at the next heartbeat", async () => {
    await overHttp(cancelledPromptly);
  });

  it("a handler that finishes after its task was cancelled, before the worker heard of it: its result is refused, and that is said at info", async () => {
    const { task } = await store.enqueue({ taskType: "long" });
    let finish!: () => void;
    const gate = new Promise<void>((resolve) => (finish = resolve));
    // Beats every 30 s and hears no notification: the worker does not hear of the cancel before the handler returns.
    const logs = captureLogs();
    const deaf = withOverrides(store, { subscribe: async () => async () => {} });
    const worker = new Worker(deaf, { roles: ["long"], handlers: { long: async () => (await gate, { done: true }) }, heartbeatIntervalMs: 30_000, pollIntervalMs: 100, handleSignals: false, heartbeatThread: false, logger: logs.logger }, null);
    workers.push(worker);
    await worker.start();
    await settled(task.id, "running");
    await store.cancel(task.id);
    finish();
    const said = await eventually(() => logs.lines().find((l) => l.msg.includes(`Task ${task.id} was cancelled`)), 5000, "the worker to say so");
    expect([said.level, said.msg]).toEqual([30, `Task ${task.id} was cancelled while it ran; its outcome is not recorded`]);
    // It was a warning: "Could not complete task N: invalid_transition".
    expect(logs.lines().filter((l) => l.level >= 40)).toEqual([]);
    expect(await store.get(task.id)).toMatchObject({ status: "cancelled", result: null });
  });

  it("aborts a handler at its timeout and records the failure", async () => {
    const { task } = await store.enqueue({ taskType: "slow", timeoutSeconds: 1, maxAttempts: 1 });
    await startWorker({
      handlers: {
        slow: (_params, ctx) => new Promise((_resolve, reject) => ctx.signal.addEventListener("abort", () => reject(new Error(String(ctx.signal.reason))))),
      },
    });
    await settled(task.id, "failed");
    expect((await store.get(task.id))?.errorMessage).toBe("Timed out after 1 s");
  });

  it("wakes on new work at once instead of waiting for the poll interval", async () => {
    const done: number[] = [];
    await startWorker({ pollIntervalMs: 60_000, handlers: { ping: async (_p, ctx) => void done.push(ctx.task.id) } });
    await new Promise((r) => setTimeout(r, 200)); // idle now, next poll in a minute
    const started = Date.now();
    const { task } = await store.enqueue({ taskType: "ping" });
    await settled(task.id);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("fails a task at once, naming the field, when its handler's result cannot be stored; the handler is not run again", async () => {
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const results: Record<string, unknown> = { date: { at: new Date() }, bigint: { n: 10n }, circular, huge: { blob: "x".repeat(1024 * 1024 + 1) } };
    const runs: Record<string, number> = {};
    const tasks = await Promise.all(Object.keys(results).map(async (kind) => (await store.enqueue({ taskType: "out", params: { kind }, maxAttempts: 3 })).task));
    await startWorker({
      concurrency: 4,
      handlers: {
        out: async (params) => {
          runs[params.kind as string] = (runs[params.kind as string] ?? 0) + 1;
          return results[params.kind as string] as never;
        },
      },
    });
    for (const t of tasks) await settled(t.id, "failed");
    const errors = Object.fromEntries(await Promise.all(tasks.map(async (t) => [t.params.kind, (await store.get(t.id))?.errorMessage])));
    expect(errors.date).toMatch(/^Handler output rejected, task not completed: Invalid result: result\.at is a Date; pass plain JSON/);
    expect(errors.bigint).toMatch(/result\.n is a bigint, which JSON cannot hold/);
    expect(errors.circular).toMatch(/result\.self contains a cycle/);
    expect(errors.huge).toMatch(/result is 1,048,588 bytes as JSON, over the limit of 1,048,576 bytes \(limits\.resultBytes\)/);
    expect(runs).toEqual({ date: 1, bigint: 1, circular: 1, huge: 1 });
    for (const t of tasks) expect((await store.get(t.id))?.attempts).toBe(1);
  });

  it("stores a result with undefined fields as JSON.stringify would, leaving them out", async () => {
    const { task } = await store.enqueue({ taskType: "out" });
    await startWorker({ handlers: { out: async () => ({ kept: 1, dropped: undefined }) as never } });
    await settled(task.id);
    expect((await store.get(task.id))?.result).toEqual({ kept: 1 });
  });

  it("records what a handler threw when it is not an Error: an object's message, else the value", async () => {
    const thrown: Record<string, unknown> = { withMessage: { code: 42, message: "quota exceeded" }, plain: { code: 42 }, nothing: undefined, text: "no stock" };
    const tasks = await Promise.all(Object.keys(thrown).map(async (kind) => (await store.enqueue({ taskType: "boom", params: { kind }, maxAttempts: 1 })).task));
    await startWorker({ handlers: { boom: async (params) => { throw thrown[params.kind as string]; } } });
    for (const t of tasks) await settled(t.id, "failed");
    const messages = await Promise.all(tasks.map(async (t) => (await store.get(t.id))?.errorMessage));
    expect(messages).toEqual(["quota exceeded", 'Handler threw {"code":42} (not an Error)', "Handler threw undefined (not an Error)", "no stock"]);
  });

  it("fails the task, and runs on, whatever a handler throws: an Error whose message is no string, an object nothing can print", async () => {
    const numbered = Object.assign(new Error("x"), { message: 404 });
    const unnamed = Object.assign(new Error(""), { name: 7 });
    const unprintable = Object.assign(Object.create(null), { n: 1n });
    // Its prototype cannot even be read: `instanceof` throws. The task was given back uncharged, claimed
    // again at once and given back again, for ever (on SQLite, a loop that starved every timer).
    const hostile = new Proxy({}, { get: () => { throw new Error("get"); }, getPrototypeOf: () => { throw new Error("prototype"); } });
    const thrown: Record<string, unknown> = { numbered, unnamed, unprintable, hostile };
    const tasks = await Promise.all(Object.keys(thrown).map(async (kind) => (await store.enqueue({ taskType: "boom", params: { kind }, maxAttempts: 1 })).task));
    await startWorker({ handlers: { boom: async (params) => { throw thrown[params.kind as string]; } } });
    for (const t of tasks) await settled(t.id, "failed");
    const messages = await Promise.all(tasks.map(async (t) => (await store.get(t.id))?.errorMessage));
    expect(messages).toEqual(["Error: 404", "Error", "Handler threw [object Object] (not an Error)", "Handler threw a value that cannot be shown (not an Error)"]);
    // The worker is still claiming.
    const { task } = await store.enqueue({ taskType: "boom", params: { kind: "nothing" }, maxAttempts: 1 });
    await settled(task.id, "failed");
  });

  it("keeps a handler error's stack, its cause included, in the failure's event and the log line; the task keeps the message", async () => {
    const { task } = await store.enqueue({ taskType: "boom", maxAttempts: 1 });
    const { logs } = await startWorker({
      handlers: {
        boom: async function fetchPage() {
          throw new Error("upstream returned 502", { cause: new Error("socket hang up") });
        },
      },
    });
    await settled(task.id, "failed");
    expect((await store.get(task.id))?.errorMessage).toBe("upstream returned 502");
    const data = (await store.events(task.id)).at(-1)!.data as { stack: string };
    // Before, neither the task, its events nor the log had more than the message: no file, no line.
    expect(data.stack).toMatch(/^Error: upstream returned 502\n\s+at fetchPage \(.*runtime\.test\.ts:\d+:\d+\)/);
    expect(data.stack).toMatch(/\[cause\]: Error: socket hang up/);
    // Logged once the failure's write has answered: the database may show it a moment before.
    const line = await eventually(() => logs.lines().find((l) => l.msg === `Task ${task.id} failed for good`), 5000, "the failure's log line");
    expect(line).toMatchObject({ err: "upstream returned 502", stack: data.stack });
  });

  it("records a handler error whose message the database could not store as such (NUL, lone surrogate, huge)", async () => {
    const { task } = await store.enqueue({ taskType: "boom", maxAttempts: 1 });
    await startWorker({ handlers: { boom: async () => { throw new Error(`bad\u0000byte \ud800 ${"y".repeat(20_000)}`); } } });
    await settled(task.id, "failed");
    const message = (await store.get(task.id))?.errorMessage ?? "";
    expect(message.startsWith("bad\\0byte \ufffd y")).toBe(true);
    expect(message.endsWith("… (truncated)")).toBe(true);
    expect(message.length).toBeLessThanOrEqual(10_000);
  });

  it("warns at its start when its id is in use by another live process, here or on another host; not when that process is gone", async () => {
    const gone = spawnSync(process.execPath, ["-e", ""]).pid!; // a pid that ran and exited
    const beat = (workerId: string, host: string, pid: number) => store.workerHeartbeat({ workerId, roles: ["x"], hostname: host, pid, capacity: 1, currentLoad: 0, tasksProcessed: 0 });
    await beat("twin-here", hostname(), process.ppid); // this test's parent: alive
    await beat("twin-there", "another-host", 4242); // heard just now
    await beat("restarted", hostname(), gone); // a crashed process whose record still looks alive
    const warnings: Record<string, string[]> = {};
    for (const workerId of ["twin-here", "twin-there", "restarted", "fresh"]) {
      const { logs } = await startWorker({ workerId, handlers: { x: async () => {} } });
      warnings[workerId] = logs.lines().filter((l) => l.level === 40).map((l) => l.msg);
    }
    expect(warnings["twin-here"]).toEqual([
      `Worker id twin-here is in use by another process (pid ${process.ppid} on ${hostname()}, heard 0 s ago): two live workers with one id give back each other's tasks when either stops, and those tasks run twice. Give each process its own id (WORKER_ID, --id), or leave it out for a generated one`,
    ]);
    expect(warnings["twin-there"]).toEqual([expect.stringMatching(/^Worker id twin-there is in use by another process \(pid 4242 on another-host, heard 0 s ago\)/)]);
    expect([warnings.restarted, warnings.fresh]).toEqual([[], []]);
  });

  it("leaves the process alone when embedded: no signal handlers, no environment read", async () => {
    const before = [process.listenerCount("SIGTERM"), process.listenerCount("SIGINT")];
    process.env.WORKER_ID = "from-the-environment";
    try {
      const { worker } = await startWorker({ handlers: { x: async () => {} }, handleSignals: undefined });
      expect(worker.id).not.toBe("from-the-environment");
      expect([process.listenerCount("SIGTERM"), process.listenerCount("SIGINT")]).toEqual(before);
    } finally {
      delete process.env.WORKER_ID;
    }
  });

  it("its heartbeats carry the load of the tasks it runs, and the registry keeps what it finished during the shutdown grace", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const registered = async (id: string) => (await store.listWorkers()).workers.find((w) => w.workerId === id);
    // The heartbeat thread: it learns the worker's state only when the worker posts it.
    // One slot and no buffer: once it runs the task it claims no more, so no claim posts its state again.
    const { worker } = await startWorker({ concurrency: 1, prefetch: 0, heartbeatThread: true, handlers: { gated: async () => gate } });
    const task = (await store.enqueue({ taskType: "gated" })).task;
    await eventually(async () => (await store.get(task.id))?.status === "running", 5000, "the task running");
    // The coordinator hands a dead worker's tasks to the least loaded: a busy worker must not say 0.
    await eventually(async () => (await registered(worker.id))?.currentLoad === 1, 5000, "a heartbeat with load 1");
    const stopping = worker.stop(10_000);
    release();
    await stopping;
    expect(await registered(worker.id)).toMatchObject({ status: "inactive", tasksProcessed: 1 });
  });

  it("stopping, it says at once that it is full, so a coordinator reserves no dead worker's task for it during its grace", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const registered = async (id: string) => (await store.listWorkers()).workers.find((w) => w.workerId === id);
    const { worker } = await startWorker({ concurrency: 4, heartbeatThread: true, handlers: { gated: async () => gate } });
    const task = (await store.enqueue({ taskType: "gated" })).task;
    await eventually(async () => (await store.get(task.id))?.status === "running", 5000, "the task running");
    await eventually(async () => (await registered(worker.id))?.currentLoad === 1, 5000, "a heartbeat with load 1");
    const stopping = worker.stop(10_000);
    // One task of four, but it takes no more: it must not look like the least-loaded worker.
    await eventually(async () => (await registered(worker.id))?.currentLoad === 4, 1000, "a beat saying it is full");
    expect((await registered(worker.id))?.status).toBe("active");
    release();
    await stopping;
    expect(await registered(worker.id)).toMatchObject({ status: "inactive", tasksProcessed: 1 });
  });

  it("holds claimed tasks ready while handlers are quick, none while they are slow; stop releases the ones never started", async () => {
    const held = async (workerId: string) => (await store.list({ workerId, status: ["claimed", "running"] })).tasks.length;
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    await store.enqueue({ taskType: "quick", priority: 10 });
    const { worker } = await startWorker({
      concurrency: 1,
      prefetch: 5,
      handlers: { quick: async () => {}, gated: async () => gate },
    });
    await eventually(async () => (await store.list({ status: "completed" })).tasks.length === 1, 5000, "the quick task");
    await store.enqueueMany(Array.from({ length: 20 }, () => ({ taskType: "gated" })));
    // One running and some held ready, at most the five of `prefetch`: the quick handler taught the
    // worker its tasks are short (how short, a loaded machine decides: prefetch.test.ts does the sums).
    await eventually(async () => (await held(worker.id)) > 1, 5000, "tasks held ready");
    expect(await held(worker.id)).toBeLessThanOrEqual(6);
    await worker.stop(0);
    release();
    const tasks = (await store.list({ taskType: "gated" }, { limit: 100 })).tasks;
    expect(tasks.filter((t) => t.status === "pending" && t.attempts === 0)).toHaveLength(20);
  });

  it("a stop starts none of the tasks held ready, when a handler hands its task back as the stop begins (ctx.stopping)", async () => {
    const held = async (workerId: string) => (await store.list({ workerId, status: ["claimed", "running"] })).tasks.length;
    const started: number[] = [];
    await store.enqueue({ taskType: "quick", priority: 10 });
    const { worker } = await startWorker({
      concurrency: 1,
      prefetch: 5,
      handlers: {
        quick: async () => {},
        // As the README's handler does: handed back the moment the worker says it is stopping.
        polite: (_params, ctx) => {
          started.push(ctx.task.id);
          return new Promise((_resolve, reject) => ctx.stopping.addEventListener("abort", () => reject(ctx.stopping.reason)));
        },
      },
    });
    await eventually(async () => (await store.list({ status: "completed" })).tasks.length === 1, 5000, "the quick task");
    const polite = (await store.enqueueMany(Array.from({ length: 10 }, () => ({ taskType: "polite" })))).map((r) => r.task.id);
    await eventually(async () => started.length === 1 && (await held(worker.id)) > 1, 5000, "one running and tasks held ready");
    await worker.stop(5000);
    expect(started).toHaveLength(1);
    const tasks = await Promise.all(polite.map((id) => store.get(id)));
    expect(tasks.map((t) => [t?.status, t?.attempts])).toEqual(polite.map(() => ["pending", 0]));
  });

  it("keeps draining quick tasks with many slots, where the prefetch window is larger than one claim may take", async () => {
    // Past the claim limit (1,000), so that a claim takes a full 1,000: once the first 30 have shown the tasks are quick, the window (1,500) asks for more.
    await store.enqueueMany(Array.from({ length: 1200 }, () => ({ taskType: "quick" })));
    const { logs } = await startWorker({ concurrency: 30, handlers: { quick: () => {} } });
    await eventually(async () => (await store.counts()).byStatus.completed === 1200, 20_000, "all 1200 completed");
    expect(logs.messages().filter((m) => m.startsWith("Claim failed"))).toEqual([]);
  });

  it("does not hoard slow tasks: one held per slot when handlers take longer than the prefetch horizon", async () => {
    await store.enqueueMany(Array.from({ length: 6 }, () => ({ taskType: "slow" })));
    let peak = 0;
    const finished = new Set<number>();
    const { worker } = await startWorker({
      concurrency: 1,
      prefetch: 5,
      handlers: {
        slow: async (_params, ctx) => {
          // Leased and not finished (a finished one may still be having its completion written).
          const leased = (await store.list({ workerId: worker.id, status: ["claimed", "running"] })).tasks.filter((t) => !finished.has(t.id));
          peak = Math.max(peak, leased.length);
          await new Promise((r) => setTimeout(r, 120));
          finished.add(ctx.task.id);
        },
      },
    });
    await eventually(async () => (await store.list({ status: "completed" })).tasks.length === 6, 10_000, "all six");
    expect(peak).toBe(1);
  });

  it("does not lose a wake-up that arrives while a claim is in flight", async () => {
    // A claim that has read the table and not yet returned: the window in which a wake-up used to be dropped.
    let inClaimWindow: () => void = () => {};
    const claimWindow = new Promise<void>((resolve) => (inClaimWindow = resolve));
    const slowStore: Store = Object.create(store);
    slowStore.claim = async (options) => {
      const claimed = await store.claim(options);
      if (claimed.length > 0) {
        inClaimWindow();
        await new Promise((r) => setTimeout(r, 300));
      }
      return claimed;
    };
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const started: string[] = [];
    const worker = new Worker(slowStore, {
      roles: ["job"],
      concurrency: 2,
      pollIntervalMs: 60_000,
      heartbeatIntervalMs: 100,
      heartbeatThread: false,
      logger: captureLogs().logger,
      handlers: {
        job: async (params) => {
          started.push(params.name as string);
          if (params.name === "first") await gate;
        },
      },
    });
    workers.push(worker);
    await worker.start();
    await new Promise((r) => setTimeout(r, 200)); // idle, next poll in a minute
    await store.enqueue({ taskType: "job", params: { name: "first" } });
    await claimWindow;
    await store.enqueue({ taskType: "job", params: { name: "second" } });
    await eventually(() => started.includes("second"), 5000, "the second task, well before the next poll");
    open();
  });

  it("a stop called while start() is under way leaves the worker stopped: no heartbeats after it, inactive", async () => {
    const logs = captureLogs();
    const worker = new Worker(store, { roles: ["idle"], handlers: { idle: async () => {} }, heartbeatIntervalMs: 50, heartbeatThread: false, logger: logs.logger });
    workers.push(worker);
    const started = worker.start();
    await worker.stop();
    await started;
    const [stopped] = (await store.listWorkers()).workers;
    await new Promise((r) => setTimeout(r, 300));
    const [later] = (await store.listWorkers()).workers;
    expect(later).toMatchObject({ status: "inactive", lastSeenAt: stopped.lastSeenAt });
    await expect(worker.start()).rejects.toThrow(/was already stopped: a worker runs once; make another with pool.worker\(\)/);
  });

  it("a stop that gave up waiting for start() sends no beat after its shutdown: start does not go on to register and beat", { timeout: 30_000 }, async () => {
    // The registry read at the start (warnIfIdInUse) hangs past the stop's bound; once answered, start
    // went on to register the worker and beat for ever, active again after its shutdown.
    let answer: (() => void) | null = null;
    const sent: string[] = [];
    let unanswered = 0;
    const counted = async <T>(what: string, call: () => Promise<T>): Promise<T> => {
      sent.push(what);
      unanswered++;
      try {
        return await call();
      } finally {
        unanswered--;
      }
    };
    const slowStart = withOverrides(store, {
      listWorkers: async () => {
        await new Promise<void>((resolve) => (answer = resolve));
        return store.listWorkers();
      },
      workerHeartbeat: (beat) => counted("beat", () => store.workerHeartbeat(beat)),
      shutdownWorker: (id, runId) => counted("shutdown", () => store.shutdownWorker(id, runId)),
    });
    const worker = new Worker(slowStart, { roles: ["x"], handlers: { x: async () => {} }, heartbeatIntervalMs: 50, heartbeatThread: false, handleSignals: false, lastCallsMs: 100, logger: captureLogs().logger });
    workers.push(worker);
    const started = worker.start();
    await eventually(() => answer !== null, 5000, "the start's registry read to hang");
    await worker.stop(0);
    // Sent once the last beat has answered, which on a loaded machine may come after the stop's deadline.
    await eventually(() => sent.at(-1) === "shutdown", 5000, "the stop's shutdown sent");
    (answer as unknown as () => void)();
    await started;
    // The stop's last beat and its shutdown were sent past its deadline (its wait for start() used it
    // up), so it returned without their answers; a beat answered after it is followed by the shutdown
    // again. Once all have answered, the last a shutdown, the registry shows the worker inactive.
    await eventually(() => unanswered === 0 && sent.at(-1) === "shutdown", 5000, "the stop's calls to be answered");
    const stopped = await eventually(async () => (await store.listWorkers()).workers.find((w) => w.workerId === worker.id && w.status === "inactive"), 5000, "the shutdown to land");
    const calls = sent.length;
    // Heartbeats begun now would beat every 50 ms.
    await new Promise((r) => setTimeout(r, 300));
    expect(sent).toHaveLength(calls);
    expect((await store.listWorkers()).workers[0]).toMatchObject({ status: "inactive", lastSeenAt: stopped.lastSeenAt });
  });

  it("a stop whose last beat answers past its deadline leaves the worker inactive: that beat, of the run that shut down, does not bring it back", { timeout: 30_000 }, async () => {
    // Sent together once the stop had given up waiting, the beat and the shutdown raced on separate
    // connections; the slow beat landed second and left the worker shown active.
    let slow = false;
    const slowBeats = withOverrides(store, {
      workerHeartbeat: async (beat) => {
        if (slow) await new Promise((r) => setTimeout(r, 400));
        return store.workerHeartbeat(beat);
      },
    });
    const worker = new Worker(slowBeats, { roles: ["x"], handlers: { x: async () => {} }, heartbeatIntervalMs: 60_000, heartbeatThread: false, handleSignals: false, lastCallsMs: 100, logger: captureLogs().logger });
    workers.push(worker);
    await worker.start();
    slow = true;
    await worker.stop(0);
    await eventually(async () => (await store.listWorkers()).workers.find((w) => w.workerId === worker.id && w.status === "inactive"), 5000, "the shutdown to land");
    await new Promise((r) => setTimeout(r, 1000));
    expect((await store.listWorkers()).workers.find((w) => w.workerId === worker.id)).toMatchObject({ status: "inactive" });
  });

  it("a stop whose first beat is still unanswered at its deadline sends its shutdown last: no beat goes out after it", { timeout: 30_000 }, async () => {
    // The last beat waited for the stop's first one; answered after the deadline, it went out after
    // the shutdown (seen once in CI, on a loaded machine).
    let hold: Promise<void> | null = null;
    let answer = () => {};
    const sent: string[] = [];
    const heldBeat = withOverrides(store, {
      workerHeartbeat: async (beat) => {
        sent.push("beat");
        if (hold) await hold;
        return store.workerHeartbeat(beat);
      },
      shutdownWorker: (id, runId) => {
        sent.push("shutdown");
        return store.shutdownWorker(id, runId);
      },
    });
    const worker = new Worker(heldBeat, { roles: ["x"], handlers: { x: async () => {} }, heartbeatIntervalMs: 60_000, heartbeatThread: false, handleSignals: false, lastCallsMs: 100, logger: captureLogs().logger });
    workers.push(worker);
    await worker.start();
    hold = new Promise<void>((resolve) => (answer = resolve));
    sent.length = 0;
    await worker.stop(0);
    expect(sent.at(-1)).toBe("shutdown");
    answer();
    await new Promise((r) => setTimeout(r, 300));
    expect(sent).toEqual(["beat", "shutdown"]);
    expect((await store.listWorkers()).workers.find((w) => w.workerId === worker.id)).toMatchObject({ status: "inactive" });
  });

  it("a stop's shutdown names its run: held up until the worker restarted under its id, it leaves the new run's task with it", { timeout: 30_000 }, async () => {
    // Without the run, the late shutdown took the restarted worker for the one stopping: it marked it
    // inactive and put its running task back in the pool, for another worker to run it again.
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let landed: Promise<number[]> | null = null;
    const heldShutdown = withOverrides(store, { shutdownWorker: (workerId, runId) => (landed = held.then(() => store.shutdownWorker(workerId, runId))) });
    const options = { workerId: "w-restarted", roles: ["long"], pollIntervalMs: 100, heartbeatIntervalMs: 60_000, heartbeatThread: false, handleSignals: false, lastCallsMs: 100 };
    const first = new Worker(heldShutdown, { ...options, handlers: { long: async () => {} }, logger: captureLogs().logger });
    workers.push(first);
    await first.start();
    // It gives up waiting for the shutdown after lastCallsMs.
    await first.stop(0);
    let started = () => {};
    const running = new Promise<void>((resolve) => (started = resolve));
    let finish = () => {};
    const finishing = new Promise<void>((resolve) => (finish = resolve));
    const long = async () => {
      started();
      await finishing;
      return { done: true };
    };
    const second = new Worker(store, { ...options, handlers: { long }, logger: captureLogs().logger });
    workers.push(second);
    await second.start();
    const { task } = await store.enqueue({ taskType: "long" });
    await running;
    release();
    expect(await landed).toEqual([]);
    expect(await store.get(task.id)).toMatchObject({ status: "running", workerId: "w-restarted", attempts: 1 });
    expect((await store.listWorkers()).workers.find((w) => w.workerId === "w-restarted")).toMatchObject({ status: "active", activeTasks: 1 });
    finish();
    await settled(task.id);
    expect((await store.events(task.id)).map((e) => e.event)).toEqual(["created", "claimed", "completed"]);
  });

  it("over HTTP, beats held up at the server until after the worker's shutdown leave it inactive: they are of the run that shut down", { timeout: 30_000 }, async () => {
    // The server stamps a beat when it writes it: without the run, these were written as a restart's.
    const app = await buildServer(new Taskpool(new CheckedStore(handle.store), null), { auth: "none", rateLimitPerMinute: false, dashboard: false });
    let hold: Promise<void> | null = null;
    let release = () => {};
    const held = new WeakSet<object>();
    /** The worker's status as each held beat was written, before its answer left. */
    const statusAfterHeldBeat: (string | undefined)[] = [];
    const status = async () => (await store.listWorkers()).workers.find((w) => w.workerId === worker.id)?.status;
    app.addHook("preHandler", async (request) => {
      if (hold === null || request.routeOptions.url !== "/api/workers/heartbeat") return;
      held.add(request);
      await hold;
    });
    app.addHook("onSend", async (request, _reply, payload) => {
      if (held.has(request)) statusAfterHeldBeat.push(await status());
      return payload;
    });
    const http = new HttpStore(await app.listen({ host: "127.0.0.1", port: 0 }), { retryForMs: 0 });
    const worker = new Worker(
      new CheckedStore(http),
      { roles: ["x"], handlers: { x: async () => {} }, heartbeatIntervalMs: 60_000, heartbeatThread: false, handleSignals: false, lastCallsMs: 200, logger: captureLogs().logger },
      null,
    );
    try {
      await http.migrate();
      await worker.start();
      hold = new Promise((resolve) => (release = resolve));
      // The stop's beat (saying the worker full) is held; the stop gives up on it after lastCallsMs and shuts down.
      await worker.stop(0);
      // The held beats used up lastCallsMs, so the stop did not wait for its shutdown's answer either.
      await eventually(async () => (await status()) === "inactive", 5000, "the shutdown to land");
      release();
      // That beat, written after the shutdown. The stop sent no last beat: the one before it was unanswered.
      await eventually(() => statusAfterHeldBeat.length === 1, 5000, "the held beat to be written");
      await new Promise((r) => setTimeout(r, 300));
      expect(statusAfterHeldBeat).toEqual(["inactive"]);
      expect(await status()).toBe("inactive");
    } finally {
      release();
      await worker.stop(0);
      await http.close();
      await app.close();
    }
  });

  it("on stop, waits for a heartbeat in flight, so the worker stays inactive", async () => {
    let inFlight: () => void = () => {};
    const beatStarted = new Promise<void>((resolve) => (inFlight = resolve));
    const slowBeats: Store = Object.create(store);
    let beats = 0;
    slowBeats.workerHeartbeat = async (beat) => {
      // The first beat registers the worker; a later one is held past the worker's shutdown.
      if (++beats > 1) {
        inFlight();
        await new Promise((r) => setTimeout(r, 300));
      }
      return store.workerHeartbeat(beat);
    };
    const worker = new Worker(slowBeats, {
      roles: ["x"], pollIntervalMs: 100, heartbeatIntervalMs: 100, handleSignals: false, heartbeatThread: false,
      logger: captureLogs().logger, handlers: { x: async () => {} },
    });
    workers.push(worker);
    await worker.start();
    await beatStarted;
    await worker.stop(0);
    await new Promise((r) => setTimeout(r, 400));
    expect((await store.listWorkers()).workers[0]).toMatchObject({ workerId: worker.id, status: "inactive" });
  });

  it("on stop, releases unfinished tasks with their checkpoint and no attempt charged, and turns inactive", async () => {
    const { task } = await store.enqueue({ taskType: "long" });
    const { worker } = await startWorker({
      handlers: {
        async long(_params, ctx) {
          await ctx.saveCheckpoint({ page: 7 });
          await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
        },
      },
    });
    await eventually(async () => (await store.get(task.id))?.checkpoint, 5000, "the checkpoint");
    await worker.stop(100);
    expect(await store.get(task.id)).toMatchObject({ status: "pending", attempts: 0, checkpoint: { page: 7 }, workerId: null });
    expect((await store.listWorkers()).workers[0]).toMatchObject({ workerId: worker.id, status: "inactive" });
  });

  it("tells handlers of a stop as it begins (ctx.stopping): one that hands its task back is released at once, one that returns completes", async () => {
    const { task: crawl } = await store.enqueue({ taskType: "crawl" });
    const { task: wrapUp } = await store.enqueue({ taskType: "wrap_up" });
    let pagesDone = 0;
    const { worker, logs } = await startWorker({
      concurrency: 2,
      handlers: {
        async crawl(_params, ctx) {
          // Page after page until the worker stops, then a checkpoint and the task handed back.
          while (!ctx.stopping.aborted) {
            await new Promise((resolve) => setTimeout(resolve, 10));
            pagesDone++;
          }
          await ctx.saveCheckpoint({ page: pagesDone });
          ctx.stopping.throwIfAborted();
        },
        async wrap_up(_params, ctx) {
          await new Promise((resolve) => ctx.stopping.addEventListener("abort", resolve));
          return { wrapped: true };
        },
      },
    });
    await eventually(async () => (await store.get(crawl.id))?.status === "running" && (await store.get(wrapUp.id))?.status === "running", 5000, "both running");
    const stopped = Date.now();
    await worker.stop(20_000);
    // Neither waited for the grace period: both were done with it as soon as it began.
    expect(Date.now() - stopped).toBeLessThan(5000);
    expect(await store.get(crawl.id)).toMatchObject({ status: "pending", attempts: 0, checkpoint: { page: pagesDone }, workerId: null });
    expect((await store.events(crawl.id)).map((e) => e.event)).toEqual(["created", "claimed", "checkpoint", "released"]);
    expect(await store.get(wrapUp.id)).toMatchObject({ status: "completed", result: { wrapped: true } });
    expect(logs.messages()).toContain(`Released task ${crawl.id} for another worker (checkpoint kept)`);
  });

  it("a run that lost its lease and ends after the task was claimed again here leaves the new run's lease renewed", async () => {
    const { task } = await store.enqueue({ taskType: "twice" });
    let runs = 0;
    let endFirst = () => {};
    const firstEnds = new Promise<void>((resolve) => (endFirst = resolve));
    let secondStarted = false;
    await startWorker({
      concurrency: 2,
      leaseSeconds: 1,
      handlers: {
        async twice(_params, ctx) {
          if (++runs === 1) {
            // Its lease taken back behind the worker's back, as a recovery does, by a handler deaf to its signal.
            await store.release(task.id, { workerId: ctx.task.workerId ?? "", leaseToken: ctx.task.leaseToken ?? "" });
            await firstEnds;
            return;
          }
          secondStarted = true;
          await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
        },
      },
    });
    await eventually(async () => secondStarted, 5000, "the second run");
    endFirst();
    // Well past the 1 s lease: the second run's lease has been renewed all along, so it is still running.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const now = await store.get(task.id);
    expect(now?.status).toBe("running");
    expect(now?.leaseExpiresAt?.getTime()).toBeGreaterThan(Date.now());
  });

  it("a task whose claim's answer was lost goes back to the pool at the worker's next beat past half its lease, and runs", async () => {
    const { task } = await store.enqueue({ taskType: "lost_claim" });
    let lost = false;
    // The claim is applied, and its answer lost on the way (a dropped connection): the worker never learns of the task.
    const lossy = Object.create(store) as Store;
    lossy.claim = async (options) => {
      const claimed = await store.claim(options);
      if (lost || claimed.length === 0) return claimed;
      lost = true;
      throw new ServerUnreachableError("http://127.0.0.1:1", "socket hang up (simulated)", "not-resent");
    };
    const worker = new Worker(
      lossy,
      { roles: ["lost_claim"], pollIntervalMs: 100, heartbeatIntervalMs: 100, leaseSeconds: 2, handleSignals: false, heartbeatThread: false, logger: captureLogs().logger, handlers: { lost_claim: async () => ({ ran: true }) } },
      { url: handle.url, schema: handle.schema },
    );
    workers.push(worker);
    await worker.start();
    // Without the beat giving it back, only a coordinator's sweep would, once its lease ran out.
    await settled(task.id);
    expect(lost).toBe(true);
    expect(await store.get(task.id)).toMatchObject({ status: "completed", attempts: 2, result: { ran: true } });
    expect((await store.events(task.id)).map((e) => [e.event, e.message])).toEqual([
      ["created", null],
      ["claimed", null],
      ["requeued", UNKNOWN_TO_ITS_WORKER],
      ["claimed", null],
      ["completed", null],
    ]);
  });

  it("fails a task as usual when its handler throws WorkerStoppingError while the worker is not stopping", async () => {
    const { task } = await store.enqueue({ taskType: "odd", maxAttempts: 1 });
    await startWorker({
      handlers: {
        async odd() {
          throw new WorkerStoppingError("thrown by hand");
        },
      },
    });
    await settled(task.id, "failed");
    expect(await store.get(task.id)).toMatchObject({ status: "failed", errorMessage: "thrown by hand" });
  });
});
