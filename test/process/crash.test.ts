import { describe, expect, it, type OnTestFinishedHandler } from "vitest";
import { COORDINATOR_LEADERSHIP, Coordinator, type CoordinatorOptions } from "../../src/coordinator/coordinator.js";
import type { Store } from "../../src/store/store.js";
import { freeze } from "../helpers/freeze.js";
import { eventually } from "../helpers/logs.js";
import { createPostgres, createSqlite, type TestStore } from "../helpers/stores.js";
import { killAll, startWorker, type WorkerProcess } from "./harness.js";

/**
 * Short intervals: heartbeats every 200 ms, dead after 2 s of silence (ten missed beats, so a loaded
 * CI machine does not kill live workers), a sweep every 200 ms.
 */
const DEAD_AFTER_MS = 2000;
const COORDINATION: CoordinatorOptions = { sweepIntervalMs: 200, staleAfterMs: 1000, deadAfterMs: DEAD_AFTER_MS, reservationMs: 10_000 };
const silent = { logger: (await import("pino")).pino({ level: "silent" }) };

const STORES = [
  ["postgres", createPostgres],
  ["sqlite", createSqlite],
] as const;

/** One test's database, with the worker processes and coordinators it starts, all gone when it ends. */
interface Scene {
  store: Store;
  worker(id: string, env: Record<string, string>): Promise<WorkerProcess>;
  coordinator(options?: CoordinatorOptions): Promise<Coordinator>;
  status(id: number): Promise<string | undefined>;
  /** Freezes a worker with SIGSTOP, outside a write (see freeze). */
  freeze(p: WorkerProcess): Promise<void>;
}

async function scene(create: () => Promise<TestStore>, onTestFinished: (fn: OnTestFinishedHandler) => void): Promise<Scene> {
  const handle = await create();
  const procs: WorkerProcess[] = [];
  const coordinators: Coordinator[] = [];
  onTestFinished(async () => {
    await Promise.all(coordinators.map((c) => c.stop()));
    await killAll(procs);
    await handle.cleanup();
  });
  return {
    store: handle.store,
    async worker(id, env) {
      const p = await startWorker(handle, id, env);
      procs.push(p);
      return p;
    },
    async coordinator(options = {}) {
      const c = new Coordinator(await handle.another(), { ...COORDINATION, ...silent, ...options });
      coordinators.push(c);
      c.start();
      return c;
    },
    status: async (id) => (await handle.store.get(id))?.status,
    freeze: (p) => freeze(p.child, handle.url),
  };
}

/**
 * A scenario on each store. Both stores' runs go at once (each has its own schema or file, and the
 * machine's two cores carry two runs' few processes), except where `alone` says the scenario's own
 * timing is what it checks.
 */
function scenario(name: string, body: (s: Scene) => Promise<void>, { alone = false } = {}): void {
  describe(name, () => {
    for (const [kind, create] of STORES) {
      (alone ? it : it.concurrent)(`on ${kind}`, async ({ onTestFinished }) => body(await scene(create, onTestFinished)));
    }
  });
}

