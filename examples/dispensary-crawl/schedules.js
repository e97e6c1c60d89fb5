/**
 * When seed 004's pipeline runs, as taskpool schedule definitions (docs/schedules.md): store discovery
 * weekly, every discovered store resynced once a day in 6 staggered batches (one every 4 hours), the
 * analytics views refreshed daily. The leading coordinator fires them.
 *
 * `schedules` is the real cadence. `devSchedules()` is the same pipeline with a day lasting 20 seconds,
 * for `taskpool dev`: the 4-hour batches come every 3 s or so. It is written as 6-field cron (seconds
 * first) rather than by speeding up a clock, because leases, heartbeats and backoff run on the same
 * clock and must stay real; these are ordinary schedules that `taskpool schedules list` and the
 * dashboard show as they are.
 *
 * Save the real ones into a database (PostgreSQL or SQLite) with the library's schedule API:
 *
 *   node examples/dispensary-crawl/schedules.js postgres://user@host/db   (default: $TASKPOOL_DATABASE_URL, then sqlite:./taskpool.db)
 */
import process from "node:process";
import { pathToFileURL } from "node:url";

/** Where the stores are, and how many the simulated directory holds (handlers.js). */
const DISCOVERY_PARAMS = { region: "CA", stores: 12 };

/** The resync's keys: the stores the latest discovery run found (its tasks' results, field `storeIds`). */
const DISCOVERED_STORES = { schedule: "store_discovery", field: "storeIds" };

/** Seed 004's cadence, read in the stores' time zone. */
export const schedules = [
  // A missed weekly discovery (no coordinator at the tick) runs once when one is back: a week is long to wait.
  { name: "store_discovery", taskType: "store_discovery", params: DISCOVERY_PARAMS, cron: "0 6 * * 1", timezone: "America/Los_Angeles", missedTicks: "run_once" },
  // Daily at midnight, 6 batches: the default spacing is the time to the next tick shared out, 24 h / 6 = 4 h.
  {
    name: "product_resync",
    taskType: "product_resync",
    cron: "0 0 * * *",
    timezone: "America/Los_Angeles",
    fanOut: { fromResults: DISCOVERED_STORES, batches: 6 },
    concurrencyKey: "store:{key}",
  },
  { name: "analytics_refresh", taskType: "analytics_refresh", cron: "30 5 * * *", timezone: "America/Los_Angeles" },
];

/**
 * The same schedules with a day lasting 20 s (UTC, 6-field cron): resync batches every 20 s / 6 ≈ 3.3 s,
 * analytics every 20 s, discovery every 2 minutes (a week would be 140 s, which cron cannot count) with
 * its first run 2 to 3 s after `start`, so the pipeline starts at once.
 */
export function devSchedules(start = new Date()) {
  const first = new Date(Math.ceil(start.getTime() / 1000) * 1000 + 2000);
  const discovery = `${first.getUTCSeconds()} ${first.getUTCMinutes() % 2}-59/2 * * * *`;
  const [weekly, daily, analytics] = schedules;
  return [
    { ...weekly, cron: discovery, timezone: "UTC" },
    { ...daily, cron: "*/20 * * * * *", timezone: "UTC" },
    { ...analytics, cron: "5-59/20 * * * * *", timezone: "UTC" },
  ];
}

// Run as a script: save the real schedules (create, or update by name) in the database named on the command line.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  // "taskpool" is the installed package (in this repository, the package itself: npm install builds it).
  const { connect } = await import("taskpool");
  const url = process.argv[2] ?? process.env.TASKPOOL_DATABASE_URL ?? "sqlite:./taskpool.db";
  const pool = await connect(url, { schema: process.env.TASKPOOL_SCHEMA }); // as the CLI: the PostgreSQL schema, default taskpool
  try {
    for (const definition of schedules) {
      const saved = await pool.schedule(definition);
      process.stdout.write(`Saved schedule ${saved.name} (${saved.cron} ${saved.timezone}): next run ${saved.nextRunAt?.toISOString() ?? "none (paused)"}\n`);
    }
  } finally {
    await pool.close();
  }
}
