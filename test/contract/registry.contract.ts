import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/core/errors.js";
import { MAX_LIVE_LISTED, type WorkerList, type WorkerQuery } from "../../src/core/worker.js";
import type { StoreKind } from "../helpers/stores.js";
import { useStore } from "./context.js";

const SWEEP = { staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 };
const GONE = 300;
const gone = (i: number) => `gone-${String(i).padStart(3, "0")}`;

/** Pages of the registry as `query` reads them, from the first to the last (each checked to list something). */
async function allPages(list: (query: WorkerQuery) => Promise<WorkerList>, query: WorkerQuery = {}): Promise<WorkerList[]> {
  const pages = [await list(query)];
  while (pages[pages.length - 1].nextCursor !== null) {
    const page = await list({ ...query, cursor: pages[pages.length - 1].nextCursor ?? undefined });
    expect(page.workers.length).toBeGreaterThan(0);
    pages.push(page);
  }
  return pages;
}

export function registryContract(kind: StoreKind) {
  describe("worker registry pages", () => {
    const ctx = useStore(kind);
    const beat = (workerId: string) => ctx.store.workerHeartbeat({ workerId, roles: ["crawl"], capacity: 10, currentLoad: 0, tasksProcessed: 0 });
    const ids = (page: WorkerList) => page.workers.map((w) => w.workerId);

    /** 300 workers dead (gone-000 heard from first, gone-299 last, a second apart), one stale, one active, one shut down last of all. */
    async function manyGone(): Promise<void> {
      for (let i = 0; i < GONE; i++) {
        ctx.clock.advance(1000);
        await beat(gone(i));
      }
      ctx.clock.advance(70_000);
      await beat("w-stale");
      await beat("w-left");
      ctx.clock.advance(61_000);
      await beat("w-active");
      const swept = await ctx.store.sweep(SWEEP);
      expect([swept.deadWorkers.length, [...swept.staleWorkers].sort()]).toEqual([GONE, ["w-left", "w-stale"]]);
      ctx.clock.advance(1000);
      await ctx.store.shutdownWorker("w-left");
    }

    it("lists the live workers in full and folds the gone ones: the 100 most recently heard from, with the counts of all", async () => {
      await manyGone();
      const page = await ctx.store.listWorkers();
      const recent = Array.from({ length: 99 }, (_, i) => gone(GONE - 1 - i));
      expect(ids(page)).toEqual(["w-active", "w-stale", "w-left", ...recent]);
      expect(page.workers.map((w) => w.status).slice(0, 4)).toEqual(["active", "stale", "inactive", "dead"]);
      expect(page.counts).toEqual({ active: 1, stale: 1, dead: GONE, inactive: 1 });
      expect(page.nextCursor).not.toBeNull();
    });

    it("pages on through every gone worker, most recently heard from first, each once", async () => {
      await manyGone();
      const pages = await allPages((q) => ctx.store.listWorkers(q), { limit: 120 });
      expect(pages.map((p) => p.workers.length)).toEqual([2 + 120, 120, 61]);
      expect(pages.flatMap(ids)).toEqual(["w-active", "w-stale", "w-left", ...Array.from({ length: GONE }, (_, i) => gone(GONE - 1 - i))]);
      for (const page of pages) expect(page.counts).toEqual({ active: 1, stale: 1, dead: GONE, inactive: 1 });
    });

    it("filters by status and by worker id; the counts stay the whole registry's", async () => {
      await manyGone();
      expect(ids(await ctx.store.listWorkers({ status: "inactive" }))).toEqual(["w-left"]);
      const dead = await ctx.store.listWorkers({ status: ["dead"], limit: 3 });
      expect(ids(dead)).toEqual([gone(299), gone(298), gone(297)]);
      expect(dead.counts.dead).toBe(GONE);
      expect(ids(await ctx.store.listWorkers({ status: ["active", "stale"] }))).toEqual(["w-active", "w-stale"]);
      const one = await ctx.store.listWorkers({ workerId: gone(0) });
      expect(one.workers).toMatchObject([{ workerId: gone(0), status: "dead" }]);
      expect(one).toMatchObject({ nextCursor: null, counts: { dead: GONE } });
      expect((await ctx.store.listWorkers({ workerId: "nobody" })).workers).toEqual([]);
    });

    it("pages gone workers heard from at the same moment by id", async () => {
      await ctx.store.workerHeartbeatMany(["c", "a", "d", "b"].map((workerId) => ({ workerId, roles: ["crawl"], capacity: 1 })));
      ctx.clock.advance(121_000);
      await ctx.store.sweep(SWEEP);
      const pages = await allPages((q) => ctx.store.listWorkers(q), { limit: 1 });
      expect(pages.flatMap(ids)).toEqual(["a", "b", "c", "d"]);
    });

    it(`lists at most ${MAX_LIVE_LISTED} live workers a page, then goes on with the rest`, async () => {
      const live = Array.from({ length: MAX_LIVE_LISTED + 1 }, (_, i) => `live-${String(i).padStart(4, "0")}`);
      await beat("w-dead");
      ctx.clock.advance(121_000);
      await ctx.store.workerHeartbeatMany(live.map((workerId) => ({ workerId, roles: ["crawl"], capacity: 1 })));
      await ctx.store.sweep(SWEEP);
      const pages = await allPages((q) => ctx.store.listWorkers(q));
      expect(pages.map((p) => p.workers.length)).toEqual([MAX_LIVE_LISTED, 2]);
      expect(pages.flatMap(ids)).toEqual([...live, "w-dead"]);
    });

    it("refuses a cursor that is none, or another listing's", async () => {
      await manyGone();
      const { nextCursor } = await ctx.store.listWorkers();
      await expect(ctx.store.listWorkers({ status: "dead", cursor: nextCursor ?? undefined })).rejects.toThrow(/other filters/);
      await expect(ctx.store.listWorkers({ cursor: "bm90IGEgY3Vyc29y" })).rejects.toBeInstanceOf(ValidationError);
      await expect(ctx.store.listWorkers({ limit: 0 })).rejects.toBeInstanceOf(ValidationError);
      await expect(ctx.store.listWorkers({ status: "gone" as "dead" })).rejects.toBeInstanceOf(ValidationError);
    });
  });
}