describe("worker processes", () => {
  scenario("SIGKILL mid-task: dead, reserved for the least-loaded live worker, resumed from the checkpoint, completed once", async ({ store, worker, coordinator, status }) => {
    // The victim crawls slowly (it must still be mid-task when killed); survivors crawl fast.
    const { task } = await store.enqueue({ taskType: "crawl", params: { pages: 100 } });
    const victim = await worker("victim", { WORKER_ROLE: "crawl", PAGE_MS: "200" });
    await victim.waitFor({ event: "page", page: 2 });
    // Two survivors: "loaded" is busy with a hold task (1 of 2 slots), "idle" has nothing.
    await store.enqueue({ taskType: "hold" });
    const [loaded, idle] = await Promise.all([
      worker("loaded", { WORKER_ROLE: "hold,crawl", CONCURRENCY: "2", PAGE_MS: "5" }).then(async (w) => (await w.waitFor({ event: "start" }), w)),
      worker("idle", { WORKER_ROLE: "crawl", CONCURRENCY: "2", PAGE_MS: "5" }),
    ]);
    await coordinator();

    victim.child.kill("SIGKILL");
    const resumed = await idle.waitFor({ event: "start", taskId: task.id });
    expect(resumed.attempt).toBe(2);
    expect((resumed.checkpoint as { page: number }).page).toBeGreaterThanOrEqual(2);
    await eventually(async () => (await status(task.id)) === "completed", 20_000, "completion");

    const done = await store.get(task.id);
    expect(done).toMatchObject({ attempts: 2, workerId: "idle", result: { pages: 100, resumedFrom: (resumed.checkpoint as { page: number }).page } });
    expect(loaded.lines.filter((l) => l.taskId === task.id)).toEqual([]);
    expect((await store.listWorkers()).workers.find((w) => w.workerId === "victim")?.status).toBe("dead");
    const story = (await store.events(task.id)).map((e) => [e.event, e.fromWorkerId ?? e.toWorkerId]);
    const checkpoints = story.filter(([e]) => e === "checkpoint").length;
    expect(story.filter(([e]) => e !== "checkpoint")).toEqual([
      ["created", null], ["claimed", "victim"], ["requeued", "victim"], ["reassigned", "victim"],
      ["claimed", "idle"], ["completed", "idle"],
    ]);
    expect(checkpoints).toBeGreaterThanOrEqual(100);
    const [reassignment] = await store.reassignments({ taskId: task.id });
    expect(reassignment).toMatchObject({ fromWorkerId: "victim", toWorkerId: "idle", success: true, reason: "Worker died unexpectedly" });
  });

  scenario("SIGSTOP: the frozen worker loses its lease; after SIGCONT its signal fires and its writes are refused", async ({ store, worker, coordinator, status, freeze }) => {
    const { task } = await store.enqueue({ taskType: "crawl", params: { pages: 100 } });
    const frozen = await worker("frozen", { WORKER_ROLE: "crawl", PAGE_MS: "300" });
    await frozen.waitFor({ event: "page", page: 1 });
    await worker("rescuer", { WORKER_ROLE: "crawl", PAGE_MS: "5" });
    await coordinator();

    await freeze(frozen);
    await eventually(async () => (await status(task.id)) === "completed", 20_000, "the rescuer to finish");
    frozen.child.kill("SIGCONT");
    const aborted = await frozen.waitFor({ event: "aborted", taskId: task.id });
    expect(aborted.reason).toBe("lease_lost");
    await new Promise((r) => setTimeout(r, 500)); // let the revived worker try whatever it would do
    const done = await store.get(task.id);
    expect(done).toMatchObject({ status: "completed", workerId: "rescuer", result: { pages: 100 } });
    expect(frozen.lines.some((l) => l.event === "done")).toBe(false);
    expect((await store.events(task.id)).filter((e) => e.event === "completed")).toHaveLength(1);
  });

  scenario("SIGTERM: running tasks are released with their checkpoint, no attempt charged, the worker inactive", async ({ store, worker }) => {
    const { task } = await store.enqueue({ taskType: "crawl", params: { pages: 100 } });
    const leaving = await worker("leaving", { WORKER_ROLE: "crawl", PAGE_MS: "100", SHUTDOWN_GRACE_MS: "300" });
    await leaving.waitFor({ event: "page", page: 2 });
    leaving.child.kill("SIGTERM");
    expect(await leaving.exited).toBe(0);
    const released = await store.get(task.id);
    expect(released).toMatchObject({ status: "pending", attempts: 0, workerId: null });
    expect((released?.checkpoint as { page: number }).page).toBeGreaterThanOrEqual(2);
    expect((await store.listWorkers()).workers[0]).toMatchObject({ workerId: "leaving", status: "inactive" });
    expect((await store.events(task.id)).at(-1)).toMatchObject({ event: "released", fromWorkerId: "leaving" });
  });

  scenario("SIGTERM to a process of two workers handling signals and a coordinator: all stop, the tasks released and the leadership given up, before it exits", async ({ store, worker }) => {
    const { task: crawl } = await store.enqueue({ taskType: "crawl", params: { pages: 100 } });
    const { task: hold } = await store.enqueue({ taskType: "hold" });
    const leaving = await worker("pair", { WORKER_ROLE: "crawl", SECOND_WORKER_ROLE: "hold", WITH_COORDINATOR: "1", PAGE_MS: "100", SHUTDOWN_GRACE_MS: "300" });
    await leaving.waitFor({ event: "page", page: 1 });
    await leaving.waitFor({ event: "start", taskId: hold.id });
    leaving.child.kill("SIGTERM");
    // The first worker to stop exited the process under the other: its task stayed leased to a worker shown active.
    expect(await leaving.exited).toBe(0);
    for (const id of [crawl.id, hold.id]) expect(await store.get(id)).toMatchObject({ status: "pending", attempts: 0, workerId: null });
    const registry = (await store.listWorkers()).workers.map((w) => [w.workerId, w.status]).sort();
    expect(registry).toEqual([["pair", "inactive"], ["pair-2", "inactive"]]);
    // The coordinator made on the pool resigned: ended with the process, it held its leadership for its lease.
    expect((await store.leadershipStatus(COORDINATOR_LEADERSHIP)).holder).toBeNull();
  });

  scenario("SIGTERM after the tasks waiting in its buffer were cancelled: the running task is released and the worker exits 0, holding nothing", async ({ store, worker, status }) => {
    // An instant task first (the worker learns its tasks are short, so its next claim fills its buffer), then long ones.
    await store.enqueue({ taskType: "crawl", params: { pages: 0 }, priority: 10 });
    const long = new Set((await Promise.all([0, 1, 2, 3, 4].map(() => store.enqueue({ taskType: "crawl", params: { pages: 100 } })))).map((r) => r.task.id));
    // Beats 2 s apart: none comes between the cancels and the stop.
    const leaving = await worker("leaving", { WORKER_ROLE: "crawl", PAGE_MS: "100", SHUTDOWN_GRACE_MS: "300", HEARTBEAT_INTERVAL_MS: "2000" });
    // The buffer holds what the worker's handlers get through in 50 ms at their measured pace: all
    // four only if the instant task took under 12.5 ms, which a loaded machine's scheduler can undo
    // (a run under load waited 10 s for a fifth task never claimed). One waiting is what this test needs.
    const held = await eventually(async () => {
      // The instant task's completion may still be on its way.
      const ids = (await store.list({ workerId: "leaving", status: "running" })).tasks.map((t) => t.id).filter((id) => long.has(id));
      return ids.length >= 2 ? ids : null;
    }, 10_000, "leaving to hold a long task running and one waiting");
    const running = (await leaving.waitFor({ event: "page", page: 1 })).taskId;
    const waiting = held.filter((id) => id !== running);
    for (const id of waiting) await store.cancel(id);
    leaving.child.kill("SIGTERM");
    expect(await leaving.exited).toBe(0);
    expect(await store.get(running as number)).toMatchObject({ status: "pending", attempts: 0, workerId: null });
    for (const id of waiting) expect(await status(id)).toBe("cancelled");
    expect((await store.listWorkers()).workers[0]).toMatchObject({ workerId: "leaving", status: "inactive" });
  });

  scenario("a second SIGTERM ends the grace period at once: the running task is aborted and released, the worker inactive", async ({ store, worker }) => {
    const { task } = await store.enqueue({ taskType: "hold" });
    const stubborn = await worker("stubborn", { WORKER_ROLE: "hold", SHUTDOWN_GRACE_MS: "60000" });
    await stubborn.waitFor({ event: "start" });
    stubborn.child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 200)); // the first signal is being handled: grace period running
    const sent = Date.now();
    stubborn.child.kill("SIGTERM");
    expect(await stubborn.exited).toBe(0);
    expect(Date.now() - sent).toBeLessThan(5000);
    expect(await store.get(task.id)).toMatchObject({ status: "pending", attempts: 0, workerId: null });
    expect((await store.listWorkers()).workers.find((w) => w.workerId === "stubborn")).toMatchObject({ status: "inactive" });
  });

  scenario("the fail policy ends a dead worker's task failed with 'Worker died unexpectedly'", async ({ store, worker, coordinator, status }) => {
    const { task } = await store.enqueue({ taskType: "crawl", params: { pages: 50 } });
    const victim = await worker("victim", { WORKER_ROLE: "crawl" });
    await victim.waitFor({ event: "page", page: 1 });
    await coordinator({ recoveryPolicies: { crawl: "fail" } });
    victim.child.kill("SIGKILL");
    await eventually(async () => (await status(task.id)) === "failed", 20_000, "the task to fail");
    expect((await store.get(task.id))?.errorMessage).toBe("Worker died unexpectedly");
  });

  scenario("the fail policy fails only the task that ran: a dead worker held no others of its type in its buffer, which go back to the pool unharmed", async ({ store, worker, coordinator, status }) => {
    await store.registerTaskType({ name: "crawl", recoveryPolicy: "fail" });
    // A quick task first: its pace makes the worker fill a buffer, which the slow fail-policy tasks must stay out of.
    await store.enqueue({ taskType: "busy" });
    const slow = await store.enqueueMany(Array.from({ length: 8 }, () => ({ taskType: "crawl", params: { pages: 20 } })));
    const victim = await worker("victim", { WORKER_ROLE: "busy,crawl", BUSY_MS: "1", PAGE_MS: "100" });
    const ran = await victim.waitFor({ event: "page", page: 1 });
    await coordinator();
    victim.child.kill("SIGKILL");
    await eventually(async () => (await status(ran.taskId as number)) === "failed", 20_000, "the task that ran to fail");
    expect((await store.get(ran.taskId as number))?.errorMessage).toBe("Worker died unexpectedly");
    const rest = await Promise.all(slow.filter(({ task }) => task.id !== ran.taskId).map(({ task }) => store.get(task.id)));
    expect(rest.map((t) => [t?.status, t?.attempts])).toEqual(Array.from({ length: 7 }, () => ["pending", 0]));
  });

  scenario("with no healthy worker the reassignment event says so, and the task still completes later", async ({ store, worker, coordinator, status }) => {
    const { task } = await store.enqueue({ taskType: "crawl", params: { pages: 20 } });
    const victim = await worker("victim", { WORKER_ROLE: "crawl" });
    await victim.waitFor({ event: "page", page: 1 });
    await coordinator();
    victim.child.kill("SIGKILL");
    const [event] = await eventually(() => store.reassignments({ taskId: task.id }).then((r) => (r.length > 0 ? r : null)), 20_000, "a reassignment event");
    expect(event).toMatchObject({ success: false, toWorkerId: null, errorMessage: "No healthy worker available for role crawl", fromWorkerId: "victim" });
    const latecomer = await worker("latecomer", { WORKER_ROLE: "crawl", PAGE_MS: "5" });
    expect((await latecomer.waitFor({ event: "start", taskId: task.id })).attempt).toBe(2);
    await eventually(async () => (await status(task.id)) === "completed", 20_000, "completion");
  });

  scenario("two coordinators: each dead worker is handled once", async ({ store, worker, coordinator, status }) => {
    const { task } = await store.enqueue({ taskType: "crawl", params: { pages: 100 } });
    const victim = await worker("victim", { WORKER_ROLE: "crawl", PAGE_MS: "200" });
    await victim.waitFor({ event: "page", page: 1 });
    await worker("survivor", { WORKER_ROLE: "crawl", PAGE_MS: "5" });
    const [a, b] = [await coordinator(), await coordinator()];
    victim.child.kill("SIGKILL");
    await eventually(async () => (await status(task.id)) === "completed", 20_000, "completion");
    await new Promise((r) => setTimeout(r, 600)); // a few more sweeps by whoever leads
    expect([a.isLeader, b.isLeader].filter(Boolean)).toHaveLength(1);
    expect(await store.reassignments({ taskId: task.id })).toHaveLength(1);
    expect((await store.events(task.id)).filter((e) => e.event === "requeued")).toHaveLength(1);
  });

  scenario("a handler that busy-loops for 3× dead_after is not declared dead and completes once", async ({ store, worker, coordinator, status }) => {
    const { task } = await store.enqueue({ taskType: "busy" });
    const cruncher = await worker("cruncher", { WORKER_ROLE: "busy", BUSY_MS: String(3 * DEAD_AFTER_MS) });
    await coordinator();
    await cruncher.waitFor({ event: "done", taskId: task.id }, 20_000);
    await eventually(async () => (await status(task.id)) === "completed", 10_000, "completion");
    expect(await store.get(task.id)).toMatchObject({ attempts: 1, workerId: "cruncher" });
    expect((await store.listWorkers()).workers[0].status).toBe("active");
    expect((await store.events(task.id)).map((e) => e.event)).toEqual(["created", "claimed", "completed"]);
  }, { alone: true });
});
