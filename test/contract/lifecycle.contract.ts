import { describe, expect, it } from "vitest";
import { retryDelayMs } from "../../src/core/backoff.js";
import { InvalidTransitionError, LeaseLostError, UniqueKeyTakenError, ValidationError } from "../../src/core/errors.js";
import type { StoreKind } from "../helpers/stores.js";
import { claimOne, useStore } from "./context.js";

export function lifecycleContract(kind: StoreKind) {
  describe("lifecycle", () => {
    const ctx = useStore(kind);
    const claimNew = async (input: Record<string, unknown> = {}) => {
      await ctx.store.enqueue({ taskType: "a", ...input });
      return claimOne(ctx.store);
    };
    const eventNames = async (id: number) => (await ctx.store.events(id)).map((e) => e.event);

    it("runs pending → claimed → running → completed, with an event for each step", async () => {
      const lease = await claimNew();
      ctx.clock.advance(1000);
      const running = await ctx.store.start(lease.id, lease);
      expect(running).toMatchObject({ status: "running", startedAt: ctx.clock.now() });
      // Sent again under the same lease (its answer was lost): the running task, unchanged, no second event.
      ctx.clock.advance(500);
      expect(await ctx.store.start(lease.id, lease)).toMatchObject({ status: "running", startedAt: running.startedAt });
      await expect(ctx.store.start(lease.id, { workerId: "w1", leaseToken: "x".repeat(lease.leaseToken.length) })).rejects.toBeInstanceOf(LeaseLostError);
      ctx.clock.advance(500);
      const { task, followUps } = await ctx.store.complete(lease.id, lease, { result: { pages: 10 } });
      expect(task).toMatchObject({ status: "completed", result: { pages: 10 }, completedAt: ctx.clock.now(), workerId: "w1" });
      expect(followUps).toEqual([]);
      expect(await eventNames(lease.id)).toEqual(["created", "claimed", "started", "completed"]);
      const again = await ctx.store.complete(lease.id, lease).catch((e) => e);
      expect(again).toBeInstanceOf(InvalidTransitionError);
      expect(again.message).toBe(`Cannot complete task ${lease.id}: it is completed`);
    });

    it("accepts completion straight from claimed", async () => {
      const lease = await claimNew();
      expect((await ctx.store.complete(lease.id, lease)).task.status).toBe("completed");
    });

    it("extends the lease on heartbeat and records progress", async () => {
      const lease = await claimNew();
      await ctx.store.start(lease.id, lease);
      ctx.clock.advance(100_000);
      const beat = await ctx.store.heartbeat(lease.id, lease, { progress: 0.25 });
      expect(beat.lastHeartbeatAt).toEqual(ctx.clock.now());
      expect(beat.leaseExpiresAt).toEqual(new Date(ctx.clock.now().getTime() + 120_000));
      expect(beat.progress).toBe(0.25);
      const longer = await ctx.store.heartbeat(lease.id, lease, { leaseSeconds: 600 });
      expect(longer.leaseExpiresAt).toEqual(new Date(ctx.clock.now().getTime() + 600_000));
      expect(longer.progress).toBe(0.25);
      expect((await ctx.store.progress(lease.id, lease, 0.5)).progress).toBe(0.5);
    });

    it("saves checkpoints with an event each", async () => {
      const lease = await claimNew();
      await ctx.store.checkpoint(lease.id, lease, { page: 1 });
      const saved = await ctx.store.checkpoint(lease.id, lease, { page: 2, cursor: "abc" });
      expect(saved.checkpoint).toEqual({ page: 2, cursor: "abc" });
      const events = (await ctx.store.events(lease.id)).filter((e) => e.event === "checkpoint");
      expect(events.map((e) => e.data)).toEqual([{ page: 1 }, { page: 2, cursor: "abc" }]);
      await expect(ctx.store.checkpoint(lease.id, lease, { bad: [undefined] } as never)).rejects.toBeInstanceOf(ValidationError);
      // An undefined property is left out, as JSON.stringify does (see the JSON rules in core/validation.ts).
      expect((await ctx.store.checkpoint(lease.id, lease, { page: 3, gone: undefined } as never)).checkpoint).toEqual({ page: 3 });
    });

    it("reads only the latest events of a long timeline when asked, oldest first", async () => {
      const lease = await claimNew();
      for (let page = 1; page <= 5; page++) await ctx.store.checkpoint(lease.id, lease, { page });
      const all = await ctx.store.events(lease.id);
      expect(all.map((e) => e.event)).toEqual(["created", "claimed", "checkpoint", "checkpoint", "checkpoint", "checkpoint", "checkpoint"]);
      expect(await ctx.store.events(lease.id, { limit: 2 })).toEqual(all.slice(-2));
      expect(await ctx.store.events(lease.id, { limit: 0 })).toEqual([]);
      expect(await ctx.store.events(lease.id, { limit: 100 })).toEqual(all);
      await expect(ctx.store.events(lease.id, { limit: -1 })).rejects.toBeInstanceOf(ValidationError);
    });

    it("creates follow-up tasks atomically with the completion", async () => {
      const lease = await claimNew();
      const { followUps } = await ctx.store.complete(lease.id, lease, {
        followUps: [
          { taskType: "entry_point_discovery", params: { storeId: 1 } },
          { taskType: "entry_point_discovery", params: { storeId: 2 }, priority: 3 },
        ],
      });
      expect(followUps.map((t) => [t.taskType, t.params, t.parentId, t.status])).toEqual([
        ["entry_point_discovery", { storeId: 1 }, lease.id, "pending"],
        ["entry_point_discovery", { storeId: 2 }, lease.id, "pending"],
      ]);
      expect((await ctx.store.events(followUps[0].id))[0]).toMatchObject({ event: "created", message: `follow-up of task ${lease.id}` });
    });

    it("creates no follow-ups when the completion is refused", async () => {
      const lease = await claimNew();
      const stale = { ...lease, leaseToken: "00000000-0000-0000-0000-000000000000" };
      await expect(ctx.store.complete(lease.id, stale, { followUps: [{ taskType: "next" }] })).rejects.toThrow();
      const badFollowUp = await ctx.store.complete(lease.id, lease, { followUps: [{ taskType: "next", priority: 0.5 }] }).catch((e) => e);
      expect(badFollowUp).toBeInstanceOf(ValidationError);
      expect((await ctx.store.get(lease.id))?.status).toBe("claimed");
      expect((await ctx.store.counts()).byType.next).toBeUndefined();
    });

    it("a checkpoint's event keeps a copy up to 16 KiB; a larger one is recorded by its size, the task keeps it whole", async () => {
      await ctx.store.enqueue({ taskType: "big" });
      const [lease] = await ctx.store.claim({ workerId: "w1", taskTypes: ["big"] });
      const large = { page: 1, rows: "x".repeat(20_000) };
      const saved = await ctx.store.checkpoint(lease.id, lease, large);
      expect(saved.checkpoint).toEqual(large);
      const atLimit = { rows: "y".repeat(16 * 1024 - 11) }; // {"rows":"…"}: 16 KiB exactly
      await ctx.store.checkpoint(lease.id, lease, atLimit);
      const events = (await ctx.store.events(lease.id)).filter((e) => e.event === "checkpoint");
      expect(events.map((e) => e.data)).toEqual([{ omitted: true, bytes: JSON.stringify(large).length }, atLimit]);
      expect((await ctx.store.get(lease.id))?.checkpoint).toEqual(atLimit);
    });

    it("retries a failure after exponential backoff with jitter, keeping the checkpoint", async () => {
      ctx.jitter.value = 0.5;
      const lease = await claimNew({ maxAttempts: 3, backoff: { baseSeconds: 10, factor: 2, maxSeconds: 3600, jitter: 0.2 } });
      await ctx.store.checkpoint(lease.id, lease, { page: 4 });
      const failed = await ctx.store.fail(lease.id, lease, { error: "HTTP 503" });
      const delay = retryDelayMs(failed.backoff, 1, () => 0.5);
      expect(delay).toBe(9_000); // 10 s * (1 - 0.2 * 0.5)
      expect(failed).toMatchObject({ status: "pending", attempts: 1, errorMessage: "HTTP 503", workerId: null, leaseToken: null, checkpoint: { page: 4 } });
      expect(failed.scheduledFor).toEqual(new Date(ctx.clock.now().getTime() + delay));
      const event = (await ctx.store.events(lease.id)).at(-1)!;
      expect(event).toMatchObject({ event: "retry_scheduled", message: "HTTP 503", fromWorkerId: "w1" });
      expect(event.data).toMatchObject({ attempt: 1, max_attempts: 3 });

      ctx.clock.advance(delay - 1);
      expect(await ctx.store.claim({ workerId: "w1" })).toEqual([]);
      ctx.clock.advance(1);
      const second = await claimOne(ctx.store, "w2");
      expect(second).toMatchObject({ id: lease.id, attempts: 2, checkpoint: { page: 4 } });
      const stack = "Error: HTTP 503\n    at fetchPage (crawl.js:12:9)\n  [cause]: Error: socket hang up";
      const again = await ctx.store.fail(second.id, second, { error: "HTTP 503", stack });
      expect(again.scheduledFor).toEqual(new Date(ctx.clock.now().getTime() + 18_000)); // 20 s * 0.9
      // A stack, when the worker sends one, is kept in the failure's event; the task keeps the message alone.
      expect((await ctx.store.events(lease.id)).at(-1)!.data).toEqual({ attempt: 2, max_attempts: 3, retry_at: again.scheduledFor.toISOString(), stack });
      expect(event.data).not.toHaveProperty("stack");
    });

    it("clears an earlier attempt's error when the task completes (the error stays in the timeline)", async () => {
      const lease = await claimNew({ maxAttempts: 3 });
      await ctx.store.fail(lease.id, lease, { error: "HTTP 503" });
      ctx.clock.advance(3_600_000);
      const second = await claimOne(ctx.store, "w2");
      expect(second.errorMessage).toBe("HTTP 503");
      const { task } = await ctx.store.complete(second.id, second, { result: { ok: true } });
      expect(task).toMatchObject({ status: "completed", errorMessage: null, result: { ok: true } });
      const third = await claimNew({ maxAttempts: 3 });
      await ctx.store.fail(third.id, third, { error: "timeout" });
      ctx.clock.advance(3_600_000);
      const retried = await claimOne(ctx.store, "w3");
      const [outcome] = await ctx.store.completeMany([{ id: retried.id, lease: retried }], { returnTasks: true });
      expect(outcome.ok && outcome.task?.errorMessage).toBeNull();
      expect((await ctx.store.events(retried.id)).map((e) => e.message).filter(Boolean)).toEqual(["timeout"]);
    });

    it("caps the backoff and fails for good when attempts run out", async () => {
      ctx.jitter.value = 0;
      let lease = await claimNew({ maxAttempts: 4, backoff: { baseSeconds: 1, factor: 2, maxSeconds: 3, jitter: 0.5 } });
      const delays = [];
      for (let attempt = 1; attempt <= 3; attempt++) {
        const failed = await ctx.store.fail(lease.id, lease, { error: `try ${attempt}` });
        delays.push(failed.scheduledFor.getTime() - ctx.clock.now().getTime());
        ctx.clock.advance(10_000);
        lease = await claimOne(ctx.store);
      }
      expect(delays).toEqual([1000, 2000, 3000]);
      const dead = await ctx.store.fail(lease.id, lease, { error: "try 4" });
      expect(dead).toMatchObject({ status: "failed", attempts: 4, errorMessage: "try 4", completedAt: ctx.clock.now() });
      expect((await ctx.store.events(lease.id)).at(-1)).toMatchObject({ event: "failed", message: "try 4" });
    });

    it("a steep backoff after hundreds of attempts waits its maxSeconds: 10^309 overflowed (PostgreSQL) or made zero times infinity (SQLite), and the failure was refused", async () => {
      ctx.jitter.value = 0;
      await ctx.store.enqueue({ taskType: "a", maxAttempts: 1000, backoff: { baseSeconds: 1, factor: 10, maxSeconds: 60, jitter: 0 } });
      await ctx.store.enqueue({ taskType: "a", maxAttempts: 1000, backoff: { baseSeconds: 0, factor: 10, maxSeconds: 60, jitter: 0 } });
      const delays: number[][] = [];
      for (let attempt = 1; attempt <= 312; attempt++) {
        const leases = await ctx.store.claim({ workerId: "w1", limit: 2 });
        expect(leases).toHaveLength(2);
        const outcomes = await ctx.store.failMany(leases.map((lease) => ({ id: lease.id, lease, error: `try ${attempt}` })));
        delays.push(outcomes.map((o) => (o.ok ? o.scheduledFor.getTime() - ctx.clock.now().getTime() : -1)));
        ctx.clock.advance(60_000);
      }
      expect(delays.slice(0, 3)).toEqual([[1_000, 0], [10_000, 0], [60_000, 0]]);
      expect(delays.slice(305)).toEqual(Array.from({ length: 7 }, () => [60_000, 0]));
      const lease = await claimOne(ctx.store);
      const failed = await ctx.store.fail(lease.id, lease, { error: "one more" });
      expect(failed.scheduledFor.getTime() - ctx.clock.now().getTime()).toBe(lease.backoff.baseSeconds === 1 ? 60_000 : 0);
      expect(retryDelayMs(lease.backoff, 313)).toBe(lease.backoff.baseSeconds === 1 ? 60_000 : 0);
    });

    it("fails for good at once when the error is not retryable", async () => {
      const lease = await claimNew({ maxAttempts: 5 });
      const failed = await ctx.store.fail(lease.id, lease, { error: "invalid store id", retryable: false });
      expect(failed).toMatchObject({ status: "failed", attempts: 1 });
    });

    it("a task given back, released or by its worker's shutdown, is ready from then: its run is not counted as waiting", async () => {
      const released = await claimNew({});
      const shutDown = await claimNew({});
      ctx.clock.advance(600_000); // ten minutes of work
      const now = ctx.clock.now();
      expect((await ctx.store.release(released.id, released)).scheduledFor).toEqual(now);
      await ctx.store.shutdownWorker(shutDown.workerId);
      expect((await ctx.store.get(shutDown.id))?.scheduledFor).toEqual(now);
      expect((await ctx.store.capacity()).find((c) => c.taskType === released.taskType)?.oldestReadySeconds ?? 0).toBeLessThan(1);
    });

    it("releases without charging an attempt, keeping or replacing the checkpoint", async () => {
      const lease = await claimNew();
      await ctx.store.start(lease.id, lease);
      await ctx.store.checkpoint(lease.id, lease, { page: 2 });
      const kept = await ctx.store.release(lease.id, lease, { reason: "shutdown" });
      expect(kept).toMatchObject({ status: "pending", attempts: 0, workerId: null, leaseToken: null, startedAt: null, checkpoint: { page: 2 } });
      expect((await ctx.store.events(lease.id)).at(-1)).toMatchObject({ event: "released", message: "shutdown", data: { page: 2 } });
      const again = await claimOne(ctx.store, "w2");
      expect(again.attempts).toBe(1);
      const replaced = await ctx.store.release(again.id, again, { checkpoint: { page: 7 } });
      expect(replaced.checkpoint).toEqual({ page: 7 });
    });

    it("cancels pending and running tasks; the holder's next call is refused", async () => {
      const { task: pending } = await ctx.store.enqueue({ taskType: "b" });
      expect((await ctx.store.cancel(pending.id, { reason: "not needed" })).status).toBe("cancelled");
      const lease = await claimNew();
      await ctx.store.start(lease.id, lease);
      const cancelled = await ctx.store.cancel(lease.id);
      expect(cancelled).toMatchObject({ status: "cancelled", completedAt: ctx.clock.now() });
      const refused = await ctx.store.heartbeat(lease.id, lease).catch((e) => e);
      expect(refused).toBeInstanceOf(InvalidTransitionError);
      expect(refused.message).toMatch(/it is cancelled/);
      await expect(ctx.store.complete(lease.id, lease)).rejects.toBeInstanceOf(InvalidTransitionError);
      await expect(ctx.store.cancel(lease.id)).rejects.toBeInstanceOf(InvalidTransitionError);
      expect((await ctx.store.events(lease.id)).at(-1)).toMatchObject({ event: "cancelled", fromWorkerId: "w1" });
      expect((await ctx.store.events(pending.id)).at(-1)).toMatchObject({ event: "cancelled", message: "not needed" });
    });

    it("retries a dead-letter task by hand with a fresh attempt budget", async () => {
      const lease = await claimNew({ maxAttempts: 1 });
      await ctx.store.checkpoint(lease.id, lease, { page: 9 });
      await ctx.store.fail(lease.id, lease, { error: "boom" });
      expect((await ctx.store.list({ status: "failed" })).tasks.map((t) => t.id)).toEqual([lease.id]);
      ctx.clock.advance(5000);
      const retried = await ctx.store.retry(lease.id);
      expect(retried).toMatchObject({ status: "pending", attempts: 0, scheduledFor: ctx.clock.now(), checkpoint: { page: 9 }, completedAt: null });
      expect((await ctx.store.events(lease.id)).at(-1)).toMatchObject({ event: "requeued", message: "manual retry" });
      await expect(ctx.store.retry(lease.id)).rejects.toBeInstanceOf(InvalidTransitionError);
      expect((await claimOne(ctx.store)).attempts).toBe(1);
    });

    it("refuses a retry while a pending task holds the failed task's unique key, with its own error, and changes nothing", async () => {
      const lease = await claimNew({ maxAttempts: 1, uniqueKey: "store:7" });
      await ctx.store.fail(lease.id, lease, { error: "boom", retryable: false });
      await ctx.store.enqueue({ taskType: "a", uniqueKey: "store:7" });
      const refused = await ctx.store.retry(lease.id).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(UniqueKeyTakenError);
      expect((refused as UniqueKeyTakenError).code).toBe("unique_key_taken");
      expect((await ctx.store.get(lease.id))?.status).toBe("failed");
    });

    it("a retry with resetCheckpoint starts afresh: checkpoint and progress cleared, and said so in the timeline", async () => {
      const lease = await claimNew({ maxAttempts: 1 });
      await ctx.store.checkpoint(lease.id, lease, { page: 9 });
      await ctx.store.progress(lease.id, lease, 0.9);
      await ctx.store.fail(lease.id, lease, { error: "the checkpoint points past the end" });
      const retried = await ctx.store.retry(lease.id, { resetCheckpoint: true });
      expect(retried).toMatchObject({ status: "pending", attempts: 0, checkpoint: null, progress: null });
      expect((await ctx.store.events(lease.id)).at(-1)).toMatchObject({ event: "requeued", message: "manual retry, checkpoint reset" });
      expect(await claimOne(ctx.store)).toMatchObject({ id: lease.id, checkpoint: null });
    });

    it("writes the whole story into the audit trail", async () => {
      let lease = await claimNew({ maxAttempts: 2 });
      await ctx.store.start(lease.id, lease);
      await ctx.store.checkpoint(lease.id, lease, { page: 1 });
      await ctx.store.fail(lease.id, lease, { error: "x" });
      ctx.clock.advance(3_600_000);
      lease = await claimOne(ctx.store);
      await ctx.store.release(lease.id, lease);
      lease = await claimOne(ctx.store);
      await ctx.store.start(lease.id, lease);
      await ctx.store.fail(lease.id, lease, { error: "y" });
      await ctx.store.retry(lease.id);
      lease = await claimOne(ctx.store);
      await ctx.store.complete(lease.id, lease);
      expect(await eventNames(lease.id)).toEqual([
        "created", "claimed", "started", "checkpoint", "retry_scheduled",
        "claimed", "released", "claimed", "started", "failed", "requeued", "claimed", "completed",
      ]);
      const times = (await ctx.store.events(lease.id)).map((e) => e.createdAt.getTime());
      expect(times).toEqual([...times].sort((a, b) => a - b));
    });
  });
}
