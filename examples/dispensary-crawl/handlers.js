/**
 * Seed 004's dispensary crawl as taskpool handlers: one handler per role, each role a task type.
 * The network is simulated (pauses, a directory of numbered stores, one menu that times out once) so
 * the example runs anywhere; replace the `io` calls with real requests and keep the rest.
 *
 *   store_discovery        finds a region's stores; chains an entry_point_discovery per store
 *   entry_point_discovery  resolves a store's platform id from its menu URL; chains product_discovery
 *   product_discovery      first full crawl of a store's menu, page by page; chains product_resync
 *   product_resync         price and stock update of one store (schedules.js also fans it out)
 *   analytics_refresh      refreshes the reporting views, one by one
 *
 * Every per-store task carries the concurrency key `store:<id>`: one active task per store, whichever
 * role (seed 004's per-store lock). Long crawls checkpoint after every page, so a retry or a worker that
 * takes over from a dead one resumes where the last attempt stopped.
 *
 *   taskpool worker --handlers examples/dispensary-crawl/handlers.js [--role product_resync] --db …
 */
import { setTimeout as delay } from "node:timers/promises";

/** Simulated network time; ends early when the task's signal fires (lease lost, cancelled, timeout, shutdown). */
const io = (ms, signal) => delay(ms, undefined, { signal });

/** The store a per-store task is about: chained tasks say `storeId`; a schedule's fan-out gives each task its `key`. */
const storeOf = (params) => Number(params.storeId ?? params.key);

/** Options of every follow-up about one store: its lock, and a quick first retry (a flaky menu is usually back in a second). */
const perStore = (storeId, options = {}) => ({ concurrencyKey: `store:${storeId}`, backoff: { baseSeconds: 1 }, ...options });

/** Crawls `pages` pages of a store's menu from the checkpoint on, saving it after each page; `page(n)` returns that page's item count. */
async function crawlPages(ctx, pages, pageMs, page) {
  const from = ctx.checkpoint?.page ?? 0;
  let items = ctx.checkpoint?.items ?? 0;
  for (let n = from; n < pages; n++) {
    await io(pageMs, ctx.signal);
    items += page(n);
    await ctx.saveCheckpoint({ page: n + 1, items });
    await ctx.progress((n + 1) / pages);
    // The worker is stopping (a deploy, SIGTERM): hand the crawl back now, for another worker to go on from this page.
    ctx.stopping.throwIfAborted();
  }
  return { pages, items, resumedFromPage: from };
}

/** One handler per role: `taskpool worker` claims the task types named here (or those given with --role). */
export const handlers = {
  async store_discovery(params, ctx) {
    const region = params.region ?? "CA";
    await io(500, ctx.signal); // the platform's store directory (GraphQL, in seed 004)
    const storeIds = Array.from({ length: Number(params.stores ?? 12) }, (_, i) => i + 1);
    // A real crawler would compare with its stores table and chain only the new ones; the simulated
    // directory has no memory, so every run resolves every store again (menus do move).
    for (const storeId of storeIds) ctx.enqueue("entry_point_discovery", { storeId, region }, perStore(storeId, { priority: 5 }));
    return { region, storeIds };
  },

  async entry_point_discovery(params, ctx) {
    const storeId = storeOf(params);
    await io(300, ctx.signal);
    // The one transient failure of the pipeline: store 3's menu times out on the first try, and the
    // task is retried after its backoff (the audit trail shows both attempts).
    if (storeId === 3 && ctx.attempt === 1) throw new Error(`menu URL of store ${storeId} timed out (simulated)`);
    const platformId = `disp-${storeId}`;
    ctx.enqueue("product_discovery", { storeId, platformId }, perStore(storeId));
    return { storeId, platformId };
  },

  async product_discovery(params, ctx) {
    const storeId = storeOf(params);
    const crawl = await crawlPages(ctx, 5, 400, (n) => 20 + ((storeId + n) % 7));
    // The store now gets a first resync; from then on, the product_resync schedule covers it.
    ctx.enqueue("product_resync", { storeId }, perStore(storeId));
    return { storeId, products: crawl.items, pages: crawl.pages, resumedFromPage: crawl.resumedFromPage };
  },

  async product_resync(params, ctx) {
    const storeId = storeOf(params);
    const crawl = await crawlPages(ctx, 3, 250, (n) => (storeId * 7 + n * 3) % 11);
    return { storeId, pricesUpdated: crawl.items, pages: crawl.pages, resumedFromPage: crawl.resumedFromPage };
  },

  async analytics_refresh(params, ctx) {
    const views = params.views ?? ["store_summary", "price_history", "brand_share"];
    const done = ctx.checkpoint?.done ?? [];
    for (const view of views.filter((v) => !done.includes(v))) {
      await io(300, ctx.signal); // REFRESH MATERIALIZED VIEW CONCURRENTLY, in seed 004
      done.push(view);
      await ctx.saveCheckpoint({ done });
      await ctx.progress(done.length / views.length);
    }
    return { refreshed: done };
  },
};
