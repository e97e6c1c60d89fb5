import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/core/errors.js";
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
    });
  });
}
