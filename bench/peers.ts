/**
 * taskpool side by side with its PostgreSQL peers, pg-boss and graphile-worker, on one scenario:
 * enqueue BENCH_JOBS no-op jobs (batches of BENCH_BATCH), then start ONE worker runtime with
 * concurrency 8 and a handler that returns at once, and time until every job is completed.
 *
 *   npm run bench:peers
 *   BENCH_JOBS=1000 BENCH_RUNS=3 BENCH_BATCH=1000 BENCH_SYSTEMS=taskpool,graphile-worker npm run bench:peers
 *
 * All systems use the same PostgreSQL server, each run in a fresh schema that is dropped afterwards
 * (also on error and Ctrl-C). Systems run one after another, never at once, and each round starts
 * with the next system so none always runs first on a cold server. Everything runs in this process:
 * the enqueuer, the worker runtime and the completion poller (one count query every POLL_MS).
 * Progress goes to stderr; the table of medians and a JSON line go to stdout.
 *
 * Why BENCH_JOBS defaults to 1,000 and not 10,000: pg-boss's worker sleeps for its polling interval
 * (at least 0.5 s) after every fetch, found or not, so it completes at most batchSize jobs per 0.5 s
 * — 16 jobs/s at 8 — and 10,000 jobs would take ten minutes per run.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { Logger as GraphileLogger, makeWorkerUtils, run as runGraphile, type Runner, type WorkerUtils } from "graphile-worker";
import pg from "pg";
import PgBoss from "pg-boss";
import { pino } from "pino";
import { connect, type Taskpool } from "../src/api/taskpool.js";
import { VERSION } from "../src/version.js";
import type { Worker } from "../src/worker/worker.js";
import { envInt, envList } from "./lib/env.js";
import { round } from "./lib/stats.js";
import { formatTable } from "./lib/table.js";
import { PG_URL, postgresServer } from "./lib/database.js";

const SYSTEMS = ["taskpool", "pg-boss", "graphile-worker"] as const;
type SystemName = (typeof SYSTEMS)[number];

const CONCURRENCY = 8;
const QUEUE = "noop";
/** How often the completion poller counts; the drain time is exact to about this. */
const POLL_MS = 25;
/** A drain whose remaining count has not moved for this long is stuck (a failing job, a dead runtime). */
const STALL_MS = 30_000;
const config = {
  jobs: envInt("BENCH_JOBS", 1000),
  batch: envInt("BENCH_BATCH", 1000),
  runs: envInt("BENCH_RUNS", 3),
  systems: envList<SystemName>("BENCH_SYSTEMS", SYSTEMS, SYSTEMS),
};

/** One system in one fresh schema, for one run. */
interface Contender {
  /** Connects and creates the schema: not timed. */
  setup(): Promise<void>;
  /** Enqueues `count` jobs with the system's batch call (one INSERT of all of them on every system). */
  enqueue(count: number): Promise<void>;
  /** Starts the worker runtime; resolves when the system's own start call does. */
  start(): Promise<void>;
  /** Jobs not completed successfully yet, read from the database. */
  remaining(): Promise<number>;
  /** Stops the runtime and closes every connection; safe after a failed or partial setup. */
  close(): Promise<void>;
}

/** What each system is told, beyond connection and schema; printed with the results. */
const SETTINGS: Record<SystemName, string> = {
  taskpool: `concurrency ${CONCURRENCY}, pollIntervalMs 1000, other worker options default (heartbeat thread on)`,
  "pg-boss": `one work() with batchSize ${CONCURRENCY}, pollingIntervalSeconds 0.5 (its minimum); constructor defaults`,
  "graphile-worker": `concurrency ${CONCURRENCY}, pollInterval 1000; other options default`,
};

function taskpool(schema: string): Contender {
  let pool: Taskpool | undefined;
  let worker: Worker | undefined;
  return {
    async setup() {
      pool = await connect(PG_URL, { schema });
    },
    async enqueue(count) {
      // One INSERT for the whole batch.
      await pool!.enqueueMany(Array.from({ length: count }, () => ({ taskType: QUEUE, params: {} })));
    },
    async start() {
      worker = pool!.worker({
        roles: [QUEUE],
        concurrency: CONCURRENCY,
        handlers: { [QUEUE]: async () => {} },
        pollIntervalMs: 1000,
        handleSignals: false, // this bench handles Ctrl-C, so it can drop the schema
        logger: pino({ level: "silent" }), // the default logs a line per claim and per completion
      });
      await worker.start();
    },
    async remaining() {
      const { byStatus } = await pool!.counts();
      const total = Object.values(byStatus).reduce((sum, n) => sum + n, 0);
      return total - byStatus.completed;
    },
    async close() {
      await worker?.stop();
      await pool?.close();
    },
  };
}

