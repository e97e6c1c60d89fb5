/**
 * The demo `taskpool dev` runs: seed 004's dispensary pipeline, simulated. store_discovery finds
 * stores and chains an entry_point_discovery per store, which chains a product_discovery, which
 * chains a product_resync (one per store at a time, via its concurrency key). Crawls checkpoint
 * every page, and store 3's first attempt "times out" so a retry with backoff shows up in the audit trail.
 */
import { setTimeout as delay } from "node:timers/promises";
import type { EnqueueInput } from "../core/task.js";
import type { Handler } from "../worker/options.js";

/** Simulated I/O that stops as soon as the task's signal fires (lease lost, timeout, shutdown). */
const pause = (ms: number, signal: AbortSignal) => delay(ms, undefined, { signal });

export const DEMO_ROLES = ["store_discovery", "entry_point_discovery", "product_discovery", "product_resync"];

export const demoHandlers: Record<string, Handler> = {
  async store_discovery(params, ctx) {
    await pause(500, ctx.signal);
    const count = Number(params.stores ?? 5);
    for (let storeId = 1; storeId <= count; storeId++) ctx.enqueue("entry_point_discovery", { storeId }, { priority: 5, backoff: { baseSeconds: 1 } });
    return { newStoreIds: Array.from({ length: count }, (_, i) => i + 1) };
  },
  async entry_point_discovery(params, ctx) {
    await pause(300, ctx.signal);
    if (params.storeId === 3 && ctx.attempt === 1) throw new Error("menu URL timed out (simulated)");
    const platformId = `disp-${params.storeId}`;
    ctx.enqueue("product_discovery", { storeId: params.storeId as number, platformId }, { concurrencyKey: `store:${params.storeId}` });
    return { platformId };
  },
  async product_discovery(params, ctx) {
    const pages = 5;
    let page = (ctx.checkpoint as { page?: number } | null)?.page ?? 0;
    for (; page < pages; page++) {
      await pause(400, ctx.signal);
      await ctx.saveCheckpoint({ page: page + 1 });
      await ctx.progress((page + 1) / pages);
    }
    ctx.enqueue("product_resync", { storeId: params.storeId as number }, { concurrencyKey: `store:${params.storeId}` });
    return { products: pages * 20, resumedFrom: (ctx.checkpoint as { page?: number } | null)?.page ?? 0 };
  },
  async product_resync(params, ctx) {
    await pause(800, ctx.signal);
    return { storeId: params.storeId as number, pricesUpdated: 100 };
  },
};

/** The first task of the pipeline; its unique key keeps restarts from piling up discoveries. */
export const DEMO_SEED: EnqueueInput = { taskType: "store_discovery", params: { stores: 5 }, uniqueKey: "demo:store_discovery" };
