/**
 * Claim latency as the claimers and the table grow: claim p50/p95/p99 and claim + complete cycles/s
 * for each number of concurrent claimers, at each table size, on each store.
 *
 *   npm run bench:claim
 *   BENCH_SIZES=10000 BENCH_CLAIMERS=8,16 BENCH_CYCLES=500 BENCH_STORES=postgres,postgres-shared npm run bench:claim
 *
 * Each claimer does what an HTTP worker will: claim({ limit: 1 }), then complete() it, again and
 * again. PostgreSQL claimers are async loops in this process, each on its own pooled connection,
 * calling the store itself (`postgres`) or the server's batchers in front of it (`postgres-shared`);
 * SQLite claimers are processes on one file (claim-sqlite-claimer.ts), as SQLite deployments scale
 * out. For each size in BENCH_SIZES (rows in the tasks table) a fresh schema or file is seeded in one
 * statement (INSERT … SELECT generate_series on PostgreSQL, a recursive CTE on SQLite): the backlog
 * the run will claim (pending rows) and, for the rest, completed history. Then, for each claimer
 * count in BENCH_CLAIMERS (PostgreSQL) or BENCH_SQLITE_CLAIMERS (SQLite), the claimers together run
 * BENCH_CYCLES cycles. The configurations run on the same table one after another, so the table
 * keeps its size and the backlog shrinks by BENCH_CYCLES each time; before each one, PostgreSQL's
 * tasks table is vacuumed and analysed (autovacuum's work, off the clock). BENCH_DELAYED adds that
 * many pending tasks scheduled a day later, ahead of the backlog in the claim order (a delay, a
 * retry's backoff): claims walked past them before they waited outside the claim indexes (PostgreSQL
 * migration 028, SQLite 025).
 *
 * Warm-up, unrecorded: on PostgreSQL, the largest claimer count runs a few cycles per claimer first,
 * so every pooled connection has prepared its statements; each SQLite claimer process does the
 * same before it starts. Progress goes to stderr; the tables and one JSON line to stdout.
 */
