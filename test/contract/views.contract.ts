import { describe, expect, it } from "vitest";
import type { WorkerBeat } from "../../src/core/worker.js";
import type { StoreKind } from "../helpers/stores.js";
import { useStore } from "./context.js";

const SWEEP = { staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 };
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/**
 * capacity() and reassignmentStats() read the monitoring views, which use the database's clock (now(), datetime('now')), so these tests set the store's clock to
 * the real time and seed rows relative to it.
 */
export function viewsContract(kind: StoreKind) {
  describe("monitoring views", () => {
    const ctx = useStore(kind);
    let start: number;
    const at = (offsetMs: number) => ctx.clock.set(new Date(start + offsetMs));
    const beat = (workerId: string, extra: Partial<WorkerBeat> = {}) =>
      ctx.store.workerHeartbeat({ workerId, roles: ["crawl"], capacity: 10, currentLoad: 0, tasksProcessed: 0, ...extra });
    const completeAll = async (n: number) => {
      for (const t of await ctx.store.claim({ workerId: "w9", limit: n })) await ctx.store.complete(t.id, t);
    };

    it("worker_status and v_worker_capacity report the seeded figures", async () => {
      start = Date.now();
      at(-2 * HOUR);
      await ctx.store.enqueue({ taskType: "crawl" });
      await completeAll(1); // too long ago to count as throughput
      at(-10 * MINUTE);
      await ctx.store.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }, { taskType: "crawl" }]);
      await completeAll(3);
      // Due later, so that no claim below takes it.
      await ctx.store.enqueueMany([{ taskType: "mail" }, { taskType: "mail", scheduledFor: new Date(start + HOUR) }]);
      for (const t of await ctx.store.claim({ workerId: "w9", taskTypes: ["mail"] })) await ctx.store.complete(t.id, t);
      await beat("gone-quiet"); // still 'active' (no sweep yet), but not heard from within 2 minutes
      at(-30_000);
      await beat("w1", { roles: ["crawl", "parse"], capacity: 4, currentLoad: 1 });
      at(0);
      await beat("w2", { capacity: 2, currentLoad: 2 });
      await ctx.store.enqueueMany([
        ...Array.from({ length: 6 }, () => ({ taskType: "crawl" })),
        { taskType: "crawl", scheduledFor: new Date(start + HOUR) },
      ]);
      await ctx.store.claim({ workerId: "w1" });
      const [running] = await ctx.store.claim({ workerId: "w2" });
      await ctx.store.start(running.id, running);
      await ctx.store.registerTaskType({ name: "parse", maxRunning: 3 });

      const workers = new Map((await ctx.store.listWorkers()).workers.map((w) => [w.workerId, w]));
      expect(workers.get("w1")).toMatchObject({ status: "active", hostname: null, capacity: 4, currentLoad: 1, loadPercent: 25, activeTasks: 1, roles: ["crawl", "parse"] });
      expect(workers.get("w2")).toMatchObject({ loadPercent: 100, activeTasks: 1 });
      expect(workers.get("gone-quiet")).toMatchObject({ loadPercent: 0, activeTasks: 0 });
      expect(workers.get("w1")?.secondsSinceHeartbeat).toBe(30);
      expect(workers.get("gone-quiet")?.secondsSinceHeartbeat).toBe(600);

      const capacity = new Map((await ctx.store.capacity()).map((r) => [r.taskType, r]));
      // 5 pending (4 ready, 1 scheduled later), 2 held; 3 done in the last hour by 2 live workers:
      // 1.5 tasks per worker-hour, 5 / 3 = 1.67 hours to drain, ceil(5 / 1.5 / N) workers for N hours.
      expect(capacity.get("crawl")).toEqual({
        taskType: "crawl", pendingTasks: 5, readyTasks: 4, runningTasks: 2, activeWorkers: 2, completedLastHour: 3,
        maxRunning: null, tasksPerWorkerHour: 1.5, estimatedHoursToDrain: 1.67,
        workersNeeded: { for1Hour: 4, for4Hours: 1, for8Hours: 1 }, oldestReadySeconds: expect.any(Number),
      });
      // Due as the test began: as old as the test's own run since.
      expect(capacity.get("crawl")!.oldestReadySeconds).toBeLessThan(30);
      // Registered, staffed by w1, no work and no throughput yet: nothing to drain, so no worker needed.
      expect(capacity.get("parse")).toEqual({
        taskType: "parse", pendingTasks: 0, readyTasks: 0, runningTasks: 0, activeWorkers: 1, completedLastHour: 0,
        maxRunning: 3, tasksPerWorkerHour: 0, estimatedHoursToDrain: 0,
        workersNeeded: { for1Hour: 0, for4Hours: 0, for8Hours: 0 }, oldestReadySeconds: null,
      });
      // A role no live worker serves: its backlog does not drain, and a worker's pace is unknown.
      expect(capacity.get("mail")).toEqual({
        taskType: "mail", pendingTasks: 1, readyTasks: 0, runningTasks: 0, activeWorkers: 0, completedLastHour: 1,
        maxRunning: null, tasksPerWorkerHour: null, estimatedHoursToDrain: null,
        workersNeeded: { for1Hour: null, for4Hours: null, for8Hours: null }, oldestReadySeconds: null,
      });
      // The last hour's completions are the same once a sweep has folded their tallies (PostgreSQL).
      await ctx.store.sweep(SWEEP);
      const again = new Map((await ctx.store.capacity()).map((r) => [r.taskType, r]));
      expect(again).toEqual(new Map([...capacity].map(([type, r]) => [type, type === "crawl" ? { ...r, oldestReadySeconds: expect.any(Number) } : r])));
    });

    it("v_worker_capacity rounds its ratios as decimals, half up", async () => {
      // 3 tasks an hour among 20 workers is 0.15 a worker-hour, and 3 pending at 40 an hour drain in
      // 0.075 hours: neither is a binary fraction, and SQLite's round() of the float (0.1499…, 0.0749…)
      // gave 0.1 and 0.07 where PostgreSQL's numeric gives 0.2 and 0.08.
      start = Date.now();
      at(-10 * MINUTE);
      await ctx.store.enqueueMany(Array.from({ length: 3 }, () => ({ taskType: "crawl" })));
      await ctx.store.enqueueMany(Array.from({ length: 40 }, () => ({ taskType: "mail" })));
      await completeAll(43);
      await ctx.store.enqueueMany(Array.from({ length: 3 }, () => ({ taskType: "mail" })));
      at(0);
      for (let i = 0; i < 20; i++) await beat(`r${i}`, { roles: ["crawl", "mail"] });
      const capacity = new Map((await ctx.store.capacity()).map((r) => [r.taskType, r]));
      expect(capacity.get("crawl")).toMatchObject({ completedLastHour: 3, activeWorkers: 20, tasksPerWorkerHour: 0.2 });
      expect(capacity.get("mail")).toMatchObject({
        pendingTasks: 3, completedLastHour: 40, activeWorkers: 20, tasksPerWorkerHour: 2, estimatedHoursToDrain: 0.08,
        workersNeeded: { for1Hour: 2, for4Hours: 1, for8Hours: 1 },
      });
    });

    it("the reassignment rate rounds as a decimal, half up", async () => {
      // 247 of 2,000 is 12.35 %: SQLite's round() of the float (12.3499…) gave 12.3. Two thousand
      // reassignments are seeded in SQL both dialects read alike, rather than swept one by one.
      start = Date.now();
      at(0);
      const { task } = await ctx.store.enqueue({ taskType: "crawl" });
      await ctx.execute(`
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
        INSERT INTO reassignment_events (task_id, from_worker_id, reason, success, created_at)
        SELECT ${task.id}, 'gone', 'seeded', i <= 247, '${new Date(start - MINUTE).toISOString()}' FROM n`);
      expect(await ctx.store.reassignmentRate()).toEqual({ total: 2000, successful: 247, successRatePercent: 12.4 });
    });

    it("v_worker_capacity counts a worker that lists its role twice once", async () => {
      start = Date.now();
      at(0);
      await beat("w1", { roles: ["delta", "delta", "delta"] });
      await ctx.store.enqueueMany(Array.from({ length: 4 }, () => ({ taskType: "delta" })));
      expect((await ctx.store.listWorkers()).workers.find((w) => w.workerId === "w1")?.roles).toEqual(["delta"]);
      expect((await ctx.store.capacity()).find((r) => r.taskType === "delta")).toMatchObject({ activeWorkers: 1, pendingTasks: 4 });
    });

    it("v_worker_capacity: how long the longest-waiting ready task has waited since it was due", async () => {
      start = Date.now();
      const ofType = async (taskType: string) => (await ctx.store.capacity()).find((r) => r.taskType === taskType)?.oldestReadySeconds;
      // Enqueued 10 minutes ago, failed at once, due again a minute later: waiting 9 minutes, not 10.
      at(-10 * MINUTE);
      await ctx.store.enqueue({ taskType: "late", backoff: { baseSeconds: 60, factor: 1, maxSeconds: 60, jitter: 0 } });
      const [retried] = await ctx.store.claim({ workerId: "w9", taskTypes: ["late"] });
      expect((await ctx.store.fail(retried.id, retried, { error: "HTTP 503" })).status).toBe("pending");
      at(-5 * MINUTE);
      await ctx.store.enqueue({ taskType: "late" });
      // Due in an hour: pending but not ready, so it is not waiting yet.
      await ctx.store.enqueueMany([{ taskType: "late", scheduledFor: new Date(start + HOUR) }, { taskType: "later", scheduledFor: new Date(start + HOUR) }]);
      at(0);
      const waited = await ofType("late");
      expect(waited).toBeGreaterThanOrEqual(540);
      expect(waited).toBeLessThan(570);
      expect(await ofType("later")).toBeNull();
      // Once it is claimed, the next one is the longest-waiting.
      expect((await ctx.store.claim({ workerId: "w9", taskTypes: ["late"] }))[0].id).toBe(retried.id);
      const next = await ofType("late");
      expect(next).toBeGreaterThanOrEqual(300);
      expect(next).toBeLessThan(330);
    });

    it("reassignment views: 24-hour success rate, failing workers, tasks reassigned more than once", async () => {
      start = Date.now();
      at(-26 * HOUR);
      await beat("ancient");
      const { task: twice } = await ctx.store.enqueue({ taskType: "crawl" });
      await ctx.store.claim({ workerId: "ancient" });
      at(-25 * HOUR);
      expect((await ctx.store.sweep(SWEEP)).unassigned).toEqual([twice.id]); // outside the 24-hour window
      at(-5 * MINUTE);
      await beat("dying");
      await ctx.store.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }]);
      expect(await ctx.store.claim({ workerId: "dying", limit: 3 })).toHaveLength(3);
      at(0);
      await beat("helper", { capacity: 1 });
      const result = await ctx.store.sweep(SWEEP);
      expect([result.reassigned.length, result.unassigned.length]).toEqual([1, 2]);

      const stats = await ctx.store.reassignmentStats();
      expect(stats.last24Hours).toEqual({ total: 3, successful: 1, successRatePercent: 33.3 });
      expect(await ctx.store.reassignmentRate()).toEqual(stats.last24Hours);
      expect(stats.failingWorkers.map((r) => [r.workerId, r.failureCount])).toEqual([["dying", 3], ["ancient", 1]]);
      expect(stats.failingWorkers[0].lastFailureAt).toBeInstanceOf(Date);
      expect(stats.repeatedTasks.map((r) => [r.taskId, r.reassignmentCount])).toEqual([[twice.id, 2]]);
    });
  });
}
