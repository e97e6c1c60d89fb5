/**
 * One coordinator sweep at production scale: 1,000 workers and 100,000 tasks, ten of the workers just
 * past dead_after with the ~100 tasks they held, ten more just gone stale.
 *
 *   npm run bench:sweep
 *   BENCH_RUNS=9 BENCH_WORKERS=2000 BENCH_TASKS=200000 BENCH_STORES=postgres npm run bench:sweep
 *
 * Each run seeds a fresh schema (or SQLite file) with the same data, then times store.sweep() twice:
 * the first sweep marks the stale and dead workers and requeues and reassigns the dead workers' tasks
 * (the figure that matters), the repeat finds nothing to do (the cost of every quiet minute). The
 * PostgreSQL target is < 50 ms at the median; SQLite runs the same sweep for comparison.
 * Progress goes to stderr; the table and a JSON line to stdout.
 */
import { randomBytes } from "node:crypto";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { ManualClock } from "../src/core/clock.js";
import { DEFAULT_BACKOFF } from "../src/core/task.js";
import type { SweepOptions, SweepResult } from "../src/core/worker.js";
import { openStore } from "../src/store/open-store.js";
import { PostgresStore } from "../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../src/store/sqlite/sqlite-store.js";
import type { Store } from "../src/store/store.js";
import { envInt, envList } from "./lib/env.js";
import { round, summarize } from "./lib/stats.js";
import { formatTable } from "./lib/table.js";
import { dropSchema, PG_URL, removeSqliteFiles } from "./lib/database.js";

type StoreName = "postgres" | "sqlite";

const config = {
  workers: envInt("BENCH_WORKERS", 1000, 100),
  tasks: envInt("BENCH_TASKS", 100_000, 10_000),
  runs: envInt("BENCH_RUNS", 5),
  stores: envList<StoreName>("BENCH_STORES", ["postgres", "sqlite"], ["postgres", "sqlite"]),
};
/** The coordinator's defaults (60 s stale, 120 s dead, 30 s reservation). */
const SWEEP: SweepOptions = { staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 };
const TARGET_MS = 50;
const TASK_TYPES = ["email", "thumbnail", "crawl", "report", "sync", "webhook"];
const BACKOFF = JSON.stringify(DEFAULT_BACKOFF);

const log = (message: string) => console.error(`[bench:sweep] ${message}`);
const suffix = () => randomBytes(4).toString("hex");

// ---------------------------------------------------------------------------------------------
// The data set, built once in TypeScript so both stores get exactly the same rows.

type Value = string | number | Date | null;
type Row = Record<string, Value>;

/** PostgreSQL type of each seeded column; the keys are also the SQLite columns. */
const WORKER_COLUMNS = {
  worker_id: "text", roles: "jsonb", hostname: "text", pid: "int", version: "text", capacity: "int", current_load: "int",
  tasks_processed: "bigint", status: "text", last_seen_at: "timestamptz", started_at: "timestamptz",
};
const TASK_COLUMNS = {
  task_type: "text", status: "text", scheduled_for: "timestamptz", attempts: "int", worker_id: "text", lease_token: "text",
  lease_seconds: "int", lease_expires_at: "timestamptz", claimed_at: "timestamptz", started_at: "timestamptz",
  completed_at: "timestamptz", last_heartbeat_at: "timestamptz", checkpoint: "jsonb", result: "jsonb", error_message: "text",
  created_at: "timestamptz", updated_at: "timestamptz",
};

interface Dataset {
  workers: Row[];
  tasks: Row[];
  /** What the first sweep should report. */
  expected: { stale: number; dead: number; requeued: number };
}

/** A small seeded PRNG (mulberry32): every run and both stores get identical data. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Workers: 1 % just past dead_after (120-180 s silent, i.e. up to one 60 s sweep interval past it; the
 * previous sweep already marked them stale), 1 % just past stale_after (65-115 s silent), the rest
 * active (heard from in the last 30 s). Each has 1-3 of six roles, capacity 4-16 and a load below it.
 * Tasks: every worker holds `load` claimed or running ones of its roles, leased for 120 s from its
 * last heartbeat (the dead workers' leases have just run out too, as with the default lease), 5 %
 * are pending, and the rest is a week of history, 99.5 % completed and 0.5 % failed.
 */