import { type ChildProcess, fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { CheckedStore } from "../src/api/checked-store.js";
import { ClaimBatcher, WriteBatcher } from "../src/api/write-batcher.js";
import { DEFAULT_BACKOFF, type Task } from "../src/core/task.js";
import { openStore } from "../src/store/open-store.js";
import { PostgresStore } from "../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../src/store/sqlite/sqlite-store.js";
import type { ClaimerMessage } from "./claim-sqlite-claimer.js";
import { type ClaimPath, claimCycles, type ClaimerSamples } from "./lib/claim-loop.js";
import { describeMachine, type MachineState, machineState } from "./lib/cpu.js";
import { envInt, envIntList, envList } from "./lib/env.js";
import { onInterrupt } from "./lib/interrupt.js";
import { type Percentiles, round, summarize } from "./lib/stats.js";
import { type Cell, formatTable } from "./lib/table.js";
import { dropSchema, PG_URL, postgresServer, removeSqliteFiles } from "./lib/database.js";

/**
 * postgres: each claimer's calls are its own statements on its own connection (a library worker's
 * path). postgres-shared: the same claimers go through the batchers `taskpool serve` puts in front of
 * the store (ClaimBatcher, WriteBatcher), so concurrent claims share one statement and concurrent
 * completions another: the path of HTTP workers reaching one server, without the HTTP.
 */
type StoreName = "postgres" | "postgres-shared" | "sqlite";

const pgClaimers = envIntList("BENCH_CLAIMERS", [1, 2, 4, 8, 16, 32]);
const config = {
  sizes: envIntList("BENCH_SIZES", [10_000, 100_000, 1_000_000]),
  claimers: { postgres: pgClaimers, "postgres-shared": pgClaimers, sqlite: envIntList("BENCH_SQLITE_CLAIMERS", [1, 2, 4, 8]) },
  cycles: envInt("BENCH_CYCLES", 1000),
  delayed: envInt("BENCH_DELAYED", 0),
  stores: envList<StoreName>("BENCH_STORES", ["postgres", "postgres-shared", "sqlite"], ["postgres", "postgres-shared", "sqlite"]),
};
/** Unrecorded cycles per claimer before the first PostgreSQL configuration, and per SQLite claimer process. */
const WARMUP_PER_CLAIMER = 2;
const BACKOFF = JSON.stringify(DEFAULT_BACKOFF);
const CLAIMER_SCRIPT = fileURLToPath(new URL("./claim-sqlite-claimer.ts", import.meta.url));

/** One configuration: a store, a table size and a number of concurrent claimers. */
interface Result {
  store: StoreName;
  rows: number;
  /** Pending rows when this configuration started (the rest of `rows` is history). */
  backlog: number;
  claimers: number;
  cycles: number;
  seconds: number;
  cyclesPerSecond: number;
  retries: number;
  claimMs: Percentiles;
  completeMs: Percentiles;
}

interface PostgresServer {
  version: string;
  synchronousCommit: string;
}

const log = (message: string) => console.error(`[bench:claim] ${message}`);
const suffix = () => randomBytes(4).toString("hex");
const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const max = (values: number[]) => values.reduce((a, b) => Math.max(a, b), 0);

/**
 * Cycles each configuration runs (SQLite splits them evenly between its processes, rounding up) and
 * the warm-up cycles it uses, so the backlog seeded for a size covers every configuration.
 */
function plan(store: StoreName, size: number): { history: number; backlog: number; cyclesFor: (claimers: number) => number } {
  const counts = config.claimers[store];
  const cyclesFor = (k: number) => (store !== "sqlite" ? config.cycles : k * Math.ceil(config.cycles / k));
  const warmup = store !== "sqlite" ? max(counts) * WARMUP_PER_CLAIMER : counts.reduce((sum, k) => sum + k * WARMUP_PER_CLAIMER, 0);
  const backlog = counts.reduce((sum, k) => sum + cyclesFor(k), 0) + warmup;
  if (backlog > size) {
    throw new Error(`BENCH_SIZES: ${size} rows cannot hold the ${backlog}-task backlog of ${counts.length} ${store} configurations × BENCH_CYCLES=${config.cycles}; use a larger size or fewer cycles`);
  }
  return { history: size - backlog, backlog, cyclesFor };
}

/**
 * Where the backlog starts. Seeds are stamped relative to the bench's clock (the stores use the
 * system clock too) and all lie in the past, so every pending row is claimable at once: history
 * 1 s apart before this instant, then the backlog 1 ms apart, so the claim order (priority,
 * created_at, id) is the insertion order. The tasks not yet due (BENCH_DELAYED) are created just
 * before the backlog, so they come first in that order, and are due a day later.
 */
const backlogStart = (backlog: number) => new Date(Date.now() - 60_000 - backlog);

async function seedPostgres(pool: pg.Pool, history: number, backlog: number): Promise<void> {
  const start = backlogStart(backlog);
  await pool.query(
    `INSERT INTO tasks (task_type, params, status, scheduled_for, attempts, max_attempts, backoff, worker_id, lease_token,
                        lease_seconds, claimed_at, started_at, completed_at, last_heartbeat_at, result, created_at, updated_at)
     SELECT 'bench', jsonb_build_object('n', i), 'completed', t, 1, 3, $3::jsonb, 'seed', gen_random_uuid()::text,
            120, t, t, t + interval '1 second', t, '{"ok":true}', t, t + interval '1 second'
     FROM generate_series(1, $1::int) AS i,
          LATERAL (SELECT $2::timestamptz - ($1::int + 1 - i) * interval '1 second' AS t) AS s`,
    [history, start, BACKOFF],
  );
  await pool.query(
    `INSERT INTO tasks (task_type, params, scheduled_for, backoff, created_at, updated_at)
     SELECT 'bench', jsonb_build_object('n', i), t, $3::jsonb, t, t
     FROM generate_series(1, $1::int) AS i,
          LATERAL (SELECT $2::timestamptz + i * interval '1 millisecond' AS t) AS s`,
    [backlog, start, BACKOFF],
  );
  await pool.query(
    `INSERT INTO tasks (task_type, params, scheduled_for, backoff, created_at, updated_at)
     SELECT 'bench', jsonb_build_object('n', i), $2::timestamptz + interval '1 day', $3::jsonb, $2::timestamptz, $2::timestamptz
     FROM generate_series(1, $1::int) AS i`,
    [config.delayed, start, BACKOFF],
  );
}

function seedSqlite(store: SqliteStore, history: number, backlog: number): void {
  const iso = (expr: string) => `strftime('%Y-%m-%dT%H:%M:%fZ', ${expr}, 'unixepoch')`;
  const params = { start: backlogStart(backlog).getTime() / 1000, backoff: BACKOFF };
  // Times are ISO-8601 text in the SQLite store (see its migration); strftime writes the same format.
  const completed = store.db.prepare(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < @count),
          s(i, t) AS (SELECT i, @start - (@count + 1 - i) FROM n)
     INSERT INTO tasks (task_type, params, status, scheduled_for, attempts, max_attempts, backoff, worker_id, lease_token,
                        lease_seconds, claimed_at, started_at, completed_at, last_heartbeat_at, result, created_at, updated_at)
     SELECT 'bench', json_object('n', i), 'completed', ${iso("t")}, 1, 3, @backoff, 'seed', lower(hex(randomblob(16))),
            120, ${iso("t")}, ${iso("t")}, ${iso("t + 1")}, ${iso("t")}, '{"ok":true}', ${iso("t")}, ${iso("t + 1")}
     FROM s`,
  );
  const pending = store.db.prepare(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < @count),
          s(i, t) AS (SELECT i, @start + i / 1000.0 FROM n)
     INSERT INTO tasks (task_type, params, scheduled_for, backoff, created_at, updated_at)
     SELECT 'bench', json_object('n', i), ${iso("t")}, @backoff, ${iso("t")}, ${iso("t")}
     FROM s`,
  );
  const delayed = store.db.prepare(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < @count)
     INSERT INTO tasks (task_type, params, scheduled_for, backoff, created_at, updated_at)
     SELECT 'bench', json_object('n', i), ${iso("@start + 86400")}, @backoff, ${iso("@start")}, ${iso("@start")}
     FROM n`,
  );
  store.db.transaction(() => {
    // The recursive CTE always yields its first row, so an empty history must skip the insert.
    if (history > 0) completed.run({ ...params, count: history });
    pending.run({ ...params, count: backlog });
    if (config.delayed > 0) delayed.run({ ...params, count: config.delayed });
  })();
  // No ANALYZE here, unlike PostgreSQL: nothing runs it on a real SQLite database (there is no
  // autovacuum), so the planner should see what users' files give it.
}

function toResult(store: StoreName, rows: number, backlog: number, claimers: number, expected: number, samples: ClaimerSamples[], seconds: number): Result {
  const cycles = samples.reduce((sum, s) => sum + s.cycles, 0);
  if (cycles !== expected) log(`warning: ${store} ${claimers} claimers completed ${cycles} cycles, expected ${expected}`);
  return {
    store,
    rows,
    backlog,
    claimers,
    cycles,
    seconds,
    cyclesPerSecond: cycles / seconds,
    retries: samples.reduce((sum, s) => sum + s.retries, 0),
    claimMs: summarize(samples.flatMap((s) => s.claimMs)),
    completeMs: summarize(samples.flatMap((s) => s.completeMs)),
  };
}

const describe = (r: Result) =>
  `${r.claimers} claimers: ${Math.round(r.cyclesPerSecond)} cycles/s, claim p50 ${r.claimMs.p50.toFixed(2)} p95 ${r.claimMs.p95.toFixed(2)} p99 ${r.claimMs.p99.toFixed(2)} ms`;

/** The server's batchers over a checked store, answering as the store would (what `taskpool serve` builds). */
function sharedPath(store: PostgresStore): ClaimPath {
  const checked = new CheckedStore(store);
  const claims = new ClaimBatcher(checked);
  const writes = new WriteBatcher(checked, { returnTasks: true });
  return {
    claim: (options) => claims.claim(options),
    complete: async (id, { workerId, leaseToken }) => ({ task: (await writes.complete({ id, lease: { workerId, leaseToken } })).task as Task, followUps: [] }),
  };
}

async function benchPostgres(name: "postgres" | "postgres-shared", size: number, signal: AbortSignal): Promise<Result[]> {
  const { history, backlog, cyclesFor } = plan(name, size);
  const counts = config.claimers[name];
  const schema = `tp_bench_${suffix()}`;
  // One connection per claimer: a claimer waiting for a pooled connection would time the wait as
  // claim latency. The store's own pool, as the bench's raw store, so its size can be chosen.
  const store = new PostgresStore({ url: PG_URL, schema, poolSize: max(counts) });
  try {
    await store.migrate();
    log(`${name} ${size} rows: seeding ${history} completed + ${backlog} pending + ${config.delayed} not yet due into schema ${schema}`);
    const t0 = performance.now();
    await seedPostgres(store.pool, history, backlog);
    // Fresh statistics and visibility map, as autovacuum would have left a table that grew to this size.
    await store.pool.query("VACUUM (ANALYZE) tasks");
    log(`  seeded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    // Open every claimer's connection now, so connection set-up is not timed as a claim.
    const clients = await Promise.all(range(max(counts)).map(() => store.pool.connect()));
    for (const client of clients) client.release();
    const path = name === "postgres" ? store : sharedPath(store);
    await Promise.all(range(max(counts)).map((i) => claimCycles(path, `bench-pg-${i}`, { signal, budget: { left: WARMUP_PER_CLAIMER } })));

    const results: Result[] = [];
    let left = backlog - max(counts) * WARMUP_PER_CLAIMER;
    for (const claimers of counts) {
      signal.throwIfAborted();
      await store.pool.query("VACUUM (ANALYZE) tasks");
      const budget = { left: cyclesFor(claimers) };
      const started = performance.now();
      const samples = await Promise.all(range(claimers).map((i) => claimCycles(path, `bench-pg-${i}`, { signal, budget })));
      const seconds = (performance.now() - started) / 1000;
      // An interrupted configuration's numbers cover part of it and would not compare with full ones.
      signal.throwIfAborted();
      const result = toResult(name, size, left, claimers, cyclesFor(claimers), samples, seconds);
      left -= result.cycles;
      log(`  ${describe(result)}`);
      results.push(result);
    }
    return results;
  } finally {
    // Close first: a claimer session still holding row locks would make DROP SCHEMA wait.
    await store.close().catch(() => {});
    await dropSchema(schema).catch((error) => log(`could not drop schema ${schema}: ${error}`));
  }
}

