import { describe, expect, it } from "vitest";
import { IdempotencyKeyReusedError, ValidationError } from "../../src/core/errors.js";
import type { EnqueueInput } from "../../src/core/task.js";
import type { StoreKind } from "../helpers/stores.js";
import { claimOne, useStore } from "./context.js";

const DAY_MS = 86_400_000;

export function idempotencyContract(kind: StoreKind) {
  describe("enqueue with an idempotency key", () => {
    const ctx = useStore(kind);
    const allTasks = async () => (await ctx.store.list({}, { limit: 1000, order: "oldest" })).tasks;

    it("creates a single call's task once and answers a repeat with it, whatever became of it", async () => {
      const input = { taskType: "a", params: { storeId: 42 } };
      const first = await ctx.store.enqueue(input, { idempotencyKey: "k-1" });
      expect(first.created).toBe(true);
      expect(first.replayed).toBeUndefined();
      expect(await ctx.store.enqueue(input, { idempotencyKey: "k-1" })).toEqual({ task: first.task, created: false, replayed: true });

      const lease = await claimOne(ctx.store);
      const claimed = await ctx.store.enqueue(input, { idempotencyKey: "k-1" });
      expect(claimed).toMatchObject({ created: false, replayed: true, task: { id: first.task.id, status: "claimed" } });
      await ctx.store.start(lease.id, lease);
      await ctx.store.complete(lease.id, lease, { result: { pages: 3 } });
      const completed = await ctx.store.enqueue(input, { idempotencyKey: "k-1" });
      expect(completed).toMatchObject({ created: false, replayed: true, task: { id: first.task.id, status: "completed", result: { pages: 3 } } });
      expect((await allTasks()).map((t) => t.id)).toEqual([first.task.id]);

      // A failed task is answered as it is too; another key makes another task.
      const other = await ctx.store.enqueue({ taskType: "a", maxAttempts: 1 }, { idempotencyKey: "k-2" });
      const failing = await claimOne(ctx.store);
      await ctx.store.fail(failing.id, failing, { error: "boom" });
      expect(await ctx.store.enqueue({ taskType: "a", maxAttempts: 1 }, { idempotencyKey: "k-2" })).toMatchObject({ created: false, task: { id: other.task.id, status: "failed" } });
      expect(await allTasks()).toHaveLength(2);
    });

    it("covers a whole batch with one key: a repeat answers the first call's tasks in input order", async () => {
      const pending = await ctx.store.enqueue({ taskType: "a", uniqueKey: "u-1" });
      const batch: EnqueueInput[] = [{ taskType: "b", params: { n: 1 } }, { taskType: "a", uniqueKey: "u-1" }, { taskType: "b", params: { n: 2 } }];
      const first = await ctx.store.enqueueMany(batch, { idempotencyKey: "batch-1" });
      expect(first.map((r) => r.created)).toEqual([true, false, true]);
      expect(first[1].task.id).toBe(pending.task.id);
      // The unique key's holder has gone on meanwhile: the repeat still answers it, and creates nothing.
      await claimOne(ctx.store, "w1", { taskTypes: ["a"] });
      const again = await ctx.store.enqueueMany(batch, { idempotencyKey: "batch-1" });
      expect(again.map((r) => [r.task.id, r.created, r.replayed])).toEqual(first.map((r) => [r.task.id, false, true]));
      expect(again[1].task.status).toBe("claimed");
      expect(await allTasks()).toHaveLength(3);
    });

    it("takes params written in another key order as the same request", async () => {
      const first = await ctx.store.enqueue({ taskType: "a", params: { x: 1, y: { p: 1, q: 2 } }, priority: 3 }, { idempotencyKey: "k" });
      const again = await ctx.store.enqueue({ priority: 3, params: { y: { q: 2, p: 1 }, x: 1 }, taskType: "a" }, { idempotencyKey: "k" });
      expect(again).toMatchObject({ created: false, replayed: true, task: { id: first.task.id } });
    });

    it("refuses the key with a different request, creating nothing", async () => {
      await ctx.store.enqueue({ taskType: "a", params: { n: 1 } }, { idempotencyKey: "k" });
      await ctx.store.enqueueMany([{ taskType: "a" }, { taskType: "b" }], { idempotencyKey: "kb" });
      const different: [string, () => Promise<unknown>][] = [
        ["other params", () => ctx.store.enqueue({ taskType: "a", params: { n: 2 } }, { idempotencyKey: "k" })],
        ["other type", () => ctx.store.enqueue({ taskType: "b", params: { n: 1 } }, { idempotencyKey: "k" })],
        ["another option", () => ctx.store.enqueue({ taskType: "a", params: { n: 1 }, priority: 1 }, { idempotencyKey: "k" })],
        ["a batch of the same task", () => ctx.store.enqueueMany([{ taskType: "a", params: { n: 1 } }], { idempotencyKey: "k" })],
        ["fewer tasks", () => ctx.store.enqueueMany([{ taskType: "a" }], { idempotencyKey: "kb" })],
        ["more tasks", () => ctx.store.enqueueMany([{ taskType: "a" }, { taskType: "b" }, { taskType: "c" }], { idempotencyKey: "kb" })],
        ["another order", () => ctx.store.enqueueMany([{ taskType: "b" }, { taskType: "a" }], { idempotencyKey: "kb" })],
      ];
      for (const [what, call] of different) {
        const error = await call().then(
          () => new Error(`${what}: accepted`),
          (e: unknown) => e,
        );
        expect(error, what).toBeInstanceOf(IdempotencyKeyReusedError);
        expect((error as IdempotencyKeyReusedError).code).toBe("idempotency_key_reused");
        expect((error as Error).message).toMatch(/^Idempotency key "kb?" was already used for a different enqueue request; .*use a new key/);
      }
      expect(await allTasks()).toHaveLength(3);
    });

    it("remembers nothing of a refused call: the key stays free", async () => {
      await ctx.store.registerTaskType({ name: "typed", paramsSchema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } });
      await expect(ctx.store.enqueue({ taskType: "typed", params: {} }, { idempotencyKey: "k" })).rejects.toThrow(ValidationError);
      await expect(ctx.store.enqueueMany([{ taskType: "a" }, { taskType: "typed", params: {} }], { idempotencyKey: "kb" })).rejects.toThrow(/item 1/);
      expect(await allTasks()).toEqual([]);
      expect((await ctx.store.enqueue({ taskType: "typed", params: { n: 1 } }, { idempotencyKey: "k" })).created).toBe(true);
      expect((await ctx.store.enqueueMany([{ taskType: "a" }], { idempotencyKey: "kb" }))[0].created).toBe(true);
    });

    it("refuses a bad key, naming it, and writes nothing", async () => {
      for (const key of ["", "x".repeat(256), "has space", "tab\there", "line\n", "café", "\u0000"]) {
        const single = ctx.store.enqueue({ taskType: "a" }, { idempotencyKey: key });
        await expect(single, JSON.stringify(key)).rejects.toThrow(ValidationError);
        await expect(ctx.store.enqueue({ taskType: "a" }, { idempotencyKey: key })).rejects.toThrow(/^Invalid enqueue options: idempotencyKey/);
        await expect(ctx.store.enqueueMany([{ taskType: "a" }], { idempotencyKey: key })).rejects.toThrow(/^Invalid enqueue options: idempotencyKey/);
      }
      await expect(ctx.store.enqueue({ taskType: "a" }, { idempotencyKey: "has space" })).rejects.toThrow(/must be 1 to 255 visible ASCII characters/);
      expect(await allTasks()).toEqual([]);
      expect((await ctx.store.enqueue({ taskType: "a" }, { idempotencyKey: "x".repeat(255) })).created).toBe(true);
    });

    it("creates the tasks once when calls with one key race, on separate connections", async () => {
      const stores = [ctx.store, await ctx.another(), await ctx.another()];
      const batch: EnqueueInput[] = [{ taskType: "a", params: { n: 1 } }, { taskType: "a", params: { n: 2 } }];
      for (let round = 0; round < 5; round++) {
        const key = `race-${round}`;
        const answers = await Promise.all(stores.flatMap((s) => [s.enqueueMany(batch, { idempotencyKey: key }), s.enqueueMany(batch, { idempotencyKey: key })]));
        expect(answers.filter((a) => a[0].created)).toHaveLength(1);
        const ids = answers[0].map((r) => r.task.id);
        for (const a of answers) expect(a.map((r) => r.task.id)).toEqual(ids);
      }
      const singles = await Promise.all(stores.flatMap((s) => [s.enqueue({ taskType: "b" }, { idempotencyKey: "one" }), s.enqueue({ taskType: "b" }, { idempotencyKey: "one" })]));
      expect(singles.filter((a) => a.created)).toHaveLength(1);
      expect(new Set(singles.map((a) => a.task.id)).size).toBe(1);
      expect(await allTasks()).toHaveLength(11);
    });

    it("takes more keyed calls at once than the store has connections, of a type it has not seen", async () => {
      // Each keyed call holds a connection for its transaction; one that waited for another connection
      // to read the type (or the clock) waited for ever once the calls held them all (10 by default).
      const calls = Array.from({ length: 25 }, (_, i) => ctx.store.enqueueMany([{ taskType: "never-seen", params: { i } }], { idempotencyKey: `many-${i}` }));
      const answers = await Promise.all(calls);
      expect(answers.map(([r]) => r.task.params)).toEqual(Array.from({ length: 25 }, (_, i) => ({ i })));
      expect(answers.every(([r]) => r.created)).toBe(true);
    });

    it("keeps keys a day at least; the retention pass forgets them after that, and unkeyed enqueues leave none", async () => {
      if (ctx.store.remote) return; // retention runs beside the database
      const keep = { completedAfterSeconds: 7 * 86_400, cancelledAfterSeconds: 7 * 86_400, failedAfterSeconds: null, batchSize: 500 };
      const first = await ctx.store.enqueue({ taskType: "a" }, { idempotencyKey: "k" });
      await ctx.store.enqueue({ taskType: "a" });
      await ctx.store.enqueueMany([{ taskType: "a" }, { taskType: "a" }]);
      ctx.clock.advance(DAY_MS - 1000);
      expect((await ctx.store.prune(keep)).idempotencyKeys).toBe(0);
      expect((await ctx.store.enqueue({ taskType: "a" }, { idempotencyKey: "k" })).task.id).toBe(first.task.id);
      ctx.clock.advance(2000);
      expect((await ctx.store.prune(keep)).idempotencyKeys).toBe(1);
      expect((await ctx.store.prune(keep)).idempotencyKeys).toBe(0);
      const later = await ctx.store.enqueue({ taskType: "a" }, { idempotencyKey: "k" });
      expect(later.created).toBe(true);
      expect(later.task.id).not.toBe(first.task.id);
    });

    it("says so when retention deleted a remembered task before its key expired", async () => {
      if (ctx.store.remote) return; // retention runs beside the database
      const first = await ctx.store.enqueue({ taskType: "a" }, { idempotencyKey: "k" });
      const lease = await claimOne(ctx.store);
      await ctx.store.start(lease.id, lease);
      await ctx.store.complete(lease.id, lease);
      ctx.clock.advance(3600_000);
      const prune = { completedAfterSeconds: 60, cancelledAfterSeconds: 60, failedAfterSeconds: null, batchSize: 500 };
      expect(await ctx.store.prune(prune)).toMatchObject({ tasks: 1, idempotencyKeys: 0 });
      await expect(ctx.store.enqueue({ taskType: "a" }, { idempotencyKey: "k" })).rejects.toThrow(
        new RegExp(`^Task ${first.task.id}, created by the first call with idempotency key "k", was deleted by retention since`),
      );
      expect(await allTasks()).toEqual([]);
    });
  });
}
