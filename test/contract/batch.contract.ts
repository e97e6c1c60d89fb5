import { describe, expect, it } from "vitest";
import { InvalidTransitionError, LeaseLostError, TaskNotFoundError, ValidationError } from "../../src/core/errors.js";
import type { ClaimedTask } from "../../src/core/task.js";
import type { BatchOutcome } from "../../src/store/store.js";
import type { StoreKind } from "../helpers/stores.js";
import { claimOne, useStore } from "./context.js";

const okIds = (outcomes: BatchOutcome[]) => outcomes.filter((o) => o.ok).map((o) => o.id);
const errorOf = (outcome: BatchOutcome) => (outcome.ok ? null : outcome.error);

/** completeMany and failMany: many writes in one transaction, each fenced by its own lease. */
export function batchContract(kind: StoreKind) {
  describe("batched completions and failures", () => {
    const ctx = useStore(kind);

    const claimMany = async (n: number, workerId = "w1", extra = {}): Promise<ClaimedTask[]> => {
      await ctx.store.enqueueMany(Array.from({ length: n }, (_, i) => ({ taskType: "a", params: { i }, ...extra })));
      const claimed = await ctx.store.claim({ workerId, limit: n, start: true });
      expect(claimed).toHaveLength(n);
      return claimed;
    };

    it("completes many tasks, each with its result and its event, outcomes in input order", async () => {
      const tasks = await claimMany(3);
      ctx.clock.advance(1000);
      const outcomes = await ctx.store.completeMany(tasks.map((t, i) => ({ id: t.id, lease: t, result: { n: i } })));
      expect(outcomes).toEqual(tasks.map((t) => ({ id: t.id, ok: true, status: "completed", scheduledFor: t.scheduledFor })));
      for (const [i, t] of tasks.entries()) {
        expect(await ctx.store.get(t.id)).toMatchObject({ status: "completed", result: { n: i }, completedAt: ctx.clock.now(), leaseExpiresAt: null });
        expect((await ctx.store.events(t.id)).at(-1)).toMatchObject({ event: "completed", fromWorkerId: "w1", createdAt: ctx.clock.now() });
      }
    });

    it("refuses a stale lease, an unknown task and a finished one item by item, applying the rest", async () => {
      const [kept, stolen, done] = await claimMany(3);
      await ctx.store.release(stolen.id, stolen);
      const successor = await claimOne(ctx.store, "w2");
      await ctx.store.complete(done.id, done);
      const stolenBefore = await ctx.store.get(stolen.id);
      const eventsBefore = await ctx.store.events(stolen.id);

      const outcomes = await ctx.store.completeMany([
        { id: kept.id, lease: kept, result: "mine" },
        { id: stolen.id, lease: stolen, result: "stale" },
        { id: 424242, lease: kept },
        { id: done.id, lease: done },
      ]);
      expect(outcomes.map((o) => o.id)).toEqual([kept.id, stolen.id, 424242, done.id]);
      expect(okIds(outcomes)).toEqual([kept.id]);
      expect(errorOf(outcomes[1])).toBeInstanceOf(LeaseLostError);
      expect(errorOf(outcomes[2])).toBeInstanceOf(TaskNotFoundError);
      expect(errorOf(outcomes[3])).toBeInstanceOf(InvalidTransitionError);
      expect(await ctx.store.get(stolen.id)).toEqual(stolenBefore);
      expect(await ctx.store.events(stolen.id)).toEqual(eventsBefore);
      expect((await ctx.store.get(stolen.id))?.workerId).toBe(successor.workerId);
      expect((await ctx.store.get(kept.id))?.result).toBe("mine");
    });

    it("refuses a bad item or a repeated id on its own, with a ValidationError naming it", async () => {
      const [a, b] = await claimMany(2);
      const outcomes = await ctx.store.completeMany([
        { id: a.id, lease: a, result: { at: new Date() } as never },
        { id: b.id, lease: b },
        { id: b.id, lease: b },
      ]);
      expect(errorOf(outcomes[0])?.message).toMatch(/result\.at is a Date/);
      expect(outcomes[1]).toMatchObject({ id: b.id, ok: true });
      expect(errorOf(outcomes[2])).toBeInstanceOf(ValidationError);
      expect(errorOf(outcomes[2])?.message).toMatch(/appears more than once/);
      expect((await ctx.store.get(a.id))?.status).toBe("running");
    });

    it("fails many: a retry after backoff, a final failure, a non-retryable one; each with its event", async () => {
      ctx.jitter.value = 0;
      const [retried, last, fatal] = await claimMany(3, "w1", { maxAttempts: 2, backoff: { baseSeconds: 10, jitter: 0 } });
      await ctx.store.fail(last.id, last, { error: "first" });
      ctx.clock.advance(10_000);
      const again = await claimOne(ctx.store, "w1");
      expect(again.id).toBe(last.id);
      const outcomes = await ctx.store.failMany([
        { id: retried.id, lease: retried, error: "HTTP 503" },
        { id: again.id, lease: again, error: "HTTP 503 again" },
        { id: fatal.id, lease: fatal, error: "bad input", retryable: false, stack: "ValidationError: bad input\n    at check (import.js:3:11)" },
      ]);
      const now = ctx.clock.now().getTime();
      // A final failure keeps the schedule it had: the second attempt's was due now, the first's 10 s ago.
      expect(outcomes.map((o) => (o.ok ? [o.status, o.scheduledFor.getTime() - now] : null))).toEqual([
        ["pending", 10_000],
        ["failed", 0],
        ["failed", -10_000],
      ]);
      expect(await ctx.store.get(retried.id)).toMatchObject({ status: "pending", workerId: null, leaseToken: null, errorMessage: "HTTP 503" });
      expect(await ctx.store.get(fatal.id)).toMatchObject({ status: "failed", attempts: 1, errorMessage: "bad input" });
      const lastEvents = (await Promise.all([retried, again, fatal].map((t) => ctx.store.events(t.id)))).map((e) => e.at(-1));
      expect(lastEvents.map((e) => [e?.event, e?.message, e?.fromWorkerId])).toEqual([
        ["retry_scheduled", "HTTP 503", "w1"],
        ["failed", "HTTP 503 again", "w1"],
        ["failed", "bad input", "w1"],
      ]);
      expect(lastEvents[0]?.data).toEqual({ attempt: 1, max_attempts: 2, retry_at: new Date(now + 10_000).toISOString() });
      expect(lastEvents[2]?.data).toEqual({ attempt: 1, max_attempts: 2, retry_at: null, stack: "ValidationError: bad input\n    at check (import.js:3:11)" });
    });

    it("fails many with a stale lease refused alone", async () => {
      const [mine, stolen] = await claimMany(2);
      await ctx.store.release(stolen.id, stolen);
      await claimOne(ctx.store, "w2");
      const outcomes = await ctx.store.failMany([
        { id: mine.id, lease: mine, error: "x", retryable: false },
        { id: stolen.id, lease: stolen, error: "stale", retryable: false },
      ]);
      expect(okIds(outcomes)).toEqual([mine.id]);
      expect(errorOf(outcomes[1])).toBeInstanceOf(LeaseLostError);
      expect((await ctx.store.get(stolen.id))?.status).toBe("claimed");
    });
  });
}
