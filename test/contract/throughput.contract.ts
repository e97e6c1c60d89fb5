import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/core/errors.js";
import type { Throughput } from "../../src/core/monitoring.js";
import type { Store } from "../../src/store/store.js";
import type { StoreKind } from "../helpers/stores.js";
import { claimOne, useStore } from "./context.js";

const T0 = Date.parse("2030-01-01T00:00:00.000Z");

/** throughput(): tasks that finished per minute of the store's clock, and how long they waited to be claimed. */
export function throughputContract(kind: StoreKind) {
  describe("throughput", () => {
    const ctx = useStore(kind);
    const at = (seconds: number) => ctx.clock.set(new Date(T0 + seconds * 1000));

    it("counts completed and finally failed tasks per minute, with their mean and max pickup latency", async () => {
      at(-7200);
      const old = await ctx.store.enqueue({ taskType: "crawl" });
      await ctx.store.complete(old.task.id, await claimOne(ctx.store)); // two hours ago: outside every window below

      at(0);
      const a = (await ctx.store.enqueue({ taskType: "crawl" })).task;
      at(10);
      await ctx.store.complete(a.id, await claimOne(ctx.store)); // minute 0, picked up after 10 s
      at(30);
      const b = (await ctx.store.enqueue({ taskType: "crawl" })).task;
      at(32);
      const bLease = await claimOne(ctx.store); // 2 s
      at(60);
      const c = (await ctx.store.enqueue({ taskType: "crawl", maxAttempts: 1 })).task;
      at(64);
      const cLease = await claimOne(ctx.store); // 4 s
      at(120);
      const d = (await ctx.store.enqueue({ taskType: "crawl", maxAttempts: 2 })).task;
      at(121);
      const dLease = await claimOne(ctx.store);
      at(125);
      await ctx.store.complete(b.id, bLease); // minute 2
      at(130);
      await ctx.store.fail(d.id, dLease, { error: "try again" }); // retried: not a failure yet
      at(170);
      await ctx.store.fail(c.id, cLease, { error: "boom" }); // minute 2, failed for good
      at(180);
      // Claimed by id an hour before it was due: no negative latency.
      const f = (await ctx.store.enqueue({ taskType: "crawl", scheduledFor: new Date(T0 + 3_600_000) })).task;
      await ctx.store.complete(f.id, await ctx.store.claimById(f.id, { workerId: "w1" }));
      const cancelled = (await ctx.store.enqueue({ taskType: "crawl" })).task;
      await ctx.store.cancel(cancelled.id);
      at(210);

      const recent = await ctx.store.throughput({ minutes: 4 });
      expect(recent.minutes).toEqual([
        { minute: new Date(T0), completed: 1, failed: 0, pickupSeconds: 10 },
        { minute: new Date(T0 + 60_000), completed: 0, failed: 0, pickupSeconds: null },
        { minute: new Date(T0 + 120_000), completed: 1, failed: 1, pickupSeconds: 3 },
        { minute: new Date(T0 + 180_000), completed: 1, failed: 0, pickupSeconds: 0 },
      ]);
      expect(recent).toMatchObject({ completed: 3, failed: 1, pickupSeconds: { mean: 4, max: 10 } });

      const hour = await ctx.store.throughput();
      expect(hour.minutes).toHaveLength(60);
      expect(hour.minutes[0].minute).toEqual(new Date(T0 - 56 * 60_000));
      expect(hour.minutes.slice(-4)).toEqual(recent.minutes);
      expect(hour).toMatchObject({ completed: 3, failed: 1 });

      const lastMinute = await ctx.store.throughput({ minutes: 1 });
      expect(lastMinute).toEqual({ minutes: [recent.minutes[3]], completed: 1, failed: 0, pickupSeconds: { mean: 0, max: 0 } });
    });

    it("times pickups to the millisecond, as the tasks' own times give them", async () => {
      // Two pickups of 4 and 5 ms: a mean of 4.5 ms, which rounds up. SQLite's julianday() is a float
      // of days, some 20 µs off at this date, and its pickups came out as 3.98 and 4.99 ms.
      at(0);
      const [a, b] = await ctx.store.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }]);
      ctx.clock.set(new Date(T0 + 4));
      const first = await claimOne(ctx.store);
      ctx.clock.set(new Date(T0 + 5));
      const second = await claimOne(ctx.store);
      expect([first.id, second.id]).toEqual([a.task.id, b.task.id]);
      await ctx.store.complete(first.id, first);
      await ctx.store.complete(second.id, second);
      const expected = { minutes: [{ minute: new Date(T0), completed: 2, failed: 0, pickupSeconds: 0.005 }], completed: 2, failed: 0, pickupSeconds: { mean: 0.005, max: 0.005 } };
      expect(await throughputByReading(ctx.store, 1, ctx.clock.now())).toEqual(expected);
      expect(await ctx.store.throughput({ minutes: 1 })).toEqual(expected);
      await ctx.store.sweep({ staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 });
      expect(await ctx.store.throughput({ minutes: 1 })).toEqual(expected);
    });

    it("counts every way into completed and failed, of every type or one, folded by a sweep or not, and keeps a minute's figures when its tasks are retried or deleted", async () => {
      const sweep = () => ctx.store.sweep({ staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 });
      const check = async () => {
        for (const taskType of ["a", "b"]) {
          expect(await ctx.store.throughput({ minutes: 10, taskType })).toEqual(await throughputByReading(ctx.store, 10, ctx.clock.now(), taskType));
        }
        const read = await throughputByReading(ctx.store, 10, ctx.clock.now());
        expect(await ctx.store.throughput({ minutes: 10 })).toEqual(read);
        return read;
      };
      at(0);
      await ctx.store.enqueueMany(Array.from({ length: 12 }, (_, i) => ({ taskType: i % 3 === 0 ? "b" : "a", maxAttempts: 1 })));
      at(5);
      // Completed one at a time with a follow-up, and in a batch with one item refused.
      const one = await claimOne(ctx.store, "w1", { taskTypes: ["a"] });
      at(7);
      await ctx.store.complete(one.id, one, { followUps: [{ taskType: "c" }] });
      const batch = await ctx.store.claim({ workerId: "w2", limit: 5 });
      at(70);
      await ctx.store.completeMany([...batch.slice(0, 4).map((t) => ({ id: t.id, lease: t })), { id: batch[4].id, lease: { ...batch[4], leaseToken: "stale" } }]);
      await check();
      // Failed for good one at a time and in a batch; leases that ran out on their last attempt, failed by the sweep.
      const failing = await ctx.store.claim({ workerId: "w3", limit: 3 });
      at(75);
      await ctx.store.fail(failing[0].id, failing[0], { error: "boom" });
      await ctx.store.failMany(failing.slice(1).map((t) => ({ id: t.id, lease: t, error: "boom" })));
      const expiring = await claimOne(ctx.store, "w4", { leaseSeconds: 30 });
      at(140);
      await check();
      const swept = await sweep();
      // The batch's refused item held its lease too, and it ran out as well.
      expect(swept.failed.sort((x, y) => x - y)).toEqual([batch[4].id, expiring.id].sort((x, y) => x - y));
      await check();
      await sweep();
      const before = await check();
      expect(before).toMatchObject({ completed: 5, failed: 5 });
      expect(before.minutes.slice(-3).map((m) => [m.completed, m.failed])).toEqual([[1, 0], [4, 3], [0, 2]]);

      // What finished stays counted in its minute when the task is retried or deleted.
      await ctx.store.retry(failing[0].id);
      await ctx.store.prune({ completedAfterSeconds: 60, cancelledAfterSeconds: 60, failedAfterSeconds: null, batchSize: 100 });
      // All but the parent of a follow-up still pending, which retention keeps.
      expect((await ctx.store.list({ status: "completed" })).tasks.map((t) => t.id)).toEqual([one.id]);
      expect(await ctx.store.throughput({ minutes: 10 })).toEqual(before);
    });

    it("forgets, at a sweep, the minutes older than its longest window and an hour", async () => {
      at(0);
      await ctx.store.enqueue({ taskType: "crawl" });
      const lease = await claimOne(ctx.store);
      await ctx.store.complete(lease.id, lease);
      // Read by a clock a day behind the sweeper's: the minute is there until a sweep a day and an hour later.
      const lagging = async () => {
        const now = ctx.clock.now();
        at(1439 * 60);
        const { completed } = await ctx.store.throughput({ minutes: 1440 });
        ctx.clock.set(now);
        return completed;
      };
      at(1500 * 60 - 1);
      await ctx.store.sweep({ staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 });
      expect(await lagging()).toBe(1);
      at(1501 * 60);
      await ctx.store.sweep({ staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 });
      expect(await lagging()).toBe(0);
    });

    it("is all zeros with nothing finished, and refuses a window it cannot give", async () => {
      await ctx.store.enqueue({ taskType: "crawl" });
      const empty = await ctx.store.throughput({ minutes: 2 });
      expect(empty).toEqual({
        minutes: [
          { minute: new Date(T0 - 60_000), completed: 0, failed: 0, pickupSeconds: null },
          { minute: new Date(T0), completed: 0, failed: 0, pickupSeconds: null },
        ],
        completed: 0,
        failed: 0,
        pickupSeconds: { mean: null, max: null },
      });
      for (const minutes of [0, 1441, 1.5]) await expect(ctx.store.throughput({ minutes })).rejects.toBeInstanceOf(ValidationError);
      await expect(ctx.store.throughput({ minutes: 0 })).rejects.toThrow(/minutes/);
      await expect(ctx.store.throughput({ taskType: "no spaces" })).rejects.toThrow(/taskType/);
    });
  });
}

