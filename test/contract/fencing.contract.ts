import { describe, expect, it } from "vitest";
import { LeaseLostError, TaskNotFoundError } from "../../src/core/errors.js";
import type { Lease } from "../../src/core/task.js";
import type { Store } from "../../src/store/store.js";
import type { StoreKind } from "../helpers/stores.js";
import { claimOne, useStore } from "./context.js";

/** Every lease-guarded call, so each can be shown to refuse a stale holder. */
const GUARDED: [string, (s: Store, id: number, lease: Lease) => Promise<unknown>][] = [
  ["start", (s, id, l) => s.start(id, l)],
  ["heartbeat", (s, id, l) => s.heartbeat(id, l)],
  ["checkpoint", (s, id, l) => s.checkpoint(id, l, { stale: true })],
  ["progress", (s, id, l) => s.progress(id, l, 0.9)],
  ["complete", (s, id, l) => s.complete(id, l, { result: { stale: true }, followUps: [{ taskType: "stale" }] })],
  ["fail", (s, id, l) => s.fail(id, l, { error: "stale" })],
  ["release", (s, id, l) => s.release(id, l, { checkpoint: { stale: true } })],
];

export function fencingContract(kind: StoreKind) {
  describe("fencing", () => {
    const ctx = useStore(kind);

    it.each(GUARDED)("refuses %s from the previous holder once the task was claimed again", async (_, call) => {
      await ctx.store.enqueue({ taskType: "a" });
      const old = await claimOne(ctx.store, "w1");
      await ctx.store.release(old.id, old); // taken back (as recovery would)
      const current = await claimOne(ctx.store, "w2");
      await ctx.store.start(current.id, current);
      await ctx.store.checkpoint(current.id, current, { page: 3 });
      const before = await ctx.store.get(old.id);
      const eventsBefore = await ctx.store.events(old.id);

      ctx.clock.advance(1000);
      const error = (await call(ctx.store, old.id, old).catch((e) => e)) as LeaseLostError;
      expect(error).toBeInstanceOf(LeaseLostError);
      expect(error.code).toBe("lease_lost");

      expect(await ctx.store.get(old.id)).toEqual(before);
      expect(await ctx.store.events(old.id)).toEqual(eventsBefore);
      expect((await ctx.store.counts()).byType.stale).toBeUndefined();
      // The current holder is unaffected.
      expect((await ctx.store.complete(current.id, current)).task.status).toBe("completed");
    });

    // The same worker id holds the task again, so only the token tells the stale lease from the current one.
    it.each(GUARDED)("refuses %s from the same worker's earlier lease", async (_, call) => {
      await ctx.store.enqueue({ taskType: "a" });
      const old = await claimOne(ctx.store, "w1");
      await ctx.store.release(old.id, old);
      const current = await claimOne(ctx.store, "w1");
      await ctx.store.start(current.id, current);
      const before = await ctx.store.get(old.id);
      const eventsBefore = await ctx.store.events(old.id);

      ctx.clock.advance(1000);
      await expect(call(ctx.store, old.id, old)).rejects.toBeInstanceOf(LeaseLostError);
      expect(await ctx.store.get(old.id)).toEqual(before);
      expect(await ctx.store.events(old.id)).toEqual(eventsBefore);
      expect((await ctx.store.complete(current.id, current)).task.status).toBe("completed");
    });

    it.each(GUARDED)("refuses %s after recovery put the task back in the pool", async (_, call) => {
      await ctx.store.enqueue({ taskType: "a" });
      const old = await claimOne(ctx.store, "w1");
      await ctx.store.release(old.id, old);
      await expect(call(ctx.store, old.id, old)).rejects.toBeInstanceOf(LeaseLostError);
      expect((await ctx.store.get(old.id))?.status).toBe("pending");
    });

    it("refuses a forged token and a borrowed token", async () => {
      await ctx.store.enqueue({ taskType: "a" });
      const lease = await claimOne(ctx.store, "w1");
      await expect(ctx.store.heartbeat(lease.id, { workerId: "w1", leaseToken: "not-a-uuid" })).rejects.toBeInstanceOf(LeaseLostError);
      await expect(ctx.store.complete(lease.id, { workerId: "w2", leaseToken: lease.leaseToken })).rejects.toBeInstanceOf(LeaseLostError);
      expect((await ctx.store.get(lease.id))?.status).toBe("claimed");
    });

    it("reports a task that does not exist", async () => {
      const error = await ctx.store.heartbeat(424242, { workerId: "w1", leaseToken: "x" }).catch((e) => e);
      expect(error).toBeInstanceOf(TaskNotFoundError);
      expect(error.message).toBe("Task 424242 does not exist");
      expect(await ctx.store.get(424242)).toBeNull();
    });
  });
}
