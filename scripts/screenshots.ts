/**
 * Regenerates docs/screenshots/*.png: a server on a scratch SQLite file with demo data (an hour of
 * backdated throughput, seed 004's pipeline running on in-process workers, a failing role, a worker
 * that dies and whose task is reassigned), photographed page by page in Debian's chromium.
 *
 *   npx tsx scripts/screenshots.ts
 */
import { mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { chromium } from "playwright-core";
import { pino } from "pino";
import { CheckedStore } from "../src/api/checked-store.js";
import { Taskpool } from "../src/api/taskpool.js";
import { handlers as crawl } from "../examples/dispensary-crawl/handlers.js";
import { buildServer } from "../src/server/server.js";
import { SqliteStore } from "../src/store/sqlite/sqlite-store.js";

const OUT = "docs/screenshots";
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run", "--disable-sync"];
const logger = pino({ level: "silent" });
const path = join(tmpdir(), `taskpool-screenshots-${process.pid}.db`);

// The store's clock runs `offsetMs` behind the real one while the past is written.
let offsetMs = 0;
const store = new SqliteStore({ path, clock: { now: () => new Date(Date.now() + offsetMs) } });
await store.migrate();
const pool = new Taskpool(new CheckedStore(store), null);

// An hour of history: crawls completed every minute, a few failures, claimed a few seconds after they were due.
for (let minute = 58; minute >= 1; minute--) {
  const n = 4 + Math.round(6 * Math.abs(Math.sin(minute / 7)));
  for (let i = 0; i < n; i++) {
    offsetMs = -minute * 60_000 + i * 1000;
    const { task } = await store.enqueue({ taskType: "product_resync", params: { storeId: i + 1 }, maxAttempts: 1 });
    offsetMs += 1500 + (i % 3) * 1000;
    const [claimed] = await store.claim({ workerId: "resync-1", taskTypes: ["product_resync"] });
    offsetMs += 3000;
    if (minute % 9 === 0 && i === 0) await store.fail(task.id, claimed, { error: "HTTP 429 from the menu API" });
    else await store.complete(task.id, claimed, { result: { pricesUpdated: 100 } });
  }
}
offsetMs = 0;
for (const storeId of [11, 12, 13]) {
  await pool.enqueue("menu_import", { storeId }, { maxAttempts: 1 });
}

// A worker that holds a long crawl and goes silent: the coordinator declares it dead and reassigns its task.
await pool.protocol.workerHeartbeat({ workerId: "crawler-3", roles: ["product_discovery"], capacity: 2, currentLoad: 1, tasksProcessed: 37, hostname: "node-b", pid: 4242, version: "0.1.0" });
const long = await pool.enqueue("product_discovery", { storeId: 99, platformId: "disp-99" }, { priority: 10 });
const [held] = await pool.protocol.claim({ workerId: "crawler-3", taskTypes: ["product_discovery"] });
await pool.protocol.checkpoint(long.id, held, { page: 3 });

await pool.schedule({ name: "daily_resync", taskType: "product_resync", cron: "0 */4 * * *", fanOut: { keys: [1, 2, 3, 4, 5, 6], batches: 6 }, concurrencyKey: "store:{key}" });
await pool.schedule({ name: "weekly_discovery", taskType: "store_discovery", cron: "0 6 * * 1", timezone: "Europe/Paris", enabled: false });

const app = await buildServer(pool, { auth: "none", runCoordinator: true, coordinator: { sweepIntervalMs: 250, staleAfterMs: 1500, deadAfterMs: 3000, reservationMs: 30_000, logger } });
const url = await app.listen({ host: "127.0.0.1", port: 0 });

const workers = [
  pool.worker({ roles: ["store_discovery", "entry_point_discovery", "product_discovery", "product_resync"], workerId: "crawler-1", concurrency: 4, pollIntervalMs: 200, heartbeatIntervalMs: 500, logger, handlers: crawl }),
  pool.worker({ roles: ["product_discovery", "product_resync"], workerId: "crawler-2", concurrency: 2, pollIntervalMs: 200, heartbeatIntervalMs: 500, logger, handlers: crawl }),
  pool.worker({
    roles: ["menu_import"],
    workerId: "importer-1",
    pollIntervalMs: 200,
    heartbeatIntervalMs: 500,
    logger,
    handlers: {
      async menu_import(params) {
        throw new Error(params.storeId === 13 ? "menu schema changed: no 'price' field" : "HTTP 503 from the menu API");
      },
    },
  }),
];
for (const w of workers) await w.start();
await pool.enqueue("store_discovery", { region: "CA", stores: 5 });
await pool.enqueueMany(Array.from({ length: 40 }, (_, i) => ({ taskType: "product_resync", params: { storeId: 100 + i }, scheduledFor: new Date(Date.now() + 3_600_000) })));

await delay(6000);
mkdirSync(OUT, { recursive: true });
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
const shots: [string, string, { width: number; height: number; dark?: boolean }][] = [
  ["overview", "#/overview", { width: 1280, height: 1100 }],
  ["workers", "#/workers?worker=crawler-1", { width: 1280, height: 800 }],
  ["tasks", "#/tasks", { width: 1280, height: 900 }],
  ["task", `#/tasks/${long.id}`, { width: 1280, height: 1100 }],
  ["dead-letter", "#/dead-letter", { width: 1280, height: 600 }],
  ["reassignments", "#/reassignments", { width: 1280, height: 800 }],
  ["capacity", "#/capacity", { width: 1280, height: 600 }],
  ["schedules", "#/schedules", { width: 1280, height: 400 }],
  ["overview-phone-dark", "#/overview", { width: 390, height: 1400, dark: true }],
];
for (const [name, hash, { width, height, dark }] of shots) {
  const page = await browser.newPage({ viewport: { width, height }, colorScheme: dark ? "dark" : "light" });
  await page.goto(`${url}/?interval=1000${hash}`);
  await page.waitForSelector("main section.panel");
  await delay(500);
  await page.screenshot({ path: `${OUT}/${name}.png` });
  await page.close();
  console.log(`${OUT}/${name}.png`);
}
await browser.close();
for (const w of workers) await w.stop(0);
await app.close();
await pool.close();
for (const ext of ["", "-wal", "-shm"]) rmSync(path + ext, { force: true });