function pgBoss(schema: string): Contender {
  let boss: PgBoss | undefined;
  return {
    async setup() {
      boss = new PgBoss({ connectionString: PG_URL, schema });
      // An EventEmitter without an "error" listener would throw these out of the process.
      boss.on("error", (error) => log(`pg-boss error: ${error.message}`));
      await boss.start();
      await boss.createQueue(QUEUE);
    },
    async enqueue(count) {
      await boss!.insert(Array.from({ length: count }, () => ({ name: QUEUE, data: {} })));
    },
    async start() {
      // pg-boss 10 has no concurrency option: one work() fetches up to batchSize jobs, hands them to
      // the handler as one array and completes them together, then sleeps out the polling interval.
      // Calling work() 8 times with batchSize 1 gives the same rate (8 loops of 1 job per 0.5 s).
      await boss!.work(QUEUE, { batchSize: CONCURRENCY, pollingIntervalSeconds: 0.5 }, async () => {});
    },
    async remaining() {
      // SQL rather than getQueueSize(): that counts only states before its `before`, and a failed
      // job (a state after completed) must count as not done.
      const { rows } = await boss!.getDb().executeSql(`SELECT count(*)::int AS n FROM "${schema}".job WHERE name = $1 AND state <> 'completed'`, [QUEUE]);
      return rows[0].n as number;
    },
    async close() {
      // graceful: wait for the work loop to stop; close: end its connection pool.
      await boss?.stop({ graceful: true, wait: true, close: true, timeout: 5000 });
    },
  };
}

function graphileWorker(schema: string): Contender {
  const logger = new GraphileLogger(() => () => {}); // its default logs to the console
  let utils: WorkerUtils | undefined;
  let runner: Runner | undefined;
  return {
    async setup() {
      utils = await makeWorkerUtils({ connectionString: PG_URL, schema, logger });
      // Migrate now, so the first run() does not install the schema on the drain's clock.
      await utils.migrate();
    },
    async enqueue(count) {
      await utils!.addJobs(Array.from({ length: count }, () => ({ identifier: QUEUE, payload: {} })));
    },
    async start() {
      runner = await runGraphile({
        connectionString: PG_URL,
        schema,
        logger,
        concurrency: CONCURRENCY,
        pollInterval: 1000,
        noHandleSignals: true, // as for taskpool: this bench owns Ctrl-C
        taskList: { [QUEUE]: async () => {} },
      });
    },
    async remaining() {
      // graphile-worker deletes a job when it completes; a failed one stays, with its error.
      const { rows } = await utils!.withPgClient((client) => client.query(`SELECT count(*)::int AS n FROM "${schema}"._private_jobs`));
      return rows[0].n as number;
    },
    async close() {
      await runner?.stop();
      await utils?.release();
    },
  };
}

const CONTENDERS: Record<SystemName, (schema: string) => Contender> = { taskpool, "pg-boss": pgBoss, "graphile-worker": graphileWorker };

interface RunResult {
  enqueueSeconds: number;
  /** How long the start call took to resolve (inside drainSeconds). */
  startSeconds: number;
  drainSeconds: number;
}

const log = (message: string) => console.error(`[bench:peers] ${message}`);
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** Polls until no job is left; throws when the count stops moving or the run is aborted. */
async function waitDrained(contender: Contender, signal: AbortSignal): Promise<void> {
  let last = Number.NaN;
  let lastMove = performance.now();
  for (;;) {
    const left = await contender.remaining();
    if (left === 0) return;
    if (left !== last) {
      last = left;
      lastMove = performance.now();
    } else if (performance.now() - lastMove > STALL_MS) throw new Error(`stuck: ${left} jobs not completed for ${STALL_MS / 1000} s`);
    await sleep(POLL_MS, undefined, { signal });
  }
}

async function benchOnce(name: SystemName, admin: pg.Client, signal: AbortSignal): Promise<RunResult> {
  const schema = `bench_peers_${name.replaceAll("-", "_")}_${randomBytes(4).toString("hex")}`;
  const contender = CONTENDERS[name](schema);
  try {
    await contender.setup();
    signal.throwIfAborted();

    const t0 = performance.now();
    for (let done = 0; done < config.jobs; done += config.batch) await contender.enqueue(Math.min(config.batch, config.jobs - done));
    const t1 = performance.now();
    if ((await contender.remaining()) !== config.jobs) throw new Error(`${name}: expected ${config.jobs} jobs after enqueue`);
    signal.throwIfAborted();

    const t2 = performance.now();
    await contender.start();
    const t3 = performance.now();
    await waitDrained(contender, signal);
    const t4 = performance.now();
    return { enqueueSeconds: (t1 - t0) / 1000, startSeconds: (t3 - t2) / 1000, drainSeconds: (t4 - t2) / 1000 };
  } finally {
    // Close first: a session still holding row locks or LISTENing would make DROP SCHEMA wait.
    await contender.close().catch((error) => log(`${name}: close failed: ${error}`));
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch((error) => log(`could not drop schema ${schema}: ${error}`));
  }
}

