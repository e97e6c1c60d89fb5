import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/core/errors.js";
import { FAILURE_MESSAGE_SHOWN } from "../../src/core/schemas.js";
import type { JsonObject } from "../../src/core/task.js";
import type { StoreKind } from "../helpers/stores.js";
import { useStore } from "./context.js";

const T0 = Date.parse("2030-01-01T00:00:00.000Z");

/** failures(): the newest failed tasks grouped by type and error, the dead letter's view. */
export function failuresContract(kind: StoreKind) {
  describe("failures", () => {
    const ctx = useStore(kind);
    const at = (seconds: number) => ctx.clock.set(new Date(T0 + seconds * 1000));

    /** Enqueues a task of `taskType` and fails it for good with `error` at `seconds`; answers its id. */
    const failed = async (taskType: string, error: string, seconds: number, params: JsonObject = {}) => {
      at(seconds);
      const { task } = await ctx.store.enqueue({ taskType, params, maxAttempts: 1 });
      const [lease] = await ctx.store.claim({ workerId: "w1", taskTypes: [taskType] });
      await ctx.store.fail(task.id, lease, { error });
      return task.id;
    };

    it("groups the newest failed tasks by type and error, most tasks first, their ids newest failure first", async () => {
      expect(await ctx.store.failures()).toEqual({ groups: [], read: 0, more: false });
      const a1 = await failed("crawl", "timeout", 10);
      const b1 = await failed("crawl", "404", 20);
      const a2 = await failed("crawl", "timeout", 30);
      const c1 = await failed("resize", "timeout", 40);
      // Failed by a retry's failure, or still retrying: only what failed for good is in the dead letter.
      at(50);
      const retrying = (await ctx.store.enqueue({ taskType: "crawl", maxAttempts: 3 })).task;
      const [lease] = await ctx.store.claim({ workerId: "w1", taskTypes: ["crawl"] });
      await ctx.store.fail(retrying.id, lease, { error: "timeout" });
      await ctx.store.enqueue({ taskType: "crawl" });

      expect(await ctx.store.failures()).toEqual({
        groups: [
          { taskType: "crawl", errorMessage: "timeout", taskIds: [a2, a1], latestAt: new Date(T0 + 30_000) },
          // Two groups of one task each: the newer failure first.
          { taskType: "resize", errorMessage: "timeout", taskIds: [c1], latestAt: new Date(T0 + 40_000) },
          { taskType: "crawl", errorMessage: "404", taskIds: [b1], latestAt: new Date(T0 + 20_000) },
        ],
        read: 4,
        more: false,
      });
      // A task retried leaves the dead letter: three groups of one, the newest failure first.
      await ctx.store.retry(a1);
      expect((await ctx.store.failures()).groups.map((g) => g.taskIds)).toEqual([[c1], [a2], [b1]]);
    });

    it("reads the newest `limit` failures only, says older ones are left out, and answers an error's first characters", async () => {
      const long = "x".repeat(FAILURE_MESSAGE_SHOWN) + " and the rest";
      const first = await failed("crawl", long, 10, { big: "p".repeat(100_000) });
      const second = await failed("crawl", long, 20);
      const third = await failed("crawl", "timeout", 30);
      const all = await ctx.store.failures();
      expect(all).toMatchObject({ read: 3, more: false });
      expect(all.groups[0]).toEqual({ taskType: "crawl", errorMessage: "x".repeat(FAILURE_MESSAGE_SHOWN), taskIds: [second, first], latestAt: new Date(T0 + 20_000) });
      // No params in the answer: it is the size of its ids and messages, not of the tasks.
      expect(JSON.stringify(all).length).toBeLessThan(2 * FAILURE_MESSAGE_SHOWN);
      expect(await ctx.store.failures({ limit: 2 })).toEqual({
        groups: [
          { taskType: "crawl", errorMessage: "timeout", taskIds: [third], latestAt: new Date(T0 + 30_000) },
          { taskType: "crawl", errorMessage: "x".repeat(FAILURE_MESSAGE_SHOWN), taskIds: [second], latestAt: new Date(T0 + 20_000) },
        ],
        read: 2,
        more: true,
      });
      expect(await ctx.store.failures({ limit: 3 })).toMatchObject({ read: 3, more: false });
    });

    it("refuses a limit it cannot honour", async () => {
      for (const limit of [0, 10_001, 1.5, -1]) await expect(ctx.store.failures({ limit })).rejects.toBeInstanceOf(ValidationError);
      await expect(ctx.store.failures({ limit: 5, status: "failed" } as never)).rejects.toBeInstanceOf(ValidationError);
    });
  });
}
