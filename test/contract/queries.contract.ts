import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/core/errors.js";
import type { TaskFilter } from "../../src/core/task.js";
import type { StoreKind } from "../helpers/stores.js";
import { PAGE_BYTES } from "../../src/store/paging.js";
import { claimOne, countsByReading, useStore } from "./context.js";

export function queriesContract(kind: StoreKind) {
  describe("list, counts, events", () => {
    const ctx = useStore(kind);

    it("lists newest first with filters", async () => {
      const ids = (await ctx.store.enqueueMany([{ taskType: "a" }, { taskType: "b" }, { taskType: "a" }])).map((r) => r.task.id);
      const lease = await claimOne(ctx.store, "w9", { taskTypes: ["b"] });
      expect((await ctx.store.list()).tasks.map((t) => t.id)).toEqual([...ids].reverse());
      expect((await ctx.store.list({ taskType: "a" })).tasks.map((t) => t.id)).toEqual([ids[2], ids[0]]);
      expect((await ctx.store.list({ status: "claimed" })).tasks.map((t) => t.id)).toEqual([lease.id]);
      expect((await ctx.store.list({ status: ["pending", "claimed"] })).tasks).toHaveLength(3);
      expect((await ctx.store.list({ workerId: "w9" })).tasks.map((t) => t.id)).toEqual([lease.id]);
      expect((await ctx.store.list({ status: "completed" })).tasks).toEqual([]);
    });

    it("finds tasks by text in their params, case-insensitive, with the other filters", async () => {
      const [a, b, c] = (
        await ctx.store.enqueueMany([
          { taskType: "resync", params: { store: "Green Leaf", storeId: 4211 } },
          { taskType: "resync", params: { store: "Blue Sky", storeId: 42 } },
          { taskType: "crawl", params: { url: "https://greenleaf.example/menu?page=1%_" } },
        ])
      ).map((r) => r.task.id);
      expect((await ctx.store.list({ search: "green" })).tasks.map((t) => t.id)).toEqual([c, a]);
      expect((await ctx.store.list({ search: "42" })).tasks.map((t) => t.id)).toEqual([b, a]);
      expect((await ctx.store.list({ search: "GREEN", taskType: "resync" })).tasks.map((t) => t.id)).toEqual([a]);
      // The text is text, not a pattern: % and _ match only themselves.
      expect((await ctx.store.list({ search: "%_" })).tasks.map((t) => t.id)).toEqual([c]);
      expect((await ctx.store.list({ search: "nowhere" })).tasks).toEqual([]);
      await expect(ctx.store.list({ search: "" })).rejects.toBeInstanceOf(ValidationError);
    });

    it("finds text with quotes, backslashes and letters beyond ASCII as it was written, in any case", async () => {
      const [quoted, zurich, path] = (
        await ctx.store.enqueueMany([
          { taskType: "resync", params: { owner: 'Pat O"Brien' } },
          { taskType: "resync", params: { city: "ZÜRICH" } },
          { taskType: "resync", params: { file: "C:\\menus\\today" } },
        ])
      ).map((r) => r.task.id);
      expect((await ctx.store.list({ search: 'o"brien' })).tasks.map((t) => t.id)).toEqual([quoted]);
      expect((await ctx.store.list({ search: "zürich" })).tasks.map((t) => t.id)).toEqual([zurich]);
      expect((await ctx.store.list({ search: "Zürich" })).tasks.map((t) => t.id)).toEqual([zurich]);
      expect((await ctx.store.list({ search: "menus\\today" })).tasks.map((t) => t.id)).toEqual([path]);
    });

    it("pages through everything with a cursor, each task once", async () => {
      await ctx.store.enqueueMany(Array.from({ length: 25 }, (_, i) => ({ taskType: "a", params: { i } })));
      const seen: number[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await ctx.store.list({}, { limit: 10, cursor });
        seen.push(...page.tasks.map((t) => t.id));
        cursor = page.nextCursor ?? undefined;
        pages++;
      } while (cursor);
      expect(pages).toBe(3);
      expect(seen).toHaveLength(25);
      expect(new Set(seen).size).toBe(25);
      expect(seen).toEqual([...seen].sort((a, b) => b - a));
    });

    it("refuses a cursor with another order or other filters than the page that gave it, naming cursor", async () => {
      await ctx.store.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ taskType: "a", params: { i } })));
      const { nextCursor } = await ctx.store.list({ taskType: "a" }, { limit: 2 });
      const cursor = nextCursor ?? undefined;
      await expect(ctx.store.list({ taskType: "a" }, { limit: 2, cursor, order: "oldest" })).rejects.toMatchObject({
        code: "validation_error",
        message: expect.stringContaining("it pages newest first, and this call asks for oldest first"),
        issues: [{ path: "cursor" }],
      });
      await expect(ctx.store.list({}, { limit: 2, cursor })).rejects.toMatchObject({ message: expect.stringContaining("other filters"), issues: [{ path: "cursor" }] });
      expect((await ctx.store.list({ taskType: "a" }, { limit: 5, cursor, order: "newest" })).tasks).toHaveLength(3);
    });

    it("gives a cursor only when another page follows: a full last page has none", async () => {
      await ctx.store.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ taskType: "a", params: { i } })));
      const first = await ctx.store.list({}, { limit: 10 });
      expect(first.nextCursor).not.toBeNull();
      const last = await ctx.store.list({}, { limit: 10, cursor: first.nextCursor ?? undefined });
      expect(last.tasks).toHaveLength(10);
      expect(last.nextCursor).toBeNull();
      expect((await ctx.store.list({ taskType: "a" }, { limit: 20, order: "oldest" })).nextCursor).toBeNull();
    });

    it("ends a page early once its tasks' data passes PAGE_BYTES, with a cursor to the rest", async () => {
      // 1 MB of params each: 9 of them outgrow the page, and 1,000 outgrew a JavaScript string.
      const ids: number[] = [];
      for (let i = 0; i < 9; i++) ids.push((await ctx.store.enqueue({ taskType: "big", params: { i, big: "x".repeat(1_000_000) } })).task.id);
      const first = await ctx.store.list({}, { limit: 100, order: "oldest" });
      expect(first.tasks.map((t) => t.id)).toEqual(ids.slice(0, Math.floor(PAGE_BYTES / 1_000_020)));
      const rest = await ctx.store.list({}, { limit: 100, order: "oldest", cursor: first.nextCursor ?? undefined });
      expect(rest).toMatchObject({ tasks: [{ id: ids[8] }], nextCursor: null });
    });

    it("lists what a worker holds, in either order, with the other filters and a cursor", async () => {
      const ids = (await ctx.store.enqueueMany(Array.from({ length: 8 }, (_, i) => ({ taskType: i % 2 ? "odd" : "even", params: { n: `n${i}` } })))).map((r) => r.task.id);
      const held = await ctx.store.claim({ workerId: "w1", limit: 5 });
      await ctx.store.claim({ workerId: "w2", limit: 2 });
      await ctx.store.start(held[1].id, held[1]);
      await ctx.store.complete(held[0].id, held[0]);
      const holding = held.slice(1).map((t) => t.id);
      expect(holding).toEqual(ids.slice(1, 5));
      const leased: TaskFilter = { workerId: "w1", status: ["claimed", "running"] };
      expect((await ctx.store.list(leased)).tasks.map((t) => t.id)).toEqual([...holding].reverse());
      expect((await ctx.store.list(leased, { order: "oldest" })).tasks.map((t) => t.id)).toEqual(holding);
      expect((await ctx.store.list({ workerId: "w1", status: "running" })).tasks.map((t) => t.id)).toEqual([held[1].id]);
      expect((await ctx.store.list({ ...leased, taskType: "odd" })).tasks.map((t) => t.id)).toEqual([ids[3], ids[1]]);
      expect((await ctx.store.list({ ...leased, search: "N3" })).tasks.map((t) => t.id)).toEqual([ids[3]]);
      expect((await ctx.store.list({ ...leased, search: "n6" })).tasks).toEqual([]);
      // Its completed task is listed by worker too, with any status or that one.
      expect((await ctx.store.list({ workerId: "w1", status: "completed" })).tasks.map((t) => t.id)).toEqual([held[0].id]);
      expect((await ctx.store.list({ workerId: "w1" })).tasks).toHaveLength(5);
      const seen: number[] = [];
      for (let cursor: string | undefined, page = 0; page === 0 || cursor; page++) {
        const next = await ctx.store.list(leased, { limit: 3, cursor });
        seen.push(...next.tasks.map((t) => t.id));
        cursor = next.nextCursor ?? undefined;
      }
      expect(seen).toEqual([...holding].reverse());
    });

    it("pages each filter and order without repeating or skipping a task while others are added and change status", async () => {
      const enqueue = (n: number) => ctx.store.enqueueMany(Array.from({ length: n }, (_, i) => ({ taskType: i % 3 ? "x" : "y", params: { tag: "findme" } })));
      await enqueue(30);
      const views = [
        { filter: {}, order: "newest" },
        { filter: {}, order: "oldest" },
        { filter: { taskType: "x" }, order: "newest" },
        { filter: { status: "pending" }, order: "oldest" },
        { filter: { search: "findme", taskType: "x" }, order: "newest" },
      ] as const;
      for (const { filter, order } of views) {
        const before = (await ctx.store.list(filter, { limit: 1000, order })).tasks.map((t) => t.id);
        const seen: number[] = [];
        let cursor: string | undefined;
        do {
          const page = await ctx.store.list(filter, { limit: 4, cursor, order });
          seen.push(...page.tasks.map((t) => t.id));
          cursor = page.nextCursor ?? undefined;
          // Between pages: new tasks, and two tasks claimed (a status change the pending view sees).
          await enqueue(2);
          await ctx.store.claim({ workerId: "w", limit: 2, taskTypes: ["y"] });
        } while (cursor);
        expect(new Set(seen).size, `${JSON.stringify(filter)} ${order}`).toBe(seen.length);
        expect(seen, `${JSON.stringify(filter)} ${order}`).toEqual([...seen].sort((a, b) => (order === "newest" ? b - a : a - b)));
        // Every task that matched before and still matches was listed once; the claimed y tasks may have left the pending view.
        const still = new Set((await ctx.store.list(filter, { limit: 1000, order })).tasks.map((t) => t.id));
        expect(before.filter((id) => still.has(id) && !seen.includes(id)), `${JSON.stringify(filter)} ${order}`).toEqual([]);
      }
    });

    it("refuses a bad cursor, status or limit", async () => {
      await expect(ctx.store.list({}, { cursor: "garbage" })).rejects.toBeInstanceOf(ValidationError);
      await expect(ctx.store.list({ status: "done" as never })).rejects.toThrow(/status: must be one of pending, claimed, running, completed, failed, cancelled, or a list of at most 6 of them \(got "done"\)/);
      await expect(ctx.store.list({}, { limit: 0 })).rejects.toBeInstanceOf(ValidationError);
    });

    it("counts by status and by type", async () => {
      await ctx.store.enqueueMany([{ taskType: "a" }, { taskType: "a" }, { taskType: "b" }]);
      const lease = await claimOne(ctx.store, "w1", { taskTypes: ["b"] });
      await ctx.store.complete(lease.id, lease);
      const counts = await ctx.store.counts();
      expect(counts.byStatus).toEqual({ pending: 2, claimed: 0, running: 0, completed: 1, failed: 0, cancelled: 0 });
      expect(counts.byType).toEqual({ a: { pending: 2 }, b: { completed: 1 } });
    });

    it("keeps counting exactly through every way into completed, folded by a sweep or not", async () => {
      const check = async () => expect(await ctx.store.counts()).toEqual(await countsByReading(ctx.store));
      await ctx.store.enqueueMany(Array.from({ length: 12 }, (_, i) => ({ taskType: i % 3 === 0 ? "b" : "a", maxAttempts: 1 })));
      await check();
      // Completed one at a time, with a follow-up, and in batches (one of whose items is refused).
      const one = await claimOne(ctx.store, "w1", { taskTypes: ["a"] });
      await ctx.store.complete(one.id, one, { followUps: [{ taskType: "c" }] });
      const batch = await ctx.store.claim({ workerId: "w2", limit: 5 });
      await ctx.store.completeMany([...batch.slice(0, 4).map((t) => ({ id: t.id, lease: t })), { id: batch[4].id, lease: { ...batch[4], leaseToken: "stale" } }]);
      await check();
      // Completing twice counts once.
      await expect(ctx.store.complete(one.id, one)).rejects.toThrow();
      await ctx.store.completeMany([{ id: batch[0].id, lease: batch[0] }]);
      await check();
      // Failed, cancelled, running: none of them completed.
      const failing = await claimOne(ctx.store, "w3", { taskTypes: ["b"] });
      await ctx.store.fail(failing.id, failing, { error: "boom" });
      await ctx.store.cancel((await ctx.store.list({ status: "pending", taskType: "a" })).tasks[0].id);
      const running = await claimOne(ctx.store, "w4", { leaseSeconds: 86_400 });
      await ctx.store.start(running.id, running);
      await check();
      await ctx.store.sweep({ staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 });
      await check();
      const next = await claimOne(ctx.store, "w5", { taskTypes: ["c"] });
      await ctx.store.complete(next.id, next);
      await check();
      expect((await ctx.store.counts()).byStatus.completed).toBe(6);
    });

    it("returns no events for an unknown task", async () => {
      expect(await ctx.store.events(777)).toEqual([]);
    });
  });
}