function buildDataset(now: Date): Dataset {
  const random = prng(42);
  const between = (lo: number, hi: number) => lo + random() * (hi - lo);
  const int = (lo: number, hi: number) => Math.floor(between(lo, hi + 1));
  const ago = (seconds: number) => new Date(now.getTime() - seconds * 1000);
  const later = (date: Date, seconds: number) => new Date(date.getTime() + seconds * 1000);
  const token = () => Math.floor(random() * 2 ** 48).toString(16).padStart(12, "0");

  const workers: Row[] = [];
  const held: Row[] = [];
  const expected = { stale: 0, dead: 0, requeued: 0 };
  for (let i = 0; i < config.workers; i++) {
    // Spread through the table, as workers die whenever they die.
    const kind = i % 100 === 7 ? "dead" : i % 100 === 57 ? "stale" : "active";
    const silentFor = kind === "dead" ? between(120.5, 180) : kind === "stale" ? between(65, 115) : between(0, 30);
    const capacity = kind === "dead" ? int(11, 16) : int(4, 16);
    const load = kind === "dead" ? 10 : int(0, capacity - 1);
    const firstRole = int(0, TASK_TYPES.length - 1);
    const roles = Array.from({ length: int(1, 3) }, (_, k) => TASK_TYPES[(firstRole + k) % TASK_TYPES.length]);
    const lastSeen = ago(silentFor);
    const id = `worker-${String(i).padStart(4, "0")}`;
    workers.push({
      worker_id: id, roles: JSON.stringify(roles), hostname: `node-${i % 40}`, pid: 1000 + i, version: "0.1.0", capacity, current_load: load,
      tasks_processed: int(0, 50_000), status: kind === "dead" ? "stale" : "active", last_seen_at: lastSeen, started_at: ago(between(3600, 7 * 86400)),
    });
    if (kind === "dead") expected.dead++;
    if (kind === "stale") expected.stale++;
    if (kind === "dead") expected.requeued += load;
    for (let k = 0; k < load; k++) {
      const claimedAt = later(lastSeen, -between(0, 600));
      const running = random() < 0.9;
      const createdAt = later(claimedAt, -between(0, 60));
      held.push({
        task_type: roles[k % roles.length], status: running ? "running" : "claimed", scheduled_for: createdAt, attempts: 1, worker_id: id, lease_token: token(),
        lease_seconds: 120, lease_expires_at: later(lastSeen, 120), claimed_at: claimedAt, started_at: running ? later(claimedAt, 0.05) : null,
        completed_at: null, last_heartbeat_at: lastSeen, checkpoint: running && random() < 0.5 ? JSON.stringify({ page: int(1, 500) }) : null,
        result: null, error_message: null, created_at: createdAt, updated_at: lastSeen,
      });
    }
  }

  const pendingCount = Math.round(config.tasks * 0.05);
  const historyCount = config.tasks - pendingCount - held.length;
  const week = 7 * 86400;
  const history: Row[] = [];
  for (let j = 0; j < historyCount; j++) {
    // Oldest first, so ids follow creation time as they do in production.
    const createdAt = ago(600 + week * (1 - j / historyCount));
    const claimedAt = later(createdAt, between(0, 5));
    const completedAt = later(claimedAt, between(1, 60));
    const failed = random() < 0.005;
    history.push({
      task_type: TASK_TYPES[j % TASK_TYPES.length], status: failed ? "failed" : "completed", scheduled_for: createdAt, attempts: failed ? 3 : 1,
      worker_id: workers[j % workers.length].worker_id, lease_token: token(), lease_seconds: 120, lease_expires_at: null, claimed_at: claimedAt,
      started_at: claimedAt, completed_at: completedAt, last_heartbeat_at: completedAt, checkpoint: null, result: failed ? null : '{"ok":true}',
      error_message: failed ? "upstream returned 503" : null, created_at: createdAt, updated_at: completedAt,
    });
  }
  const pending: Row[] = [];
  for (let j = 0; j < pendingCount; j++) {
    const createdAt = ago(600 * (1 - j / pendingCount));
    pending.push({
      task_type: TASK_TYPES[j % TASK_TYPES.length], status: "pending", scheduled_for: createdAt, attempts: 0, worker_id: null, lease_token: null,
      lease_seconds: null, lease_expires_at: null, claimed_at: null, started_at: null, completed_at: null, last_heartbeat_at: null,
      checkpoint: null, result: null, error_message: null, created_at: createdAt, updated_at: createdAt,
    });
  }
  return { workers, tasks: [...history, ...held, ...pending], expected };
}

// ---------------------------------------------------------------------------------------------
// Seeding.

/**
 * Inserts rows through unnest(): one array parameter per column, so one statement carries thousands
 * of rows. `select` overrides a column's expression (PostgreSQL arrays cannot nest, so roles travel
 * as JSON and become text[] here). The tasks all use the default backoff and version 1 of their type.
 */
