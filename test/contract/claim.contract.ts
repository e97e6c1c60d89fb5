import { describe, expect, it } from "vitest";
import {
  AlreadyClaimedError,
  ConcurrencyKeyBusyError,
  InvalidTransitionError,
  LeaseLostError,
  TaskNotFoundError,
  ValidationError,
} from "../../src/core/errors.js";
import type { ClaimOptions, Task } from "../../src/core/task.js";
import { WAITING_DUE_PER_CLAIM } from "../../src/store/claim-options.js";
import type { StoreKind } from "../helpers/stores.js";
import { claimOne, useStore } from "./context.js";

export function claimContract(kind: StoreKind) {
  describe("claim", () => {
    const ctx = useStore(kind);
    /** The task as a read gives it; over HTTP a read answers no lease token (only the claim does), so that one field comes from the claim. */
    const readBack = async (claimed: Task) => {
      const read = await ctx.store.get(claimed.id);
      return ctx.store.remote ? { ...read, leaseToken: claimed.leaseToken } : read;
    };
    const enqueueAt = async (taskType: string, priority: number, params: Record<string, number> = {}) => {
      const { task } = await ctx.store.enqueue({ taskType, priority, params });
      ctx.clock.advance(1000); // distinct created_at, so FIFO order is observable
      return task;
    };

    it("takes a lease: status, worker, token, attempt, times, event", async () => {
      const { task } = await ctx.store.enqueue({ taskType: "a" });
      const claimed = await claimOne(ctx.store, "worker-1", { leaseSeconds: 30 });
      expect(claimed).toMatchObject({ id: task.id, status: "claimed", workerId: "worker-1", attempts: 1 });
      expect(claimed.leaseToken).toMatch(/^[A-Za-z0-9-]{32,64}$/); // the API's LeaseToken format
      expect(claimed.claimedAt).toEqual(ctx.clock.now());
      expect(claimed.leaseExpiresAt).toEqual(new Date(ctx.clock.now().getTime() + 30_000));
      const events = await ctx.store.events(task.id);
      expect(events.map((e) => [e.event, e.toWorkerId, e.data])).toEqual([
        ["created", null, null],
        ["claimed", "worker-1", { attempt: 1 }],
      ]);
    });

    it("gives each task of a batch its own token, which no other task of the batch accepts", async () => {
      await ctx.store.enqueueMany([{ taskType: "a" }, { taskType: "a" }, { taskType: "a" }]);
      const batch = await ctx.store.claim({ workerId: "w1", limit: 3 });
      expect(new Set(batch.map((t) => t.leaseToken)).size).toBe(3);
      await expect(ctx.store.heartbeat(batch[0].id, { workerId: "w1", leaseToken: batch[1].leaseToken })).rejects.toBeInstanceOf(LeaseLostError);
    });

    it("claims and starts in one step when asked", async () => {
      await ctx.store.enqueueMany([{ taskType: "a" }, { taskType: "a" }]);
      const batch = await ctx.store.claim({ workerId: "w1", limit: 2, start: true });
      expect(batch.map((t) => [t.status, t.startedAt])).toEqual([
        ["running", ctx.clock.now()],
        ["running", ctx.clock.now()],
      ]);
      // One transition, one event.
      expect((await ctx.store.events(batch[0].id)).map((e) => [e.event, e.toWorkerId, e.data])).toEqual([
        ["created", null, null],
        ["claimed", "w1", { attempt: 1, started: true }],
      ]);
      // Started already: a start sent again under its lease answers it as it is (its answer may have been lost).
      expect(await ctx.store.start(batch[0].id, batch[0])).toMatchObject({ status: "running", startedAt: ctx.clock.now() });
      expect((await ctx.store.complete(batch[0].id, batch[0])).task.status).toBe("completed");
    });

    it("returns each claimed task exactly as stored, whatever it went through before", async () => {
      // A task with history (a failed attempt with its error, a checkpoint, progress), a reserved one,
      // a plain one and one with every option: the claim's answer must be what a read gives after it.
      const { task: retried } = await ctx.store.enqueue({ taskType: "a", params: { n: 1 }, maxAttempts: 3, priority: 5 });
      const first = await claimOne(ctx.store, "w1", { start: true });
      await ctx.store.checkpoint(first.id, first, { step: 2 });
      await ctx.store.progress(first.id, first, 0.5);
      await ctx.store.fail(first.id, first, { error: "boom", retryable: true });
      ctx.clock.advance(3_600_000); // past its backoff
      const { task: reserved } = await ctx.store.enqueue({ taskType: "a", priority: 4 });
      await ctx.store.reserve(reserved.id, "w2", 60);
      await ctx.store.enqueueMany([
        { taskType: "a", priority: 3 },
        { taskType: "a", priority: 2, concurrencyKey: "k", uniqueKey: "u", timeoutSeconds: 9, scheduledFor: new Date(ctx.clock.now().getTime() - 1000) },
      ]);
      for (const start of [false, true]) {
        const batches = await ctx.store.claimMany([
          { workerId: "w1", limit: 2, leaseSeconds: 17, start },
          { workerId: "w2", limit: 1, leaseSeconds: 17, start },
        ]);
        const claimed = batches.flat();
        expect(claimed.map((t) => t.id)).toEqual(expect.arrayContaining([retried.id, reserved.id]));
        for (const task of claimed) expect(task).toEqual(await readBack(task));
        for (const task of claimed) await ctx.store.release(task.id, task);
        ctx.clock.advance(1000);
      }
      const alone = await ctx.store.claim({ workerId: "w3", limit: 4, leaseSeconds: 5 });
      expect(alone.length).toBe(4);
      for (const task of alone) expect(task).toEqual(await readBack(task));
    });

    it("returns nothing when nothing is ready", async () => {
      expect(await ctx.store.claim({ workerId: "w1" })).toEqual([]);
    });

    it("orders by priority (higher first), then oldest first", async () => {
      const low = await enqueueAt("a", 1);
      const highOld = await enqueueAt("a", 5);
      const highNew = await enqueueAt("a", 5);
      const order = [];
      for (let i = 0; i < 3; i++) order.push((await claimOne(ctx.store)).id);
      expect(order).toEqual([highOld.id, highNew.id, low.id]);
    });

    it("sorts by priority ascending, by created_at either way, and at random", async () => {
      const t1 = await enqueueAt("a", 3);
      const t2 = await enqueueAt("a", 1);
      const t3 = await enqueueAt("a", 2);
      const ids = (tasks: { id: number }[]) => tasks.map((t) => t.id);
      const claimAll = async (options: Partial<ClaimOptions>) => {
        const tasks = await ctx.store.claim({ workerId: "w1", limit: 10, ...options });
        for (const t of tasks) await ctx.store.release(t.id, t);
        return ids(tasks);
      };
      expect(await claimAll({ sortBy: "priority", sortOrder: "asc" })).toEqual([t2.id, t3.id, t1.id]);
      expect(await claimAll({ sortBy: "created_at" })).toEqual([t1.id, t2.id, t3.id]);
      expect(await claimAll({ sortBy: "created_at", sortOrder: "desc" })).toEqual([t3.id, t2.id, t1.id]);
      expect((await claimAll({ sortBy: "random" })).sort()).toEqual([t1.id, t2.id, t3.id].sort());
    });

    it("claims only the given task types", async () => {
      await enqueueAt("a", 9);
      const b = await enqueueAt("b", 0);
      const c = await enqueueAt("c", 0);
      const claimed = await ctx.store.claim({ workerId: "w1", taskTypes: ["b", "c"], limit: 5 });
      expect(claimed.map((t) => t.id)).toEqual([b.id, c.id]);
      expect(await ctx.store.claim({ workerId: "w1", taskTypes: ["zzz"] })).toEqual([]);
    });

    it("does not claim a task before its scheduled time", async () => {
      const later = new Date(ctx.clock.now().getTime() + 60_000);
      const { task } = await ctx.store.enqueue({ taskType: "a", scheduledFor: later, priority: 100 });
      expect(await ctx.store.claim({ workerId: "w1" })).toEqual([]);
      ctx.clock.advance(59_999);
      expect(await ctx.store.claim({ workerId: "w1" })).toEqual([]);
      ctx.clock.advance(1);
      expect((await claimOne(ctx.store)).id).toBe(task.id);
    });

    // Tasks not yet due wait outside the claim indexes (PostgreSQL migration 028, SQLite 025); once due
    // they are claimed in their place in the order, as if they had never been away.
    describe("tasks come due", () => {
      const inAMinute = () => new Date(ctx.clock.now().getTime() + 60_000);

      it("take their place in the claim order among the ready ones, in one claim", async () => {
        const old = (await ctx.store.enqueue({ taskType: "a", scheduledFor: inAMinute() })).task;
        ctx.clock.advance(1000);
        const ready = await enqueueAt("a", 0);
        const urgent = (await ctx.store.enqueue({ taskType: "a", scheduledFor: inAMinute(), priority: 5 })).task;
        ctx.clock.advance(1000);
        const newer = await enqueueAt("a", 0);
        const before = await ctx.store.claim({ workerId: "w1", limit: 10 });
        expect(before.map((t) => t.id)).toEqual([ready.id, newer.id]);
        for (const t of before) await ctx.store.release(t.id, t);
        ctx.clock.advance(60_000);
        expect((await ctx.store.claim({ workerId: "w1", limit: 10 })).map((t) => t.id)).toEqual([urgent.id, old.id, ready.id, newer.id]);
      });

      it("that a claim does not take are claimed next, in order", async () => {
        const due = [];
        for (let i = 0; i < 3; i++) {
          due.push((await ctx.store.enqueue({ taskType: "a", scheduledFor: inAMinute() })).task);
          ctx.clock.advance(1000);
        }
        const ready = await enqueueAt("a", 9);
        ctx.clock.advance(60_000);
        expect((await claimOne(ctx.store)).id).toBe(ready.id);
        const next = [];
        for (let i = 0; i < 3; i++) next.push((await claimOne(ctx.store)).id);
        expect(next).toEqual(due.map((t) => t.id));
        expect(await ctx.store.claim({ workerId: "w1" })).toEqual([]);
      });

      it(`more at once than a claim reads (${WAITING_DUE_PER_CLAIM}) are all claimed, each once, by the claims after it`, async () => {
        const count = WAITING_DUE_PER_CLAIM + 50;
        const start = ctx.clock.now().getTime();
        const due = (await ctx.store.enqueueMany(Array.from({ length: count }, (_, i) => ({ taskType: "a", scheduledFor: new Date(start + 60_000 + i) })))).map((r) => r.task.id);
        ctx.clock.advance(120_000);
        const claimed: number[] = [];
        for (let batch; (batch = await ctx.store.claim({ workerId: "w1", limit: 40 })).length > 0; ) claimed.push(...batch.map((t) => t.id));
        expect(claimed.sort((a, b) => a - b)).toEqual(due);
      });

      it("of another type are left for their own claims", async () => {
        const b = (await ctx.store.enqueue({ taskType: "b", scheduledFor: inAMinute() })).task;
        const a = (await ctx.store.enqueue({ taskType: "a", scheduledFor: inAMinute() })).task;
        ctx.clock.advance(60_000);
        expect((await ctx.store.claim({ workerId: "w1", taskTypes: ["a"], limit: 5 })).map((t) => t.id)).toEqual([a.id]);
        expect((await ctx.store.claim({ workerId: "w2", taskTypes: ["b"], limit: 5 })).map((t) => t.id)).toEqual([b.id]);
      });

      it("after a retry's backoff, keep their concurrency key and type cap", async () => {
        await ctx.store.registerTaskType({ name: "capped", maxRunning: 1 });
        const keyed = (await ctx.store.enqueue({ taskType: "a", concurrencyKey: "k" })).task;
        const first = await claimOne(ctx.store);
        expect(first.id).toBe(keyed.id);
        await ctx.store.fail(first.id, first, { error: "again", retryable: true });
        const sameKey = (await ctx.store.enqueue({ taskType: "a", concurrencyKey: "k" })).task;
        const capped = [(await ctx.store.enqueue({ taskType: "capped", scheduledFor: inAMinute() })).task, (await ctx.store.enqueue({ taskType: "capped", scheduledFor: inAMinute() })).task];
        ctx.clock.advance(3_600_000); // past the backoff and the due times
        const claimed = (await ctx.store.claim({ workerId: "w1", limit: 10 })).map((t) => t.id);
        expect(claimed).toHaveLength(2);
        expect(claimed).toContain(capped[0].id);
        expect(claimed.filter((id) => id === keyed.id || id === sameKey.id)).toHaveLength(1);
      });

      it("are claimed whatever their waiting flag says, and never before they are due", async () => {
        const later = (await ctx.store.enqueue({ taskType: "a", scheduledFor: inAMinute() })).task;
        const now = (await ctx.store.enqueue({ taskType: "a" })).task;
        // The flag is only where a claim looks: set wrong both ways, the claims still follow the due times.
        await ctx.execute(`UPDATE tasks SET waiting = (id = ${now.id})`);
        expect((await ctx.store.claim({ workerId: "w1", limit: 5 })).map((t) => t.id)).toEqual([now.id]);
        ctx.clock.advance(60_000);
        expect((await ctx.store.claim({ workerId: "w1", limit: 5 })).map((t) => t.id)).toEqual([later.id]);
      });
    });

    it("filters by attempts remaining (seed 002: attempts < max_attempts - N)", async () => {
      const fresh = await ctx.store.enqueue({ taskType: "a", maxAttempts: 3 });
      const { task: tired } = await ctx.store.enqueue({ taskType: "a", maxAttempts: 3, priority: 10 });
      const first = await claimOne(ctx.store);
      expect(first.id).toBe(tired.id);
      await ctx.store.fail(tired.id, first, { error: "boom" }); // 2 attempts left
      ctx.clock.advance(3_600_000);
      const claimed = await ctx.store.claim({ workerId: "w1", maxAttemptsRemaining: 2, limit: 5 });
      expect(claimed.map((t) => t.id)).toEqual([fresh.task.id]);
    });

    it("claims in batches up to the limit, each task once", async () => {
      await ctx.store.enqueueMany(Array.from({ length: 5 }, () => ({ taskType: "a" })));
      const first = await ctx.store.claim({ workerId: "w1", limit: 3 });
      const second = await ctx.store.claim({ workerId: "w2", limit: 3 });
      expect(first).toHaveLength(3);
      expect(second).toHaveLength(2);
      const all = [...first, ...second];
      expect(new Set(all.map((t) => t.id)).size).toBe(5);
      expect(new Set(all.map((t) => t.leaseToken)).size).toBe(5);
    });

    describe("claimMany", () => {
      it("shares ready tasks out in turn, in priority order, each task once, each event naming its worker", async () => {
        const tasks = [await enqueueAt("a", 5), await enqueueAt("a", 9), await enqueueAt("a", 1), await enqueueAt("a", 7)];
        const [w1, w2, w3] = await ctx.store.claimMany([{ workerId: "w1" }, { workerId: "w2" }, { workerId: "w3", limit: 2 }]);
        const [p5, p9, p1, p7] = tasks.map((t) => t.id);
        expect(w1.map((t) => t.id)).toEqual([p9]);
        expect(w2.map((t) => t.id)).toEqual([p7]);
        expect(w3.map((t) => t.id)).toEqual([p5, p1]);
        for (const [worker, claimed] of [["w1", w1], ["w2", w2], ["w3", w3]] as const) {
          for (const task of claimed) {
            expect(task).toMatchObject({ status: "claimed", workerId: worker, attempts: 1 });
            expect((await ctx.store.events(task.id)).at(-1)).toMatchObject({ event: "claimed", toWorkerId: worker });
          }
        }
        expect(new Set([...w1, ...w2, ...w3].map((t) => t.leaseToken)).size).toBe(4);
        expect(await ctx.store.claimMany([{ workerId: "w1" }, { workerId: "w2" }])).toEqual([[], []]);
      });

      it("gives each worker its reserved task first, and merges one worker's claims", async () => {
        const open = await enqueueAt("a", 100);
        const forW2 = await enqueueAt("a", 0);
        const other = await enqueueAt("a", 50);
        await ctx.store.reserve(forW2.id, "w2", 10);
        const [a, b, c] = await ctx.store.claimMany([{ workerId: "w1" }, { workerId: "w2" }, { workerId: "w1" }]);
        expect(b.map((t) => t.id)).toEqual([forW2.id]);
        expect([...a, ...c].map((t) => t.id)).toEqual([open.id, other.id]);
        expect([a.length, c.length]).toEqual([1, 1]);
      });

      it("keeps each claim's own filters and answers in input order", async () => {
        const a = await enqueueAt("a", 0);
        const b = await enqueueAt("b", 0);
        const answers = await ctx.store.claimMany([{ workerId: "w1", taskTypes: ["b"] }, { workerId: "w2", taskTypes: ["zzz"] }, { workerId: "w3", taskTypes: ["a"], start: true }]);
        expect(answers.map((claimed) => claimed.map((t) => [t.id, t.status]))).toEqual([[[b.id, "claimed"]], [], [[a.id, "running"]]]);
      });

      it("holds to concurrency keys and type caps across the claims it shares out", async () => {
        await ctx.store.registerTaskType({ name: "capped", maxRunning: 1 });
        await ctx.store.enqueueMany([{ taskType: "capped" }, { taskType: "capped" }, { taskType: "k", concurrencyKey: "x" }, { taskType: "k", concurrencyKey: "x" }]);
        const capped = await ctx.store.claimMany(["w1", "w2", "w3"].map((workerId) => ({ workerId, taskTypes: ["capped"] })));
        expect(capped.flat()).toHaveLength(1);
        const keyed = await ctx.store.claimMany(["w1", "w2", "w3"].map((workerId) => ({ workerId, taskTypes: ["k"] })));
        expect(keyed.flat()).toHaveLength(1);
      });

      it("fills every claim it shares out past the pending tasks of one concurrency key ahead of the others", async () => {
        await ctx.store.enqueueMany(Array.from({ length: 4 }, () => ({ taskType: "a", priority: 10, concurrencyKey: "one-customer" })));
        const open = await ctx.store.enqueueMany(Array.from({ length: 6 }, () => ({ taskType: "a" })));
        const [w1, w2] = await ctx.store.claimMany([{ workerId: "w1", limit: 3 }, { workerId: "w2", limit: 3 }]);
        expect([w1.length, w2.length]).toEqual([3, 3]);
        const ids = [...w1, ...w2].map((t) => t.id);
        expect(new Set(ids).size).toBe(6);
        expect([...w1, ...w2].filter((t) => t.concurrencyKey !== null)).toHaveLength(1);
        expect(ids.filter((id) => open.some((r) => r.task.id === id))).toHaveLength(5);
      });

      it("never gives one task to two workers when batches race", async () => {
        await ctx.store.enqueueMany(Array.from({ length: 60 }, () => ({ taskType: "a" })));
        const batches = await Promise.all(
          Array.from({ length: 4 }, (_, b) => ctx.store.claimMany(Array.from({ length: 8 }, (_, i) => ({ workerId: `w${b}-${i}`, limit: 2 })))),
        );
        const ids = batches.flat(2).map((t) => t.id);
        expect(ids).toHaveLength(60);
        expect(new Set(ids).size).toBe(60);
      });
    });

    it("holds at most one claimed or running task per concurrency key", async () => {
      const k1 = await enqueueAt("a", 0);
      await ctx.store.enqueue({ taskType: "a", concurrencyKey: "store:1" });
      await ctx.store.enqueue({ taskType: "a", concurrencyKey: "store:1" });
      await ctx.store.enqueue({ taskType: "a", concurrencyKey: "store:2" });
      const batch = await ctx.store.claim({ workerId: "w1", limit: 10 });
      expect(batch.map((t) => t.concurrencyKey).sort()).toEqual([null, "store:1", "store:2"].sort());
      expect(batch.some((t) => t.id === k1.id)).toBe(true);
      expect(await ctx.store.claim({ workerId: "w2", limit: 10 })).toEqual([]);

      const holder = batch.find((t) => t.concurrencyKey === "store:1")!;
      await ctx.store.start(holder.id, holder);
      expect(await ctx.store.claim({ workerId: "w2" })).toEqual([]);
      await ctx.store.complete(holder.id, holder);
      const next = await claimOne(ctx.store, "w2");
      expect(next.concurrencyKey).toBe("store:1");
    });

    it("is not cut short by pending tasks of one concurrency key ahead of the others", async () => {
      // The claim's scan stops at its limit: tasks of two keys first fill it, and one of each is all it may keep.
      const first = await ctx.store.enqueueMany(Array.from({ length: 3 }, () => ({ taskType: "a", priority: 10, concurrencyKey: "customer-1" })));
      const second = await ctx.store.enqueueMany(Array.from({ length: 3 }, () => ({ taskType: "a", priority: 9, concurrencyKey: "customer-2" })));
      const open = await ctx.store.enqueueMany(Array.from({ length: 4 }, () => ({ taskType: "a" })));
      const batch = await ctx.store.claim({ workerId: "w1", limit: 5 });
      expect(batch.map((t) => t.id)).toEqual([first[0].task.id, second[0].task.id, ...open.slice(0, 3).map((r) => r.task.id)]);
    });

    it("runs again for the room left, except for a second after running again found nothing (long queues of a few keys)", async () => {
      const queue = (key: string, priority: number) => ctx.store.enqueueMany(Array.from({ length: 3 }, () => ({ taskType: "a", priority, concurrencyKey: key })));
      // One key's queue alone: the claim takes its first task, runs again past the key, and finds nothing.
      await queue("k", 10);
      expect((await ctx.store.claim({ workerId: "w1", limit: 3 })).map((t) => t.concurrencyKey)).toEqual(["k"]);
      // Within the second, a claim cut short so does not run again: open tasks wait for the next claim.
      await queue("j", 9);
      await ctx.store.enqueueMany([{ taskType: "a" }, { taskType: "a" }]);
      expect((await ctx.store.claim({ workerId: "w2", limit: 3 })).map((t) => t.concurrencyKey)).toEqual(["j"]);
      // After it, one does.
      await new Promise((resolve) => setTimeout(resolve, 1100));
      await queue("i", 8);
      expect((await ctx.store.claim({ workerId: "w3", limit: 3 })).map((t) => t.concurrencyKey)).toEqual(["i", null, null]);
    });

    it("gives a reserved task to its worker first, and to no one else until the reservation lapses", async () => {
      const urgent = await enqueueAt("a", 100);
      const reserved = await enqueueAt("a", 0);
      await ctx.store.reserve(reserved.id, "w2", 10);
      const forW1 = await ctx.store.claim({ workerId: "w1", limit: 5 });
      expect(forW1.map((t) => t.id)).toEqual([urgent.id]);
      await ctx.store.release(forW1[0].id, forW1[0]);

      const forW2 = await claimOne(ctx.store, "w2");
      expect(forW2.id).toBe(reserved.id);
      expect(forW2.reservedFor).toBeNull();
      await ctx.store.release(forW2.id, forW2);

      // Released, the task is open again; a new reservation lapses after its time.
      await ctx.store.reserve(reserved.id, "w2", 10);
      ctx.clock.advance(10_000);
      const later = await ctx.store.claim({ workerId: "w3", limit: 5 });
      expect(later.map((t) => t.id)).toEqual([urgent.id, reserved.id]);
      expect((await ctx.store.events(reserved.id)).filter((e) => e.event === "reassigned").map((e) => e.toWorkerId)).toEqual(["w2", "w2"]);
    });

    it("claims a specific task by id, ready or not", async () => {
      const { task } = await ctx.store.enqueue({ taskType: "a", scheduledFor: new Date(ctx.clock.now().getTime() + 3_600_000) });
      const claimed = await ctx.store.claimById(task.id, { workerId: "w1" });
      expect(claimed).toMatchObject({ id: task.id, status: "claimed", workerId: "w1", attempts: 1 });
    });

    it("refuses claim by id with a typed error for each reason", async () => {
      const { task } = await ctx.store.enqueue({ taskType: "a", concurrencyKey: "k" });
      const { task: sibling } = await ctx.store.enqueue({ taskType: "a", concurrencyKey: "k" });
      const held = await ctx.store.claimById(task.id, { workerId: "w1" });
      const taken = await ctx.store.claimById(task.id, { workerId: "w2" }).catch((e) => e);
      expect(taken).toBeInstanceOf(AlreadyClaimedError);
      expect(taken.message).toBe(`Task already claimed by another worker (task ${task.id})`);
      // The holder claiming it again (its first answer lost) is told the task is its own.
      const again = await ctx.store.claimById(task.id, { workerId: "w1" }).catch((e) => e);
      expect(again).toBeInstanceOf(AlreadyClaimedError);
      expect(again.message).toBe(`Task already claimed by this worker (task ${task.id}, worker w1): it holds the lease already, with the token its first claim returned`);
      await expect(ctx.store.claimById(sibling.id, { workerId: "w2" })).rejects.toBeInstanceOf(ConcurrencyKeyBusyError);
      await expect(ctx.store.claimById(999_999, { workerId: "w2" })).rejects.toBeInstanceOf(TaskNotFoundError);
      await ctx.store.complete(held.id, held);
      await expect(ctx.store.claimById(task.id, { workerId: "w2" })).rejects.toBeInstanceOf(InvalidTransitionError);
      expect((await ctx.store.get(sibling.id))?.status).toBe("pending");
    });

    const badClaims: [string, unknown][] = [
      ["a worker_id with spaces", { workerId: "bad worker" }],
      ["an empty worker_id", { workerId: "" }],
      ["a worker_id over 128 characters", { workerId: "w".repeat(129) }],
      ["a limit of zero", { workerId: "w1", limit: 0 }],
      ["an unknown sort", { workerId: "w1", sortBy: "id; DROP TABLE tasks" }],
      ["a bad task type filter", { workerId: "w1", taskTypes: ["no spaces allowed"] }],
    ];
    it.each(badClaims)("refuses %s and claims nothing", async (_, options) => {
      await ctx.store.enqueue({ taskType: "a" });
      await expect(ctx.store.claim(options as ClaimOptions)).rejects.toBeInstanceOf(ValidationError);
      expect((await ctx.store.counts()).byStatus.pending).toBe(1);
    });
  });
}