/** The child's first message of `type`; rejects if the child goes away before sending it. */
function nextMessage<T extends ClaimerMessage["type"]>(child: ChildProcess, type: T): Promise<Extract<ClaimerMessage, { type: T }>> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: ClaimerMessage) => {
      if (message.type !== type) return;
      stop();
      resolve(message as Extract<ClaimerMessage, { type: T }>);
    };
    // "close", not "exit": it waits for the IPC channel to close, so a message sent just before a
    // clean exit has been delivered by then.
    const onClose = (code: number | null, signal: NodeJS.Signals | null) => {
      stop();
      reject(new Error(`SQLite claimer ${child.pid} ended (${signal ?? `exit code ${code}`}) before sending "${type}"`));
    };
    const stop = () => {
      child.off("message", onMessage);
      child.off("close", onClose);
    };
    child.on("message", onMessage);
    child.on("close", onClose);
  });
}

/** `claimers` processes on the file, each with its share of the configuration's cycles. */
async function runSqliteClaimers(path: string, claimers: number, cycles: number, signal: AbortSignal): Promise<{ samples: ClaimerSamples[]; seconds: number }> {
  const children: ChildProcess[] = [];
  try {
    for (const i of range(claimers)) {
      // Explicit execArgv: the children need tsx's loader for .ts files, whatever this process was started with.
      const argv = [path, `bench-sqlite-${i}`, String(cycles / claimers), String(WARMUP_PER_CLAIMER)];
      children.push(fork(CLAIMER_SCRIPT, argv, { execArgv: ["--import", "tsx"] }));
    }
    await Promise.all(children.map((child) => nextMessage(child, "ready")));
    signal.throwIfAborted();
    const done = children.map((child) => nextMessage(child, "done"));
    const started = performance.now();
    for (const child of children) child.send({ type: "go" });
    const samples = (await Promise.all(done)).map((message) => message.samples);
    return { samples, seconds: (performance.now() - started) / 1000 };
  } finally {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill();
  }
}

