import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import type { Coordinator } from "../../src/coordinator/coordinator.js";
import { freeze } from "../helpers/freeze.js";
import { eventually } from "../helpers/logs.js";
import { createPostgres, createSqlite, type TestStore } from "../helpers/stores.js";
import { ChaosCluster } from "./cluster.js";
import type { HistoryEntry } from "./history.js";
import { CHAOS_COORDINATION, report, scale } from "./settings.js";

/**
 * Scenario 2, zombies: a worker is frozen with SIGSTOP mid-task, declared dead, its tasks reassigned
 * and re-claimed elsewhere; then SIGCONT brings it back. Every write it then attempts under its old
 * leases must be refused, and each of its handlers must see its signal fire (lease_lost). Repeated
 * for several workers in turn while the others keep working; the checker judges the whole run.
 */
const ROUNDS = scale("CHAOS_ZOMBIE_ROUNDS", 2);

describe.each([
  ["postgres", createPostgres],
  ["sqlite", createSqlite],
] as const)("zombies on %s", (name, create) => {
  let handle: TestStore;
  let cluster: ChaosCluster;
  let coordinator: Coordinator | null = null;
  afterEach(async () => {
    await coordinator?.stop();
    await cluster?.close();
    await handle?.cleanup();
  });

  it(`${ROUNDS} workers frozen and thawed after their tasks moved on: every late write refused, every handler aborted`, { timeout: 60_000 + ROUNDS * 20_000 }, async () => {
    handle = await create();
    cluster = await ChaosCluster.open(handle);
    await cluster.enqueueSteps(20 * ROUNDS + 20, { steps: 10, stepMs: 100 });
    const workers = await Promise.all([0, 1, 2].map(() => cluster.startWorker({ CONCURRENCY: "4" })));
    coordinator = cluster.pool.coordinator(CHAOS_COORDINATION);
    coordinator.start();
    const history = (id: string) => async () => (await cluster.history()).log.filter((e) => e.worker === id);

    let lateRefused = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const zombie = workers[round % workers.length];
      // Freeze it while it holds tasks mid-way (it has saved a checkpoint for each).
      const held = await eventually(async () => {
        const running = (await cluster.pool.list({ workerId: zombie.id, status: "running" })).tasks;
        return running.length > 0 ? running : null;
      }, 20_000, `${zombie.id} to hold tasks`);
      await freeze(zombie.child, handle.url);
      const frozenAt = Date.now();
      // Every task it held is taken back and claimed by someone else.
      await eventually(async () => {
        for (const t of held) {
          const events = await cluster.pool.events(t.id);
          const moved = events.some((e) => e.event === "claimed" && e.toWorkerId !== zombie.id && e.createdAt.getTime() >= frozenAt - 1000);
          if (!moved) return false;
        }
        return true;
      }, 30_000, `the tasks of frozen ${zombie.id} to be claimed elsewhere`);
      zombie.child.kill("SIGCONT");
      const tokens = new Map(held.map((t) => [t.id, t.leaseToken as string]));
      // Each of its handlers still running learns it lost the lease (from its heartbeat or a refused
      // write). A task it held in its buffer, claimed started but never handled, has no handler to
      // abort: the thawed worker drops it unrun (the next test); nor has one whose handler had returned.
      const aborted = await eventually(async () => {
        const lines = (await history(zombie.id)()).filter((e) => "token" in e && tokens.get(e.taskId) === e.token);
        const returned = new Set(lines.filter((e) => e.kind === "write" && (e.op === "complete" || e.op === "fail")).map((e) => e.taskId));
        const running = lines.filter((e) => e.kind === "handler" && !returned.has(e.taskId));
        const stopped = lines.filter((e): e is Extract<HistoryEntry, { kind: "aborted" }> => e.kind === "aborted");
        return running.length > 0 && running.every((h) => stopped.some((a) => a.taskId === h.taskId)) ? stopped : null;
      }, 20_000, `the handlers of thawed ${zombie.id} to abort`);
      expect(aborted.map((a) => a.reason)).toEqual(aborted.map(() => "lease_lost"));
      const late = (await history(zombie.id)()).filter((e) => e.kind === "write" && tokens.get(e.taskId) === e.token && e.sentAt >= frozenAt);
      expect(late.filter((e) => e.kind === "write" && e.ok === true)).toEqual([]);
      lateRefused += late.length;
    }

    await cluster.drained(60_000);
    await coordinator.stop();
    const summary = await cluster.check();
    report(`zombies on ${name}`, { rounds: ROUNDS, lateWritesRefused: lateRefused, ...summary });
    expect(summary.violations.slice(0, 20)).toEqual([]);
    expect(summary.completed).toBe(20 * ROUNDS + 20);
    expect(cluster.crashed()).toEqual([]);
  });

  it("a thawed worker starts none of the tasks it held ready whose leases ran out while it was frozen", { timeout: 30_000 }, async () => {
    handle = await create();
    cluster = await ChaosCluster.open(handle);
    // An instant task first (the worker learns its tasks are short, so its next claim fills its buffer), then slow ones.
    await cluster.pool.enqueue("sleep", { ms: 0 }, { priority: 10 });
    const slow = (await cluster.pool.enqueueMany(Array.from({ length: 6 }, () => ({ taskType: "sleep", params: { ms: 1500 }, maxAttempts: 50 })))).map((r) => r.task);
    // Its leases last as long as the coordinator waits before it declares a silent worker dead (2 s).
    const zombie = await cluster.startWorker({ CONCURRENCY: "1", WORKER_ROLE: "sleep", LEASE_SECONDS: "2" });
    // One of them running, the others claimed and waiting in its buffer. The database shows the claim
    // as it commits, before the worker has read its answer: frozen then (CI did), it had no handler
    // running, only tasks it had not yet started, so the freeze waits for the first slow one's handler.
    const slowIds = new Set(slow.map((t) => t.id));
    await eventually(async () => {
      if ((await cluster.pool.list({ workerId: zombie.id, status: "running" })).tasks.length !== slow.length) return false;
      return (await cluster.history()).log.some((e) => e.worker === zombie.id && e.kind === "handler" && slowIds.has(e.taskId));
    }, 10_000, `${zombie.id} to hold the slow tasks and run one`);
    await freeze(zombie.child, handle.url);
    coordinator = cluster.pool.coordinator(CHAOS_COORDINATION);
    coordinator.start();
    const other = await cluster.startWorker({ CONCURRENCY: String(slow.length), WORKER_ROLE: "sleep" });
    await eventually(async () => {
      const tasks = await Promise.all(slow.map((t) => cluster.pool.get(t.id)));
      return tasks.every((t) => t?.status === "completed" && t.workerId === other.id);
    }, 20_000, `${other.id} to complete the frozen worker's tasks`);
    const thawedAt = Date.now();
    zombie.child.kill("SIGCONT");
    // The task it was running when frozen ends: its completion is sent and refused, or, when its first
    // beat after the thaw says the lease is lost before that, its handler is aborted and nothing is sent
    // (CI saw no write within 10 s once). What it held ready goes with its leases either way.
    const acted = await eventually(async () => {
      const lines = (await cluster.history()).log.filter(
        (e) => e.worker === zombie.id && ((e.kind === "write" && e.sentAt >= thawedAt) || (e.kind === "aborted" && e.at >= thawedAt && e.reason === "lease_lost")),
      );
      return lines.length > 0 ? lines : null;
    }, 10_000, `${zombie.id} to write or stop a handler after its thaw`);
    expect(acted.filter((e) => e.kind === "write" && e.ok === true)).toEqual([]);
    await sleep(500);
    const started = (await cluster.history()).log.filter((e) => e.worker === zombie.id && e.kind === "handler" && e.at >= thawedAt);
    expect(started).toEqual([]);
    const summary = await cluster.check();
    expect(summary.violations).toEqual([]);
  });
});
