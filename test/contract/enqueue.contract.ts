import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/core/errors.js";
import type { EnqueueInput } from "../../src/core/task.js";
import type { StoreKind } from "../helpers/stores.js";
import { claimOne, useStore } from "./context.js";

export function enqueueContract(kind: StoreKind) {
  describe("enqueue", () => {
    const ctx = useStore(kind);

    it("creates a pending task with defaults and a created event", async () => {
      const { task, created } = await ctx.store.enqueue({ taskType: "product_resync", params: { storeId: 42 } });
      expect(created).toBe(true);
      expect(task).toMatchObject({
        taskType: "product_resync",
        params: { storeId: 42 },
        status: "pending",
        priority: 0,
        attempts: 0,
        maxAttempts: 3,
        workerId: null,
        leaseToken: null,
        checkpoint: null,
        parentId: null,
      });
      expect(task.scheduledFor).toEqual(ctx.clock.now());
      expect(task.createdAt).toEqual(ctx.clock.now());
      expect(task.backoff).toEqual({ baseSeconds: 5, factor: 2, maxSeconds: 3600, jitter: 0.2 });
      expect((await ctx.store.get(task.id))?.params).toEqual({ storeId: 42 });
      expect((await ctx.store.events(task.id)).map((e) => e.event)).toEqual(["created"]);
    });

    it("keeps every option it is given", async () => {
      const scheduledFor = new Date(ctx.clock.now().getTime() + 60_000);
      const { task } = await ctx.store.enqueue({
        taskType: "crawl",
        params: { nested: { list: [1, "two", null, true] } },
        priority: -7,
        scheduledFor,
        concurrencyKey: "store:1",
        uniqueKey: "crawl:1",
        maxAttempts: 9,
        backoff: { baseSeconds: 1, factor: 3 },
        timeoutSeconds: 30,
      });
      expect(task).toMatchObject({
        params: { nested: { list: [1, "two", null, true] } },
        priority: -7,
        scheduledFor,
        concurrencyKey: "store:1",
        uniqueKey: "crawl:1",
        maxAttempts: 9,
        backoff: { baseSeconds: 1, factor: 3, maxSeconds: 3600, jitter: 0.2 },
        timeoutSeconds: 30,
      });
    });

    it("makes a task due delaySeconds from now by the store's clock, whatever the producer's says", async () => {
      const { task } = await ctx.store.enqueue({ taskType: "a", delaySeconds: 90 });
      expect(task.scheduledFor).toEqual(new Date(ctx.clock.now().getTime() + 90_000));
      const [later, now] = await ctx.store.enqueueMany([{ taskType: "a", delaySeconds: 0.5 }, { taskType: "a", delaySeconds: 0 }]);
      expect(later.task.scheduledFor).toEqual(new Date(ctx.clock.now().getTime() + 500));
      expect(now.task.scheduledFor).toEqual(ctx.clock.now());
    });

    it("enqueues a batch in order, all in one go", async () => {
      const results = await ctx.store.enqueueMany([{ taskType: "a" }, { taskType: "b" }, { taskType: "c" }]);
      expect(results.map((r) => r.task.taskType)).toEqual(["a", "b", "c"]);
      expect(results.every((r) => r.created)).toBe(true);
      expect(results[0].task.id).toBeLessThan(results[1].task.id);
      expect(await ctx.store.enqueueMany([])).toEqual([]);
    });

    it("dedups pending tasks by unique_key, and only pending ones", async () => {
      const first = await ctx.store.enqueue({ taskType: "a", params: { n: 1 }, uniqueKey: "k" });
      const second = await ctx.store.enqueue({ taskType: "a", params: { n: 2 }, uniqueKey: "k" });
      expect(second.created).toBe(false);
      expect(second.task.id).toBe(first.task.id);
      expect(second.task.params).toEqual({ n: 1 });

      await claimOne(ctx.store);
      const third = await ctx.store.enqueue({ taskType: "a", params: { n: 3 }, uniqueKey: "k" });
      expect(third.created).toBe(true);
      expect(third.task.id).not.toBe(first.task.id);
    });

    it("dedups unique keys inside one batch and against the table", async () => {
      const existing = await ctx.store.enqueue({ taskType: "a", uniqueKey: "old" });
      const results = await ctx.store.enqueueMany([
        { taskType: "a", uniqueKey: "new" },
        { taskType: "a", uniqueKey: "old" },
        { taskType: "a" },
        { taskType: "a", uniqueKey: "new" },
      ]);
      expect(results.map((r) => r.created)).toEqual([true, false, true, false]);
      expect(results[1].task.id).toBe(existing.task.id);
      expect(results[3].task.id).toBe(results[0].task.id);
      expect((await ctx.store.counts()).byStatus.pending).toBe(3);
    });

    const bad: [string, unknown, RegExp][] = [
      ["a task type with spaces", { taskType: "bad type" }, /taskType/],
      ["an empty task type", { taskType: "" }, /taskType/],
      ["a task type that starts with a digit", { taskType: "1abc" }, /taskType/],
      ["params that are an array", { taskType: "a", params: [1, 2] }, /params/],
      ["params that are a string", { taskType: "a", params: "x" }, /params/],
      ["params that are null", { taskType: "a", params: null }, /params/],
      ["params holding a function", { taskType: "a", params: { f: () => 1 } }, /params\.f/],
      ["params holding a Date", { taskType: "a", params: { at: new Date() } }, /params\.at .*ISO string/],
      ["params holding NaN", { taskType: "a", params: { n: NaN } }, /params\.n/],
      ["a non-integer priority", { taskType: "a", priority: 1.5 }, /priority: Expected integer \(got 1\.5\)/],
      ["a priority given as a string", { taskType: "a", priority: "5" }, /priority/],
      ["a negative max_attempts", { taskType: "a", maxAttempts: -1 }, /maxAttempts/],
      ["zero max_attempts", { taskType: "a", maxAttempts: 0 }, /maxAttempts/],
      ["an invalid date", { taskType: "a", scheduledFor: new Date("nope") }, /scheduledFor/],
      ["a negative delay", { taskType: "a", delaySeconds: -1 }, /delaySeconds/],
      ["both a due time and a delay", { taskType: "a", scheduledFor: new Date("2030-01-01T00:00:00Z"), delaySeconds: 5 }, /scheduledFor and delaySeconds are both given/],
      ["an unknown field", { taskType: "a", prioirty: 3 }, /prioirty|additional/i],
      ["a backoff factor below 1", { taskType: "a", backoff: { factor: 0.5 } }, /backoff\.factor/],
    ];
    it.each(bad)("refuses %s with a clear error and writes nothing", async (_, input, message) => {
      await ctx.store.enqueue({ taskType: "before" });
      const error = await ctx.store.enqueue(input as EnqueueInput).catch((e) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect(error.code).toBe("validation_error");
      expect(error.message).toMatch(message);
      expect(error.issues.length).toBeGreaterThan(0);
      expect((await ctx.store.list()).tasks.map((t) => t.taskType)).toEqual(["before"]);
    });

    it("refuses a whole batch when one item is bad, naming the item", async () => {
      const error = await ctx.store.enqueueMany([{ taskType: "a" }, { taskType: "a", priority: 0.5 }]).catch((e) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect(error.message).toMatch(/^item 1: /);
      expect((await ctx.store.counts()).byStatus.pending).toBe(0);
    });
  });
}
