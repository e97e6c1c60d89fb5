/**
 * Claim/complete latency and throughput of both stores under concurrent claimers, on a table that
 * carries history: BENCH_COMPLETED finished rows next to BENCH_PENDING pending ones, so an index or
 * plan that degrades with history shows up here.
 *
 *   npm run bench:claim
 *   BENCH_PENDING=10000 BENCH_COMPLETED=100000 BENCH_CLAIMERS=8 BENCH_STORES=postgres,sqlite npm run bench:claim
 *
 * Each claimer loops claim({ limit: 1 }) -> complete() until the pending set is drained. Progress goes
 * to stderr; the table and a JSON line (for pasting into notes) go to stdout.
 */
import { type ChildProcess, fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { DEFAULT_BACKOFF } from "../src/core/task.js";
import { openStore } from "../src/store/open-store.js";
import { PostgresStore } from "../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../src/store/sqlite/sqlite-store.js";
import type { Store } from "../src/store/store.js";
import type { ClaimerMessage } from "./claim-sqlite-claimer.js";
import { claimUntilDrained, type ClaimerSamples } from "./lib/claim-loop.js";
import { envInt, envList } from "./lib/env.js";
import { type Percentiles, round, summarize } from "./lib/stats.js";
import { formatTable } from "./lib/table.js";
import { dropSchema, PG_URL, postgresServer, removeSqliteFiles } from "./lib/database.js";

type StoreName = "postgres" | "sqlite";

const config = {
  completed: envInt("BENCH_COMPLETED", 100_000, 0),
  pending: envInt("BENCH_PENDING", 10_000),
  claimers: envInt("BENCH_CLAIMERS", 8),
  stores: envList<StoreName>("BENCH_STORES", ["postgres", "sqlite"], ["postgres", "sqlite"]),
};
const BACKOFF = JSON.stringify(DEFAULT_BACKOFF);
const CLAIMER_SCRIPT = fileURLToPath(new URL("./claim-sqlite-claimer.ts", import.meta.url));

interface StoreResult {
  store: StoreName;
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

/**
 * Where the pending backlog starts. Seeds are stamped relative to the bench's clock (the stores use
 * the system clock too) and all lie in the past, so every pending row is claimable at once: history
 * 1 s apart before this instant, then the backlog 1 ms apart, so the claim order (priority,
 * created_at, id) is the insertion order.
 */
const pendingStart = () => new Date(Date.now() - 60_000 - config.pending);

async function seedPostgres(pool: pg.Pool): Promise<void> {
  const start = pendingStart();
  await pool.query(
    `INSERT INTO tasks (task_type, params, status, scheduled_for, attempts, max_attempts, backoff, worker_id, lease_token,
                        lease_seconds, claimed_at, started_at, completed_at, last_heartbeat_at, result, created_at, updated_at)
     SELECT 'bench', jsonb_build_object('n', i), 'completed', t, 1, 3, $3::jsonb, 'seed', gen_random_uuid()::text,
            120, t, t, t + interval '1 second', t, '{"ok":true}', t, t + interval '1 second'
     FROM generate_series(1, $1::int) AS i,
          LATERAL (SELECT $2::timestamptz - ($1::int + 1 - i) * interval '1 second' AS t) AS s`,
    [config.completed, start, BACKOFF],
  );
  await pool.query(
    `INSERT INTO tasks (task_type, params, scheduled_for, backoff, created_at, updated_at)
     SELECT 'bench', jsonb_build_object('n', i), t, $3::jsonb, t, t
     FROM generate_series(1, $1::int) AS i,
          LATERAL (SELECT $2::timestamptz + i * interval '1 millisecond' AS t) AS s`,
    [config.pending, start, BACKOFF],
  );
  // Fresh statistics, as autovacuum would have gathered on a table that grew to this size in production.
  await pool.query("ANALYZE tasks");
}

function seedSqlite(store: SqliteStore): void {
  const iso = (expr: string) => `strftime('%Y-%m-%dT%H:%M:%fZ', ${expr}, 'unixepoch')`;
  const params = { start: pendingStart().getTime() / 1000, backoff: BACKOFF };
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
  store.db.transaction(() => {
    // The recursive CTE always yields its first row, so an empty history must skip the insert.
    if (config.completed > 0) completed.run({ ...params, count: config.completed });
    pending.run({ ...params, count: config.pending });
  })();
  // No ANALYZE here, unlike PostgreSQL: nothing runs it on a real SQLite database (there is no
  // autovacuum), so the planner should see what users' files give it.
}

function toResult(store: StoreName, samples: ClaimerSamples[], seconds: number): StoreResult {
  const cycles = samples.reduce((sum, s) => sum + s.cycles, 0);
  if (cycles !== config.pending) log(`warning: ${store} completed ${cycles} cycles, expected ${config.pending}`);
  return {
    store,
    cycles,
    seconds,
    cyclesPerSecond: cycles / seconds,
    retries: samples.reduce((sum, s) => sum + s.retries, 0),
    claimMs: summarize(samples.flatMap((s) => s.claimMs)),
    completeMs: summarize(samples.flatMap((s) => s.completeMs)),
  };
}

async function benchPostgres(signal: AbortSignal): Promise<{ result: StoreResult; server: PostgresServer }> {
  const schema = `tp_bench_${suffix()}`;
  // A separate session for set-up and teardown: it reads the server's own settings (the store's
  // sessions carry a search_path) and can still drop the schema when the store failed to open.
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  let opened: Store | undefined;
  try {
    const server: PostgresServer = await postgresServer(admin);
    opened = await openStore(PG_URL, { schema });
    if (!(opened instanceof PostgresStore)) throw new Error(`openStore(${PG_URL}) did not return a PostgresStore`);
    const store = opened;
    // Claimers waiting for a pooled connection would time the wait as claim latency.
    if (store.pool.options.max < config.claimers) {
      throw new Error(`BENCH_CLAIMERS=${config.claimers} exceeds the store's pool of ${store.pool.options.max} connections`);
    }

    log(`postgres: seeding ${config.completed} completed + ${config.pending} pending rows into schema ${schema}`);
    await seedPostgres(store.pool);
    // Open every claimer's connection now, so connection set-up is not timed as a claim.
    const clients = await Promise.all(range(config.claimers).map(() => store.pool.connect()));
    for (const client of clients) client.release();
    signal.throwIfAborted();

    log(`postgres: running ${config.claimers} claimers`);
    const started = performance.now();
    const samples = await Promise.all(range(config.claimers).map((i) => claimUntilDrained(store, `bench-pg-${i}`, { signal })));
    const seconds = (performance.now() - started) / 1000;
    // An interrupted run's numbers cover a partial drain and would not compare with full runs.
    signal.throwIfAborted();
    return { result: toResult("postgres", samples, seconds), server };
  } finally {
    // Close first: a claimer session still holding row locks would make DROP SCHEMA wait.
    await opened?.close().catch(() => {});
    await admin.end().catch(() => {});
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

async function benchSqlite(signal: AbortSignal): Promise<StoreResult> {
  const path = join(tmpdir(), `taskpool-bench-${suffix()}.db`);
  const children: ChildProcess[] = [];
  try {
    const store = await openStore(`sqlite:${path}`);
    try {
      if (!(store instanceof SqliteStore)) throw new Error("openStore(sqlite:…) did not return a SqliteStore");
      log(`sqlite: seeding ${config.completed} completed + ${config.pending} pending rows into ${path}`);
      seedSqlite(store);
    } finally {
      await store.close();
    }

    log(`sqlite: starting ${config.claimers} claimer processes`);
    for (const i of range(config.claimers)) {
      // Explicit execArgv: the children need tsx's loader for .ts files, whatever this process was started with.
      children.push(fork(CLAIMER_SCRIPT, [path, `bench-sqlite-${i}`], { execArgv: ["--import", "tsx"] }));
    }
    await Promise.all(children.map((child) => nextMessage(child, "ready")));
    signal.throwIfAborted();

    log(`sqlite: running ${config.claimers} claimers`);
    const done = children.map((child) => nextMessage(child, "done"));
    const started = performance.now();
    for (const child of children) child.send({ type: "go" });
    const samples = (await Promise.all(done)).map((message) => message.samples);
    const seconds = (performance.now() - started) / 1000;
    signal.throwIfAborted();
    return toResult("sqlite", samples, seconds);
  } finally {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill();
    removeSqliteFiles(path);
  }
}

function report(results: StoreResult[], server: PostgresServer | null): void {
  const lines = [
    `taskpool claim bench: ${config.completed} completed + ${config.pending} pending rows seeded per store, ` +
      `${config.claimers} concurrent claimers (claim limit 1, then complete), drained to empty`,
    `node ${process.version}, ${availableParallelism()} CPUs` +
      (server ? `; PostgreSQL ${server.version}, synchronous_commit=${server.synchronousCommit}` : ""),
    "",
    formatTable(
      ["store", "cycles", "seconds", "cycles/s", "retries", "claim p50", "p95", "p99", "complete p50", "p95", "p99"],
      results.map((r) => [
        r.store,
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
    "(latencies in ms, retries included; cycles/s = claim + complete cycles over the whole run, all claimers together;",
    " retries = calls that hit SQLITE_BUSY after the store's 5 s busy_timeout and were tried again)",
    // p99 hides the rare multi-second stall; the slowest call is worth one line.
    "slowest: " + results.map((r) => `${r.store} claim ${r.claimMs.max.toFixed(1)} ms, complete ${r.completeMs.max.toFixed(1)} ms`).join("; "),
    "",
  ];
  const roundAll = (p: Percentiles): Percentiles => ({ count: p.count, p50: round(p.p50), p95: round(p.p95), p99: round(p.p99), max: round(p.max) });
  const json = {
    bench: "claim",
    date: new Date().toISOString(),
    node: process.version,
    cpus: availableParallelism(),
    completed: config.completed,
    pending: config.pending,
    claimers: config.claimers,
    postgres: server,
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

async function main(): Promise<void> {
  const abort = new AbortController();
  // Without a handler Ctrl-C ends the process on the spot, skipping the finally blocks that drop the
  // schema and delete the temp file; a second Ctrl-C still kills it outright.
  process.once("SIGINT", () => abort.abort(new Error("interrupted")));

  const results: StoreResult[] = [];
  let server: PostgresServer | null = null;
  for (const store of config.stores) {
    if (store === "postgres") {
      const pg = await benchPostgres(abort.signal);
      results.push(pg.result);
      server = pg.server;
    } else {
      results.push(await benchSqlite(abort.signal));
    }
  }
  report(results, server);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