/** throughput() as a full read of the tasks gives it (at most 1,000 tasks), written out rather than shared with the stores. */
async function throughputByReading(store: Store, minutes: number, now: Date, taskType?: string): Promise<Throughput> {
  const since = Math.floor(now.getTime() / 60_000) * 60_000 - (minutes - 1) * 60_000;
  const rows = Array.from({ length: minutes }, (_, i) => ({ minute: new Date(since + i * 60_000), completed: 0, failed: 0, pickups: [] as number[] }));
  const { tasks } = await store.list({ status: ["completed", "failed"], ...(taskType ? { taskType } : {}) }, { limit: 1000 });
  for (const t of tasks) {
    const row = rows[Math.floor((t.completedAt!.getTime() - since) / 60_000)];
    if (!row) continue;
    row[t.status as "completed" | "failed"]++;
    if (t.claimedAt) row.pickups.push(Math.max(0, (t.claimedAt.getTime() - t.scheduledFor.getTime()) / 1000));
  }
  const mean = (xs: number[]) => (xs.length === 0 ? null : Math.round((xs.reduce((a, b) => a + b, 0) / xs.length) * 1000) / 1000);
  const all = rows.flatMap((r) => r.pickups);
  return {
    minutes: rows.map((r) => ({ minute: r.minute, completed: r.completed, failed: r.failed, pickupSeconds: mean(r.pickups) })),
    completed: rows.reduce((n, r) => n + r.completed, 0),
    failed: rows.reduce((n, r) => n + r.failed, 0),
    pickupSeconds: { mean: mean(all), max: all.length === 0 ? null : Math.max(...all) },
  };
}
