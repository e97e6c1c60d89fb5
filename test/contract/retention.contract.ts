import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/core/errors.js";
import type { PruneOptions } from "../../src/core/retention.js";
import type { Store } from "../../src/store/store.js";
import type { StoreKind } from "../helpers/stores.js";
import { claimOne, countsByReading, useStore } from "./context.js";

const DAY_MS = 86_400_000;
const WEEK = 7 * 86_400;
const KEEP_FAILED: PruneOptions = { completedAfterSeconds: WEEK, cancelledAfterSeconds: WEEK, failedAfterSeconds: null, batchSize: 500 };
const SWEEP = { staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 };

/** Every task with its audit trail, and the worker registry and reassignment history: what prune may touch. */
async function everything(store: Store) {
  const { tasks } = await store.list({}, { limit: 1000, order: "oldest" });
  const trails = await Promise.all(tasks.map(async (t) => ({ task: t, events: await store.events(t.id) })));
  return { trails, workers: (await store.listWorkers()).workers, reassignments: await store.reassignments({ limit: 1000 }) };
}

export function retentionContract(kind: StoreKind) {
  describe("retention (prune)", () => {
    const ctx = useStore(kind);
    const finish = async (workerId = "w1") => {
      const lease = await claimOne(ctx.store, workerId, { taskTypes: ["a"] });
      await ctx.store.start(lease.id, lease);
      await ctx.store.complete(lease.id, lease, { result: { ok: true } });
      return lease.id;
    };

    it("keeps the counts exact as it deletes completed tasks, before and after a sweep folds their tallies", async () => {
      const check = async () => expect(await ctx.store.counts()).toEqual(await countsByReading(ctx.store));
      await ctx.store.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ taskType: i % 2 ? "a" : "b" })));
      const batch = await ctx.store.claim({ workerId: "w1", limit: 5 });
      await ctx.store.completeMany(batch.map((t) => ({ id: t.id, lease: t })));
      ctx.clock.advance(8 * DAY_MS);
      await ctx.store.enqueue({ taskType: "a" });
      const recent = await finish();
      const prune = (batchSize: number) => ctx.store.prune({ ...KEEP_FAILED, batchSize });
      expect((await prune(2)).tasks).toBe(2);
      await check();
      await ctx.store.sweep(SWEEP);
      await check();
      expect((await prune(500)).tasks).toBe(3);
      await check();
      await ctx.store.sweep(SWEEP);
      await check();
      expect(await ctx.store.counts()).toMatchObject({ byStatus: { completed: 1, pending: 1 }, byType: { a: { completed: 1 } } });
      expect((await ctx.store.get(recent))?.status).toBe("completed");
    });

    it("deletes old completed and cancelled tasks with their events and reassignment rows; nothing else changes", async () => {
      // Old, finished: a completion, a cancellation, and a task recovered from a dead worker, then completed.
      await ctx.store.enqueue({ taskType: "a" });
      const completed = await finish();
      const cancelled = (await ctx.store.enqueue({ taskType: "a" })).task.id;
      await ctx.store.cancel(cancelled);
      await ctx.store.enqueue({ taskType: "a" });
      await ctx.store.workerHeartbeat({ workerId: "w-dead", roles: ["a"], capacity: 1, currentLoad: 1, tasksProcessed: 0 });
      const lost = await claimOne(ctx.store, "w-dead");
      ctx.clock.advance(121_000);
      await ctx.store.sweep(SWEEP);
      expect(await ctx.store.reassignments({ taskId: lost.id })).not.toEqual([]);
      const recovered = await finish("w2");
      // Old, kept: a failure (the dead-letter queue), a task never claimed, a task still running.
      await ctx.store.enqueue({ taskType: "a", maxAttempts: 1 });
      const failedLease = await claimOne(ctx.store);
      await ctx.store.fail(failedLease.id, failedLease, { error: "boom" });
      await ctx.store.enqueue({ taskType: "a" });
      const running = await claimOne(ctx.store, "w3", { leaseSeconds: 86_400 });
      await ctx.store.start(running.id, running);
      const pending = (await ctx.store.enqueue({ taskType: "b" })).task.id;
      ctx.clock.advance(8 * DAY_MS);
      // Recent, finished: kept.
      await ctx.store.enqueue({ taskType: "a" });
      const recent = await finish();

      const before = await everything(ctx.store);
      const doomed = [completed, cancelled, recovered];
      const doomedEvents = before.trails.filter((t) => doomed.includes(t.task.id)).reduce((n, t) => n + t.events.length, 0);
      const doomedMoves = before.reassignments.filter((r) => doomed.includes(r.taskId)).length;
      expect(doomedMoves).toBeGreaterThan(0);

      // The dead worker, silent for 8 days, goes too, with its worker_dead event.
      expect(await ctx.store.prune(KEEP_FAILED)).toEqual({ tasks: 3, events: doomedEvents + 1, reassignments: doomedMoves, workers: 1, scheduleTicks: 0, idempotencyKeys: 0 });
      for (const id of doomed) {
        expect(await ctx.store.get(id)).toBeNull();
        expect(await ctx.store.events(id)).toEqual([]);
      }
      const after = await everything(ctx.store);
      expect(after.trails.map((t) => t.task.id)).toEqual([failedLease.id, running.id, pending, recent]);
      expect(after.trails).toEqual(before.trails.filter((t) => !doomed.includes(t.task.id)));
      expect(after.reassignments).toEqual(before.reassignments.filter((r) => !doomed.includes(r.taskId)));
      expect(after.workers).toEqual(before.workers.filter((w) => w.workerId !== "w-dead"));

      // A second pass finds nothing; an explicit failed-task age then takes the old failure.
      expect(await ctx.store.prune(KEEP_FAILED)).toEqual({ tasks: 0, events: 0, reassignments: 0, workers: 0, scheduleTicks: 0, idempotencyKeys: 0 });
      expect((await ctx.store.prune({ ...KEEP_FAILED, failedAfterSeconds: WEEK })).tasks).toBe(1);
      expect(await ctx.store.get(failedLease.id)).toBeNull();
      expect((await everything(ctx.store)).trails.map((t) => t.task.id)).toEqual([running.id, pending, recent]);
    });

    it("deletes at most batchSize tasks per status per pass, oldest first", async () => {
      const ids: number[] = [];
      for (let i = 0; i < 5; i++) {
        await ctx.store.enqueue({ taskType: "a" });
        ids.push(await finish());
        ctx.clock.advance(1000);
      }
      ctx.clock.advance(8 * DAY_MS);
      const batch = { ...KEEP_FAILED, batchSize: 2 };
      expect((await ctx.store.prune(batch)).tasks).toBe(2);
      expect(await ctx.store.get(ids[0])).toBeNull();
      expect(await ctx.store.get(ids[1])).toBeNull();
      expect(await ctx.store.get(ids[2])).not.toBeNull();
      expect((await ctx.store.prune(batch)).tasks).toBe(2);
      expect((await ctx.store.prune(batch)).tasks).toBe(1);
      expect((await ctx.store.prune(batch)).tasks).toBe(0);
    });

    it("keeps a parent while its follow-up remains, and takes it once the follow-up is gone", async () => {
      await ctx.store.enqueue({ taskType: "a" });
      const lease = await claimOne(ctx.store);
      const { followUps } = await ctx.store.complete(lease.id, lease, { followUps: [{ taskType: "a" }] });
      ctx.clock.advance(8 * DAY_MS);
      expect((await ctx.store.prune(KEEP_FAILED)).tasks).toBe(0);
      expect((await ctx.store.get(followUps[0].id))?.parentId).toBe(lease.id);
      await finish();
      ctx.clock.advance(8 * DAY_MS);
      expect((await ctx.store.prune(KEEP_FAILED)).tasks).toBe(1);
      expect(await ctx.store.get(followUps[0].id)).toBeNull();
      expect(await ctx.store.get(lease.id)).not.toBeNull();
      expect((await ctx.store.prune(KEEP_FAILED)).tasks).toBe(1);
      expect(await ctx.store.get(lease.id)).toBeNull();
    });

    it("forgets dead and shut-down workers (and their worker_dead events) after the completed age; live ones stay", async () => {
      const beat = (workerId: string) => ctx.store.workerHeartbeat({ workerId, roles: ["a"], capacity: 1, currentLoad: 0, tasksProcessed: 0 });
      await beat("w-dead");
      await beat("w-gone");
      await ctx.store.shutdownWorker("w-gone");
      ctx.clock.advance(121_000);
      await beat("w-live");
      await ctx.store.sweep(SWEEP);
      expect((await ctx.store.listWorkers()).workers.map((w) => [w.workerId, w.status]).sort()).toEqual([["w-dead", "dead"], ["w-gone", "inactive"], ["w-live", "active"]].sort());
      expect((await ctx.store.prune(KEEP_FAILED)).workers).toBe(0);
      ctx.clock.advance(8 * DAY_MS);
      await beat("w-live");
      // w-dead's worker_dead event is the one worker-level event.
      expect(await ctx.store.prune(KEEP_FAILED)).toEqual({ tasks: 0, events: 1, reassignments: 0, workers: 2, scheduleTicks: 0, idempotencyKeys: 0 });
      expect((await ctx.store.listWorkers()).workers.map((w) => w.workerId)).toEqual(["w-live"]);
    });

    it("forgets old schedule ticks whose tasks are gone, but never a schedule's latest, nor one whose tasks remain", async () => {
      await ctx.store.saveSchedule({ name: "hourly", taskType: "a", cron: "0 * * * *" });
      const fire = async () => {
        ctx.clock.advance(60 * 60_000);
        const [run] = await ctx.store.fireDueSchedules({ graceSeconds: 240 });
        return run.taskIds[0];
      };
      await fire();
      await finish();
      const running = await fire(); // its task is still running, so its tick stays
      await claimOne(ctx.store, "w2", { taskTypes: ["a"] });
      await fire();
      await finish();
      ctx.clock.advance(8 * DAY_MS);
      // The first tick's task and the last's go; the first tick goes with its task.
      expect(await ctx.store.prune(KEEP_FAILED)).toMatchObject({ tasks: 2, scheduleTicks: 1 });
      expect(await ctx.store.prune(KEEP_FAILED)).toMatchObject({ tasks: 0, scheduleTicks: 0, idempotencyKeys: 0 });
      await ctx.store.cancel(running, { reason: "no longer needed" });
      ctx.clock.advance(8 * DAY_MS);
      expect(await ctx.store.prune(KEEP_FAILED)).toMatchObject({ tasks: 1, scheduleTicks: 1 });
      // The latest tick stays however old: the schedule's record of its last run.
      expect(await ctx.store.prune(KEEP_FAILED)).toMatchObject({ tasks: 0, scheduleTicks: 0, idempotencyKeys: 0 });
      expect((await ctx.store.getSchedule("hourly"))?.lastRunAt).toEqual(new Date(Date.UTC(2030, 0, 1, 3)));
    });

    it("refuses bad options and changes nothing", async () => {
      await ctx.store.enqueue({ taskType: "a" });
      await finish();
      ctx.clock.advance(8 * DAY_MS);
      const before = await everything(ctx.store);
      const bad: [unknown, RegExp][] = [
        [{ ...KEEP_FAILED, batchSize: 0 }, /batchSize/],
        [{ ...KEEP_FAILED, completedAfterSeconds: 0 }, /completedAfterSeconds/],
        [{ ...KEEP_FAILED, cancelledAfterSeconds: "a week" }, /cancelledAfterSeconds/],
        [{ ...KEEP_FAILED, failedAfterSeconds: 60 }, /failedAfterSeconds \(60\) is shorter than completedAfterSeconds/],
        [{ ...KEEP_FAILED, olderThan: 1 }, /olderThan/],
        [{ completedAfterSeconds: WEEK }, /cancelledAfterSeconds|failedAfterSeconds|batchSize/],
      ];
      for (const [options, message] of bad) {
        const attempt = ctx.store.prune(options as PruneOptions);
        await expect(attempt).rejects.toBeInstanceOf(ValidationError);
        await expect(attempt).rejects.toThrow(message);
      }
      expect(await everything(ctx.store)).toEqual(before);
    });
  });
}