async function benchSqlite(size: number, signal: AbortSignal): Promise<Result[]> {
  const { history, backlog, cyclesFor } = plan("sqlite", size);
  const path = join(tmpdir(), `taskpool-bench-${suffix()}.db`);
  try {
    const store = await openStore(`sqlite:${path}`);
    try {
      if (!(store instanceof SqliteStore)) throw new Error("openStore(sqlite:…) did not return a SqliteStore");
      log(`sqlite ${size} rows: seeding ${history} completed + ${backlog} pending + ${config.delayed} not yet due into ${path}`);
      const t0 = performance.now();
      seedSqlite(store, history, backlog);
      log(`  seeded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    } finally {
      await store.close();
    }
    const results: Result[] = [];
    let left = backlog;
    for (const claimers of config.claimers.sqlite) {
      signal.throwIfAborted();
      left -= claimers * WARMUP_PER_CLAIMER;
      const { samples, seconds } = await runSqliteClaimers(path, claimers, cyclesFor(claimers), signal);
      signal.throwIfAborted();
      const result = toResult("sqlite", size, left, claimers, cyclesFor(claimers), samples, seconds);
      left -= result.cycles;
      log(`  ${describe(result)}`);
      results.push(result);
    }
    return results;
  } finally {
    removeSqliteFiles(path);
  }
}

/** A table of one figure: a row per size, a column per claimer count, and the largest size over the smallest. */
function matrix(results: Result[], store: StoreName, figure: (r: Result) => number): string {
  const counts = config.claimers[store];
  const at = (rows: number, claimers: number) => results.find((r) => r.store === store && r.rows === rows && r.claimers === claimers);
  const cell = (r: Result | undefined): Cell => (r === undefined ? "-" : figure(r));
  const body: Cell[][] = config.sizes.map((rows) => [rows.toLocaleString("en-US"), ...counts.map((k) => cell(at(rows, k)))]);
  const [smallest, largest] = [config.sizes[0], config.sizes[config.sizes.length - 1]];
  if (config.sizes.length > 1) {
    body.push([
      `${largest} ÷ ${smallest}`,
      ...counts.map((k) => {
        const [a, b] = [at(largest, k), at(smallest, k)];
        return a && b ? figure(a) / figure(b) : "-";
      }),
    ]);
  }
  return formatTable(["rows \\ claimers", ...counts.map(String)], body);
}

function report(results: Result[], server: PostgresServer | null, machine: MachineState): void {
  const stores = config.stores.filter((s) => results.some((r) => r.store === s));
  const lines = [
    `taskpool claim bench: claim(limit 1) → complete() cycles by concurrent claimers and table size; ${config.cycles} cycles per configuration` +
      (config.delayed > 0 ? `; ${config.delayed} more pending tasks not yet due, ahead of the backlog in the claim order` : ""),
    `node ${process.version}, ${availableParallelism()} CPUs (${describeMachine(machine)})` +
      (server ? `; PostgreSQL ${server.version}, synchronous_commit=${server.synchronousCommit}` : ""),
    "",
    formatTable(
      ["store", "rows", "backlog", "claimers", "cycles", "seconds", "cycles/s", "retries", "claim p50", "p95", "p99", "complete p50", "p95", "p99"],
      results.map((r) => [
        r.store,
        r.rows,
        r.backlog,
        r.claimers,
        r.cycles,
        r.seconds,
        r.cyclesPerSecond,
        r.retries,
        r.claimMs.p50,
        r.claimMs.p95,
        r.claimMs.p99,
        r.completeMs.p50,
        r.completeMs.p95,
        r.completeMs.p99,
      ]),
    ),
    "(latencies in ms, retries included; rows = tasks in the table, backlog = pending ones when the configuration started;",
    " cycles/s = claim + complete cycles over the configuration, all claimers together;",
    " retries = calls that hit SQLITE_BUSY after the store's 5 s busy_timeout and were tried again)",
    // p99 hides the rare multi-second stall; the slowest call is worth one line.
    "slowest claim: " + stores.map((s) => `${s} ${max(results.filter((r) => r.store === s).map((r) => r.claimMs.max)).toFixed(1)} ms`).join(", "),
    ...stores.flatMap((s) => ["", `${s}: claim p95 (ms)`, matrix(results, s, (r) => r.claimMs.p95), "", `${s}: cycles/s`, matrix(results, s, (r) => r.cyclesPerSecond)]),
    "",
  ];
  const roundAll = (p: Percentiles): Percentiles => ({ count: p.count, p50: round(p.p50), p95: round(p.p95), p99: round(p.p99), max: round(p.max) });
  const json = {
    bench: "claim",
    date: new Date().toISOString(),
    node: process.version,
    cpus: availableParallelism(),
    machine,
    postgres: server,
    sizes: config.sizes,
    claimers: config.claimers,
    cycles: config.cycles,
    results: results.map((r) => ({
      ...r,
      seconds: round(r.seconds),
      cyclesPerSecond: round(r.cyclesPerSecond, 1),
      claimMs: roundAll(r.claimMs),
      completeMs: roundAll(r.completeMs),
    })),
  };
  console.log(lines.join("\n"));
  console.log(JSON.stringify(json));
}

const abort = new AbortController();
onInterrupt(() => abort.abort(new Error("interrupted")));

async function main(): Promise<void> {
  // Refuse a size that cannot hold its backlog before seeding anything.
  for (const store of config.stores) for (const size of config.sizes) plan(store, size);

  const machine = machineState();
  let server: PostgresServer | null = null;
  if (config.stores.some((s) => s !== "sqlite")) {
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    server = await postgresServer(admin).finally(() => admin.end().catch(() => {}));
  }
  const results: Result[] = [];
  // Size by size, so the two PostgreSQL paths run side by side.
  for (const size of config.sizes) {
    for (const store of config.stores) {
      results.push(...(store === "sqlite" ? await benchSqlite(size, abort.signal) : await benchPostgres(store, size, abort.signal)));
    }
  }
  report(results, server, machine);
}

main().catch((error) => {
  // An interrupt surfaces as whichever abort error the bench was waiting in; the cause is known.
  if (abort.signal.aborted) log("interrupted");
  else console.error(error);
  process.exitCode = 1;
});