async function insertPostgres(pool: pg.Pool, table: string, columns: Record<string, string>, rows: Row[], select: Record<string, string> = {}) {
  const names = Object.keys(columns);
  const unnest = names.map((name, i) => `$${i + 1}::${columns[name]}[]`).join(", ");
  const extra = table === "tasks" ? { backoff: `'${BACKOFF}'::jsonb`, task_type_version: "1" } : {};
  const targets = [...names, ...Object.keys(extra)].join(", ");
  const values = [...names.map((name) => select[name] ?? `s.${name}`), ...Object.values(extra)].join(", ");
  const text = `INSERT INTO ${table} (${targets}) SELECT ${values} FROM unnest(${unnest}) AS s(${names.join(", ")})`;
  for (let from = 0; from < rows.length; from += 10_000) {
    const chunk = rows.slice(from, from + 10_000);
    await pool.query(text, names.map((name) => chunk.map((row) => row[name])));
  }
}

async function seedPostgres(pool: pg.Pool, data: Dataset): Promise<void> {
  await insertPostgres(pool, "workers", WORKER_COLUMNS, data.workers, { roles: "ARRAY(SELECT jsonb_array_elements_text(s.roles))" });
  await insertPostgres(pool, "tasks", TASK_COLUMNS, data.tasks);
  // Fresh statistics, as autovacuum would have gathered on tables that grew to this size. Named
  // tables (resolved through the store's search_path): a bare ANALYZE would do every schema.
  await pool.query("ANALYZE workers, tasks, task_types, task_events, reassignment_events");
}

function seedSqlite(db: SqliteStore["db"], data: Dataset): void {
  const insert = (table: string, columns: Record<string, string>) => {
    const names = Object.keys(columns);
    const extra = table === "tasks" ? ", backoff, task_type_version" : "";
    const extraValues = table === "tasks" ? ", @backoff, 1" : "";
    return db.prepare(`INSERT INTO ${table} (${names.join(", ")}${extra}) VALUES (${names.map((n) => `@${n}`).join(", ")}${extraValues})`);
  };
  // Times are ISO-8601 text in the SQLite store, as toISOString() writes them.
  const bind = (row: Row) => Object.fromEntries(Object.entries(row).map(([k, v]) => [k, v instanceof Date ? v.toISOString() : v]));
  const workers = insert("workers", WORKER_COLUMNS);
  const tasks = insert("tasks", TASK_COLUMNS);
  db.transaction(() => {
    for (const row of data.workers) workers.run(bind(row));
    for (const row of data.tasks) tasks.run({ ...bind(row), backoff: BACKOFF });
  })();
  // No ANALYZE, as in bench/claim.ts: nothing runs it on a real SQLite file (no autovacuum), so the
  // planner should see what users' files give it.
}

// ---------------------------------------------------------------------------------------------
// Runs.

interface RunResult {
  firstMs: number;
  repeatMs: number;
  first: SweepResult;
  repeat: SweepResult;
}

/** One run on a fresh, seeded store, whose clock is pinned to the data's "now". */
async function sweepRun(store: Store, clock: ManualClock, seed: (data: Dataset) => Promise<void>): Promise<RunResult> {
  for (const name of TASK_TYPES) await store.registerTaskType({ name });
  // A sweep on the empty tables first: it opens the connection and prepares the statements every
  // sweep runs, as a coordinator that has been up a while has them. (The ones that only run when
  // something is requeued are still prepared in the timed sweep, and in the process's first run the
  // JavaScript that plans reassignments is still cold: that run is usually the max.)
  await store.sweep(SWEEP);
  // Pinned: how long seeding takes on a busy machine must not move workers across the thresholds.
  const now = new Date();
  clock.set(now);
  await seed(buildDataset(now));

  const timed = async () => {
    const started = performance.now();
    const result = await store.sweep(SWEEP);
    return { ms: performance.now() - started, result };
  };
  const first = await timed();
  const repeat = await timed();
  return { firstMs: first.ms, repeatMs: repeat.ms, first: first.result, repeat: repeat.result };
}

async function runPostgres(): Promise<RunResult> {
  const schema = `tp_bench_${suffix()}`;
  const clock = new ManualClock();
  let store: Store | undefined;
  try {
    store = await openStore(PG_URL, { schema, clock });
    if (!(store instanceof PostgresStore)) throw new Error(`openStore(${PG_URL}) did not return a PostgresStore`);
    const pool = store.pool;
    return await sweepRun(store, clock, (data) => seedPostgres(pool, data));
  } finally {
    await store?.close().catch(() => {});
    await dropSchema(schema).catch((error) => log(`could not drop schema ${schema}: ${error}`));
  }
}

async function runSqlite(): Promise<RunResult> {
  const path = join(tmpdir(), `taskpool-bench-sweep-${suffix()}.db`);
  const clock = new ManualClock();
  let store: Store | undefined;
  try {
    store = await openStore(`sqlite:${path}`, { clock });
    if (!(store instanceof SqliteStore)) throw new Error("openStore(sqlite:…) did not return a SqliteStore");
    const db = store.db;
    return await sweepRun(store, clock, async (data) => seedSqlite(db, data));
  } finally {
    await store?.close().catch(() => {});
    removeSqliteFiles(path);
  }
}

