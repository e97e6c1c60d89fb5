import type { FastifyInstance } from "fastify";
import { type Browser, chromium, type Page } from "playwright-core";
import { CheckedStore } from "../../src/api/checked-store.js";
import { Taskpool } from "../../src/api/taskpool.js";
import type { CoordinatorOptions } from "../../src/coordinator/coordinator.js";
import { buildServer } from "../../src/server/server.js";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { createSqlite, type TestStore } from "../helpers/stores.js";

/** Debian's chromium (`.ci/run` installs it), headless, with nothing that calls out to the network. */
export const CHROMIUM = { executablePath: "/usr/bin/chromium", args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run", "--disable-sync"] };

export function launchBrowser(): Promise<Browser> {
  return chromium.launch(CHROMIUM);
}

/**
 * Short coordinator thresholds (as test/process/crash.test.ts): workers beat every 200 ms, stale after
 * 1 s, dead after 2 s of silence, a sweep every 200 ms.
 */
export const COORDINATION: CoordinatorOptions = { sweepIntervalMs: 200, staleAfterMs: 1000, deadAfterMs: 2000, reservationMs: 10_000 };

/** A real server on a random port over a fresh SQLite file (worker processes open the same file), with keys of each scope, and a coordinator unless told not to. */
export interface DashboardServer {
  handle: TestStore<SqliteStore>;
  pool: Taskpool;
  app: FastifyInstance;
  url: string;
  keys: { admin: string; producer: string; worker: string };
  close(): Promise<void>;
}

export async function startDashboardServer(auth: "keys" | "none" = "keys", runCoordinator = true): Promise<DashboardServer> {
  const handle = await createSqlite();
  const pool = new Taskpool(new CheckedStore(handle.store), null);
  const keys = {
    admin: (await pool.createApiKey({ scope: "admin", name: "operator" })).key,
    producer: (await pool.createApiKey({ scope: "producer", name: "viewer" })).key,
    worker: (await pool.createApiKey({ scope: "worker", name: "a worker" })).key,
  };
  // No rate limit: the page polls every 500 ms here.
  const app = await buildServer(pool, { auth, runCoordinator, coordinator: COORDINATION, rateLimitPerMinute: false });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return {
    handle,
    pool,
    app,
    url,
    keys,
    async close() {
      await app.close();
      await handle.cleanup();
    },
  };
}

/**
 * Opens the dashboard polling every 500 ms and enters `key` in its form (null: none asked); fails the test on any error the page throws.
 * `before` runs on the page before it loads (routes that must see its first calls).
 */
export async function openDashboard(browser: Browser, server: DashboardServer, key: string | null, hash = "#/overview", before?: (page: Page) => Promise<unknown>): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await before?.(page);
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  page.on("close", () => {
    if (errors.length) throw new Error(`The page threw: ${errors.join("; ")}`);
  });
  await page.goto(`${server.url}/?interval=500${hash}`);
  if (key === null) return page;
  await page.fill("#api-key", key);
  await page.click("button[type=submit]");
  return page;
}