/** Installed versions, read from the packages themselves (the lock file may be ahead of node_modules). */
function versionOf(name: SystemName): string {
  if (name === "taskpool") return VERSION;
  const file = new URL(`../node_modules/${name}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
}

const abort = new AbortController();
// Without a handler Ctrl-C ends the process on the spot, skipping the finally that drops the schema;
// a second Ctrl-C still kills it outright.
process.once("SIGINT", () => abort.abort(new Error("interrupted")));

async function main(): Promise<void> {
  // A session of its own for server settings and dropping schemas, so a drop still works when a
  // system failed to open its connections.
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  const runs = new Map<SystemName, RunResult[]>(config.systems.map((s) => [s, []]));
  let server: { version: string; synchronousCommit: string };
  try {
    server = await postgresServer(admin);
    for (let pass = 0; pass < config.runs; pass++) {
      const order = config.systems.map((_, i) => config.systems[(i + pass) % config.systems.length]);
      for (const name of order) {
        log(`run ${pass + 1}/${config.runs}: ${name}, ${config.jobs} jobs`);
        const result = await benchOnce(name, admin, abort.signal);
        log(`  enqueue ${result.enqueueSeconds.toFixed(3)} s, start ${result.startSeconds.toFixed(3)} s, drain ${result.drainSeconds.toFixed(3)} s`);
        runs.get(name)!.push(result);
      }
    }
  } finally {
    await admin.end().catch(() => {});
  }
  report(runs, server);
}

function report(runs: Map<SystemName, RunResult[]>, server: { version: string; synchronousCommit: string }): void {
  const summary = [...runs].map(([name, results]) => {
    const enqueueSeconds = median(results.map((r) => r.enqueueSeconds));
    const drainSeconds = median(results.map((r) => r.drainSeconds));
    return {
      name,
      version: versionOf(name),
      enqueueSeconds,
      enqueuePerSecond: config.jobs / enqueueSeconds,
      startSeconds: median(results.map((r) => r.startSeconds)),
      drainSeconds,
      drainPerSecond: config.jobs / drainSeconds,
    };
  });
  // Ratios > 1 mean faster than taskpool; without taskpool in BENCH_SYSTEMS there is no baseline.
  const base = summary.find((s) => s.name === "taskpool");
  const ratio = (value: number, of: number | undefined) => (of === undefined ? null : value / of);
  const rows = summary.map((s) => ({
    ...s,
    enqueueRatio: ratio(s.enqueuePerSecond, base?.enqueuePerSecond),
    drainRatio: ratio(s.drainPerSecond, base?.drainPerSecond),
  }));

  const lines = [
    `peers bench: ${config.jobs} no-op jobs enqueued in batches of ${config.batch}, then one worker runtime with ` +
      `concurrency ${CONCURRENCY} drains them; median of ${config.runs} runs per system`,
    `node ${process.version}, ${availableParallelism()} CPUs; PostgreSQL ${server.version}, synchronous_commit=${server.synchronousCommit}`,
    "",
    formatTable(
      ["system", "version", "enqueue s", "enqueue jobs/s", "× taskpool", "start s", "drain s", "drain jobs/s", "× taskpool"],
      rows.map((r) => [r.name, r.version, r.enqueueSeconds, r.enqueuePerSecond, r.enqueueRatio ?? "-", r.startSeconds, r.drainSeconds, r.drainPerSecond, r.drainRatio ?? "-"]),
    ),
    "(drain = from the start call until the last job is completed, start-up included; start s = until the start call resolved;",
    ` × taskpool = jobs/s over taskpool's, > 1 is faster; completion polled every ${POLL_MS} ms)`,
    ...config.systems.map((name) => `${name}: ${SETTINGS[name]}`),
    "",
  ];
  const json = {
    bench: "peers",
    date: new Date().toISOString(),
    node: process.version,
    cpus: availableParallelism(),
    postgres: server,
    jobs: config.jobs,
    batch: config.batch,
    concurrency: CONCURRENCY,
    runs: config.runs,
    systems: rows.map((r) => ({
      name: r.name,
      version: r.version,
      settings: SETTINGS[r.name],
      median: {
        enqueueSeconds: round(r.enqueueSeconds),
        enqueuePerSecond: round(r.enqueuePerSecond, 1),
        startSeconds: round(r.startSeconds),
        drainSeconds: round(r.drainSeconds),
        drainPerSecond: round(r.drainPerSecond, 1),
        enqueueRatio: r.enqueueRatio === null ? null : round(r.enqueueRatio),
        drainRatio: r.drainRatio === null ? null : round(r.drainRatio),
      },
      runs: runs.get(r.name)!.map((x) => ({ enqueueSeconds: round(x.enqueueSeconds), startSeconds: round(x.startSeconds), drainSeconds: round(x.drainSeconds) })),
    })),
  };
  console.log(lines.join("\n"));
  console.log(JSON.stringify(json));
}

main().catch((error) => {
  // An interrupt surfaces as whichever abort error the bench was waiting in; the cause is known.
  if (abort.signal.aborted) log("interrupted");
  else console.error(error);
  process.exitCode = 1;
});