// ---------------------------------------------------------------------------------------------
// Report.

interface StoreResult {
  store: StoreName;
  runs: RunResult[];
}

const counts = (r: SweepResult) => ({
  stale: r.staleWorkers.length,
  dead: r.deadWorkers.length,
  requeued: r.requeued.length,
  reassigned: r.reassigned.length,
  unassigned: r.unassigned.length,
  failed: r.failed.length,
});

function report(results: StoreResult[], expected: Dataset["expected"], taskCount: number): void {
  const rows = results.map((r) => {
    const first = summarize(r.runs.map((x) => x.firstMs));
    const repeat = summarize(r.runs.map((x) => x.repeatMs));
    return { store: r.store, first, repeat, did: counts(r.runs[0].first), repeatDid: counts(r.runs[0].repeat), met: first.p50 < TARGET_MS };
  });
  const lines = [
    `taskpool sweep bench: ${config.workers} workers (${expected.dead} past dead_after, ${expected.stale} past stale_after), ` +
      `${taskCount} tasks (${expected.requeued} held by the dead workers), ${config.runs} runs on freshly seeded data`,
    `sweep(stale 60 s, dead 120 s, reservation 30 s); node ${process.version}, ${availableParallelism()} CPUs`,
    "",
    formatTable(
      ["store", "first p50", "max", "repeat p50", "max", "stale", "dead", "requeued", "reassigned", "unassigned", "failed", `p50 < ${TARGET_MS} ms`],
      rows.map((r) => [
        r.store,
        r.first.p50,
        r.first.max,
        r.repeat.p50,
        r.repeat.max,
        r.did.stale,
        r.did.dead,
        r.did.requeued,
        r.did.reassigned,
        r.did.unassigned,
        r.did.failed,
        r.met ? "met" : "MISSED",
      ]),
    ),
    "(ms; first = the sweep that handles the dead workers, counts are what it did; repeat = the next sweep, with nothing to do;",
    ` the ${TARGET_MS} ms target is for PostgreSQL, SQLite is there for comparison)`,
    "",
  ];
  const json = {
    bench: "sweep",
    date: new Date().toISOString(),
    node: process.version,
    cpus: availableParallelism(),
    workers: config.workers,
    tasks: taskCount,
    expected,
    runs: config.runs,
    targetMs: TARGET_MS,
    results: rows.map((r) => ({
      store: r.store,
      firstMs: { p50: round(r.first.p50), max: round(r.first.max) },
      repeatMs: { p50: round(r.repeat.p50), max: round(r.repeat.max) },
      did: r.did,
      repeatDid: r.repeatDid,
      targetMet: r.met,
      samples: results.find((x) => x.store === r.store)!.runs.map((x) => ({ firstMs: round(x.firstMs), repeatMs: round(x.repeatMs) })),
    })),
  };
  console.log(lines.join("\n"));
  console.log(JSON.stringify(json));
}

async function main(): Promise<void> {
  const interrupted = new AbortController();
  // Without a handler Ctrl-C would end the process on the spot, skipping the finally blocks that drop
  // the schema and delete the file: stop after the current run instead (a second Ctrl-C still kills).
  process.once("SIGINT", () => interrupted.abort(new Error("interrupted")));

  const probe = buildDataset(new Date());
  const results: StoreResult[] = [];
  for (const store of config.stores) {
    const runs: RunResult[] = [];
    for (let i = 1; i <= config.runs; i++) {
      interrupted.signal.throwIfAborted();
      log(`${store}: run ${i}/${config.runs}: seeding ${config.workers} workers and ${probe.tasks.length} tasks, then sweeping`);
      const run = store === "postgres" ? await runPostgres() : await runSqlite();
      const did = counts(run.first);
      log(`${store}: run ${i}: first sweep ${run.firstMs.toFixed(1)} ms (${JSON.stringify(did)}), repeat ${run.repeatMs.toFixed(1)} ms`);
      // Every run sweeps the same data, so anything else means the sweep (or the seed) is wrong.
      const want = { stale: probe.expected.stale, dead: probe.expected.dead, requeued: probe.expected.requeued };
      if (did.stale !== want.stale || did.dead !== want.dead || did.requeued !== want.requeued || did.reassigned !== want.requeued) {
        log(`warning: expected ${JSON.stringify(want)} requeued and reassigned, got ${JSON.stringify(did)}`);
      }
      runs.push(run);
    }
    results.push({ store, runs });
  }
  report(results, probe.expected, probe.tasks.length);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
