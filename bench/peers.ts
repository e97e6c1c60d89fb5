/**
 * taskpool side by side with its peers, on one machine, in one run:
 *
 *   npm run bench:peers
 *   BENCH_JOBS=2000 BENCH_RUNS=1 BENCH_LATENCY_SECONDS=2 BENCH_SYSTEMS=taskpool-postgres,graphile-worker-batched npm run bench:peers
 *
 * Systems (BENCH_SYSTEMS, default all): taskpool on PostgreSQL and on SQLite, graphile-worker with its
 * defaults and with its Performance page's batched settings, pg-boss, and BullMQ on the local Redis.
 * Each run of a system gets a fresh namespace (schema, SQLite file or Redis queue), deleted afterwards,
 * also on error and Ctrl-C. The worker runtime runs alone in a child process (peers/worker-process.ts)
 * with concurrency 10; this process enqueues and watches. Each run measures:
 *
 *   drain     BENCH_JOBS no-op tasks (100-byte payload) enqueued in batches of BENCH_BATCH first; then
 *             tasks/s from the moment the worker's start call resolved until the store shows every
 *             task completed (tasks whose handler started during the start call are left out).
 *   CPU       the worker process's CPU time (user + system, all threads) over that drain, per 1,000
 *             tasks, from process.cpuUsage() in the child.
 *   DB CPU    the database server's CPU time (all PostgreSQL processes, or Redis for BullMQ, from
 *             /proc) over the start call and the drain, per 1,000 tasks: where the rest of the cost goes.
 *   latency   enqueue call → handler start, with tasks sent open-loop one by one (each send at its
 *             scheduled time, never waiting for the previous one) at 500 tasks/s, then at 100 tasks/s,
 *             BENCH_LATENCY_SECONDS each (0 skips both); p95 at 500/s and p99 at 100/s are the figures.
 *   dispatch  enqueue committed (the enqueue call resolved) → handler start, p50, at both rates.
 *
 * Start-up is reported apart (startSeconds, startCpuMs in the JSON) and kept out of drain and CPU:
 * run from TypeScript sources, taskpool's start spawns its heartbeat thread through tsx's loader,
 * ~0.4 s and ~0.5 s of CPU that compiled code would not spend, and on 10,000 tasks that would be most
 * of the CPU figure the issue targets.
 *
 * Runs are interleaved: each of BENCH_RUNS rounds runs every system once, starting one system later
 * each round, so no system always runs first or right after the same neighbour. The table shows the
 * median of each figure over the runs, and each figure as a ratio to the best peer's (the best of the
 * systems that are not taskpool). Progress goes to stderr; the tables and one JSON line go to stdout.
 * BENCH_CPU_PROF=<dir> writes .cpuprofile files of every worker process there, one directory per run and
 * one file per thread (the main thread's is the largest; tsx's loader thread has its own).
 */
import { type ChildProcess, fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { resolve } from "node:path";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import pg from "pg";
import { cpuMsOfProcessesNamed, describeMachine, type MachineState, machineState } from "./lib/cpu.js";
import { envInt, envList } from "./lib/env.js";
import { onInterrupt } from "./lib/interrupt.js";
import { PG_URL, postgresServer } from "./lib/database.js";
import { median, type Percentiles, round, summarize } from "./lib/stats.js";
import { type Cell, formatTable } from "./lib/table.js";
import type { ChildMessage, Request } from "./peers/worker-process.js";
import { CONCURRENCY, PAYLOAD_BYTES, payload, type Producer, type System, SYSTEM_NAMES, type SystemName } from "./peers/system.js";
import { loadSystem } from "./peers/systems.js";

const config = {
  jobs: envInt("BENCH_JOBS", 10_000),
  batch: envInt("BENCH_BATCH", 1000),
  runs: envInt("BENCH_RUNS", 3),
  latencySeconds: envInt("BENCH_LATENCY_SECONDS", 5, 0),
  systems: envList<SystemName>("BENCH_SYSTEMS", SYSTEM_NAMES, SYSTEM_NAMES),
  cpuProfileDir: process.env.BENCH_CPU_PROF ? resolve(process.env.BENCH_CPU_PROF) : null,
};
/** The two open-loop rates, tasks/s: the p95 figure is read at the first, the p99 at the second. */
const RATES = [500, 100] as const;
/** Between the drain and the latency phases, and between the two rates: let batching timers and bursts end. */
const SETTLE_MS = 1000;
/** Poll for "all completed" this often once every drain handler has started, and this often before. */
const CLOSE_POLL_MS = 5;
const FAR_POLL_MS = 250;
/** A drain whose remaining count has not moved for this long is stuck (a failing task, a dead runtime). */
const STALL_MS = 30_000;
/** How long the worker process may take to load and connect. */
const READY_TIMEOUT_MS = 60_000;
/** How long after the last send a latency task may take to start before it counts as missing. */
const START_TIMEOUT_MS = 15_000;
const WORKER_SCRIPT = fileURLToPath(new URL("./peers/worker-process.ts", import.meta.url));

const log = (message: string) => console.error(`[bench:peers] ${message}`);
const wallClock = () => performance.timeOrigin + performance.now();

// ---------------------------------------------------------------------------------------------
// The worker process

/** One system's worker runtime in a child process, driven by requests over IPC. */
class WorkerProcess {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  /** True once the process has gone, for whatever reason. */
  exited = false;
  /** Resolves when every drain task's handler has started. */
  readonly drainHandled: Promise<void>;

  private constructor(
    private readonly child: ChildProcess,
    ready: () => void,
    failed: (error: Error) => void,
  ) {
    let handled: () => void = () => {};
    this.drainHandled = new Promise((resolve) => (handled = resolve));
    child.on("message", (message: ChildMessage) => {
      if (message.type === "ready") ready();
      else if (message.type === "drain-handled") handled();
      else {
        const call = this.pending.get(message.id);
        this.pending.delete(message.id);
        if (message.error !== undefined) call?.reject(new Error(`worker process: ${message.error}`));
        else call?.resolve(message.result);
      }
    });
    // "close" waits for the IPC channel too, so a reply sent just before exiting has arrived.
    child.on("close", (code, signal) => {
      this.exited = true;
      const error = new Error(`worker process ${child.pid} ended (${signal ?? `exit code ${code}`})`);
      failed(error);
      for (const call of this.pending.values()) call.reject(error);
      this.pending.clear();
    });
  }

  /** Starts the child and waits until its runtime is prepared. */
  static async spawn(name: SystemName, namespace: string): Promise<WorkerProcess> {
    // Explicit execArgv: the child needs tsx's loader for .ts files, whatever this process was started with.
    const execArgv = ["--import", "tsx"];
    if (config.cpuProfileDir) execArgv.push("--cpu-prof", "--cpu-prof-dir", resolve(config.cpuProfileDir, `${name}-${namespace}`));
    // stdout to /dev/null: the systems' default loggers write there, as a deployment's would to a file.
    const child = fork(WORKER_SCRIPT, [name, namespace], { execArgv, stdio: ["ignore", "ignore", "inherit", "ipc"] });
    let worker: WorkerProcess | undefined;
    // A child that never gets ready (a hung connect) is killed, which rejects through "close".
    const timer = setTimeout(() => child.kill("SIGKILL"), READY_TIMEOUT_MS);
    try {
      await new Promise<void>((resolve, reject) => {
        worker = new WorkerProcess(child, resolve, reject);
      });
    } finally {
      clearTimeout(timer);
    }
    return worker!;
  }

  call(op: "start", args: { latencyFrom: number; drainCount: number }): Promise<{ startAt: number; startedAt: number; startCpuMs: number; handledAtStart: number }>;
  call(op: "cpu"): Promise<{ userMs: number; systemMs: number }>;
  call(op: "starts"): Promise<{ n: number[]; at: number[] }>;
  call(op: "stop"): Promise<null>;
  call(op: Request["op"], args: object = {}): Promise<unknown> {
    if (this.exited) return Promise.reject(new Error("worker process has ended"));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ id, op, ...args });
    });
  }

  /** Stops the runtime gracefully, or kills the process when it does not stop within `ms`. */
  async stop(ms = 15_000): Promise<void> {
    if (this.exited) return;
    const closed = new Promise((resolve) => this.child.once("close", resolve));
    const timer = setTimeout(() => this.kill(), ms);
    await this.call("stop").catch((error) => log(`stopping the worker: ${error.message}`));
    await closed;
    clearTimeout(timer);
  }

  /** Kills the process and waits until it is gone (its connections with it). */
  async kill(): Promise<void> {
    if (this.exited) return;
    const closed = new Promise((resolve) => this.child.once("close", resolve));
    this.child.kill("SIGKILL");
    await closed;
  }
}

// ---------------------------------------------------------------------------------------------
// One run

interface Phase {
  rate: number;
  sent: number;
  /** Tasks whose handler had not started START_TIMEOUT_MS after the last send. */
  missing: number;
  /** Enqueue call → handler start, ms. */
  latency: Percentiles;
  /** Enqueue resolved → handler start, ms (negative when the handler started before the enqueuer heard back). */
  dispatch: Percentiles;
  /** Enqueue call → resolved, ms: the producer's share of the latency. */
  enqueue: Percentiles;
  /** How late the sender made its calls against the schedule, ms: a late sender understates the offered rate. */
  senderLateP99: number;
  /** This process's CPU over the sending, % of one core: the producer's cost (near 100 = it was the bottleneck). */
  producerCpuPercent: number;
}

interface RunResult {
  enqueueSeconds: number;
  /** How long the worker's start call took, and its CPU time: not in the drain figures (see the header). */
  startSeconds: number;
  startCpuMs: number;
  /** Tasks whose handler started before the start call resolved: not in the drain figures either. */
  handledAtStart: number;
  drainSeconds: number;
  drainPerSecond: number;
  cpuUserMs: number;
  cpuSystemMs: number;
  cpuMsPer1000: number;
  /** The database server's CPU time over the start call and the drain, per 1,000 tasks (NaN for SQLite, which runs in the worker). */
  databaseCpuMsPer1000: number;
  phases: Phase[];
}

/** Polls until no task is left; returns the wall-clock time of the answer that said so. */
async function waitDrained(producer: Producer, worker: WorkerProcess, signal: AbortSignal): Promise<number> {
  const handled = worker.drainHandled;
  let close = false;
  void handled.then(() => (close = true));
  let last = Number.NaN;
  let lastMove = performance.now();
  for (;;) {
    const left = await producer.remaining();
    const at = wallClock();
    if (left === 0) return at;
    if (worker.exited) throw new Error(`the worker process ended with ${left} tasks not completed`);
    if (left !== last) {
      last = left;
      lastMove = performance.now();
    } else if (performance.now() - lastMove > STALL_MS) {
      throw new Error(`stuck: ${left} tasks not completed for ${STALL_MS / 1000} s`);
    }
    if (close) await sleep(CLOSE_POLL_MS, undefined, { signal });
    else await Promise.race([sleep(FAR_POLL_MS, undefined, { signal }), handled]);
  }
}

/** Sends `rate × seconds` tasks one by one on a fixed schedule, then collects their handler starts. */
async function openLoop(producer: Producer, worker: WorkerProcess, rate: number, firstN: number, signal: AbortSignal): Promise<Phase> {
  const count = rate * config.latencySeconds;
  const calledAt = new Float64Array(count);
  const committedAt = new Float64Array(count).fill(Number.NaN);
  const late: number[] = [];
  const sends: Promise<void>[] = [];
  let failed: unknown;
  const cpu0 = process.cpuUsage();
  const t0 = wallClock() + 10;
  for (let i = 0; i < count; i++) {
    const due = t0 + (i * 1000) / rate;
    const wait = due - wallClock();
    if (wait >= 1) await sleep(Math.floor(wait), undefined, { signal });
    signal.throwIfAborted();
    calledAt[i] = wallClock();
    late.push(Math.max(0, calledAt[i] - due));
    // Every send's failure is caught at once: an interrupted loop leaves some in flight, to fail on
    // the closed connection, and an unhandled rejection would end the process before the clean-up.
    const send = producer.enqueue(payload(firstN + i));
    sends.push(send.then(() => void (committedAt[i] = wallClock()), (error) => void (failed ??= error)));
  }
  await Promise.all(sends);
  // A failed enqueue fails the run: its latency would be missing from the figures.
  if (failed !== undefined) throw failed;
  const cpu = process.cpuUsage(cpu0);
  const producerCpuPercent = (cpu.user + cpu.system) / 10 / (wallClock() - t0);

  const deadline = wallClock() + START_TIMEOUT_MS;
  const firstStart = new Float64Array(count).fill(Number.NaN);
  let found = 0;
  while (found < count && wallClock() < deadline) {
    await sleep(100, undefined, { signal });
    const starts = await worker.call("starts");
    found = 0;
    firstStart.fill(Number.NaN);
    for (let k = 0; k < starts.n.length; k++) {
      const i = starts.n[k] - firstN;
      if (i < 0 || i >= count) continue;
      // A task run twice (a retry) counts from its first start.
      if (Number.isNaN(firstStart[i])) found++;
      if (Number.isNaN(firstStart[i]) || starts.at[k] < firstStart[i]) firstStart[i] = starts.at[k];
    }
  }
  const latency: number[] = [];
  const dispatch: number[] = [];
  const enqueue = Array.from(calledAt, (at, i) => committedAt[i] - at);
  for (let i = 0; i < count; i++) {
    if (Number.isNaN(firstStart[i])) continue;
    latency.push(firstStart[i] - calledAt[i]);
    dispatch.push(firstStart[i] - committedAt[i]);
  }
  return {
    rate,
    sent: count,
    missing: count - found,
    latency: summarize(latency),
    dispatch: summarize(dispatch),
    enqueue: summarize(enqueue),
    senderLateP99: summarize(late).p99,
    producerCpuPercent,
  };
}

/** CPU so far of the database server the system uses: PostgreSQL's processes, Redis for BullMQ; NaN for SQLite (it runs inside the worker). */
function databaseCpuMs(name: SystemName): number {
  if (name === "taskpool-sqlite") return Number.NaN;
  return cpuMsOfProcessesNamed(name === "bullmq" ? "redis-server" : "postgres");
}

async function runOnce(system: System, signal: AbortSignal): Promise<RunResult> {
  const namespace = `bench_peers_${randomBytes(4).toString("hex")}`;
  const producer = system.producer(namespace);
  let worker: WorkerProcess | undefined;
  try {
    await producer.open();
    const t0 = performance.now();
    for (let done = 0; done < config.jobs; done += config.batch) {
      const size = Math.min(config.batch, config.jobs - done);
      await producer.enqueueMany(Array.from({ length: size }, (_, i) => payload(done + i)));
    }
    const enqueueSeconds = (performance.now() - t0) / 1000;
    const queued = await producer.remaining();
    if (queued !== config.jobs) throw new Error(`expected ${config.jobs} tasks after enqueue, found ${queued}`);
    signal.throwIfAborted();

    worker = await WorkerProcess.spawn(system.name, namespace);
    signal.throwIfAborted();
    const databaseCpuBefore = databaseCpuMs(system.name);
    const start = await worker.call("start", { latencyFrom: config.jobs, drainCount: config.jobs });
    const drainedAt = await waitDrained(producer, worker, signal);
    const cpu = await worker.call("cpu");
    const databaseCpu = databaseCpuMs(system.name) - databaseCpuBefore;
    const drainSeconds = (drainedAt - start.startedAt) / 1000;
    const drained = config.jobs - start.handledAtStart;
    if (drained < config.jobs / 2) throw new Error(`${start.handledAtStart} of ${config.jobs} tasks ran during the start call; raise BENCH_JOBS`);

    const phases: Phase[] = [];
    let nextN = config.jobs;
    if (config.latencySeconds > 0) {
      for (const rate of RATES) {
        await sleep(SETTLE_MS, undefined, { signal });
        const phase = await openLoop(producer, worker, rate, nextN, signal);
        nextN += phase.sent;
        phases.push(phase);
      }
    }
    await worker.stop();
    return {
      enqueueSeconds,
      startSeconds: (start.startedAt - start.startAt) / 1000,
      startCpuMs: start.startCpuMs,
      handledAtStart: start.handledAtStart,
      drainSeconds,
      drainPerSecond: drained / drainSeconds,
      cpuUserMs: cpu.userMs,
      cpuSystemMs: cpu.systemMs,
      cpuMsPer1000: ((cpu.userMs + cpu.systemMs) * 1000) / drained,
      databaseCpuMsPer1000: (databaseCpu * 1000) / drained,
      phases,
    };
  } finally {
    // The worker first: a session still holding locks or LISTENing would make DROP SCHEMA wait.
    await worker?.kill();
    await producer.close().catch((error) => log(`${system.name}: could not delete ${namespace}: ${error}`));
  }
}

// ---------------------------------------------------------------------------------------------
// Report

/** The figures of the table, each with whether a higher value is better. */
const FIGURES = [
  { key: "drainPerSecond", label: "drain tasks/s", higherIsBetter: true },
  { key: "cpuMsPer1000", label: "CPU ms/1k", higherIsBetter: false },
  { key: "databaseCpuMsPer1000", label: "DB CPU ms/1k", higherIsBetter: false },
  { key: "latencyP95At500", label: "p95 @500/s ms", higherIsBetter: false },
  { key: "latencyP99At100", label: "p99 @100/s ms", higherIsBetter: false },
  { key: "dispatchP50At500", label: "dispatch p50 @500/s", higherIsBetter: false },
  { key: "dispatchP50At100", label: "dispatch p50 @100/s", higherIsBetter: false },
] as const;
type FigureKey = (typeof FIGURES)[number]["key"];

function figuresOf(run: RunResult): Record<FigureKey, number> {
  const at = (rate: number) => run.phases.find((p) => p.rate === rate);
  return {
    drainPerSecond: run.drainPerSecond,
    cpuMsPer1000: run.cpuMsPer1000,
    databaseCpuMsPer1000: run.databaseCpuMsPer1000,
    latencyP95At500: at(500)?.latency.p95 ?? Number.NaN,
    latencyP99At100: at(100)?.latency.p99 ?? Number.NaN,
    dispatchP50At500: at(500)?.dispatch.p50 ?? Number.NaN,
    dispatchP50At100: at(100)?.dispatch.p50 ?? Number.NaN,
  };
}

const isPeer = (name: SystemName) => !name.startsWith("taskpool");

interface Environment {
  /** How busy the machine was when the bench started: on a shared machine, other work shows here. */
  machine: MachineState;
  postgres: { version: string; synchronousCommit: string };
  redis: { version: string; aofEnabled: string } | null;
  sqlite: string | null;
}

function report(systems: System[], runs: Map<SystemName, RunResult[]>, failures: Map<SystemName, string[]>, env: Environment): void {
  const rows = systems.map((system) => {
    const results = runs.get(system.name)!;
    const each = results.map(figuresOf);
    const medians = Object.fromEntries(FIGURES.map(({ key }) => [key, median(each.map((f) => f[key]).filter((v) => !Number.isNaN(v)))])) as Record<FigureKey, number>;
    return { system, results, medians, missing: results.reduce((sum, r) => sum + r.phases.reduce((s, p) => s + p.missing, 0), 0) };
  });

  // The best peer per figure: the highest drain, the lowest of everything else.
  const best = Object.fromEntries(
    FIGURES.map(({ key, higherIsBetter }) => {
      const values = rows.filter((r) => isPeer(r.system.name)).map((r) => r.medians[key]).filter((v) => Number.isFinite(v));
      const value = values.length === 0 ? Number.NaN : higherIsBetter ? Math.max(...values) : Math.min(...values);
      return [key, value];
    }),
  ) as Record<FigureKey, number>;
  // A ratio with a value or a best of zero or below (dispatch can be negative) says nothing: "-".
  const ratio = (key: FigureKey, value: number): number | null => (Number.isFinite(value) && value > 0 && best[key] > 0 ? value / best[key] : null);
  const cell = (value: number | null): Cell => (value === null || !Number.isFinite(value) ? "-" : value);

  const lines = [
    `peers bench: ${config.jobs} no-op tasks (${PAYLOAD_BYTES}-byte payload), one worker process with concurrency ${CONCURRENCY}; ` +
      `median of ${config.runs} interleaved runs per system`,
    `node ${process.version}, ${availableParallelism()} CPUs (${describeMachine(env.machine)}); PostgreSQL ${env.postgres.version}, synchronous_commit=${env.postgres.synchronousCommit}` +
      (env.redis ? `; Redis ${env.redis.version}, aof_enabled=${env.redis.aofEnabled}` : "") +
      (env.sqlite ? `; SQLite ${env.sqlite}` : ""),
    "",
    formatTable(
      ["system", "version", "runs", ...FIGURES.map((f) => f.label)],
      rows.map((r) => [r.system.name, r.system.version(), `${r.results.length}/${config.runs}`, ...FIGURES.map(({ key }) => cell(r.medians[key]))]),
    ),
    "",
    "Each figure over the best peer's (peers: every system but taskpool; drain > 1 is faster, the rest < 1 is better):",
    formatTable(
      ["system", ...FIGURES.map((f) => f.label)],
      rows.map((r) => [r.system.name, ...FIGURES.map(({ key }) => cell(ratio(key, r.medians[key])))]),
    ),
    "",
    `drain = tasks/s from the worker's start call resolving to every task completed in the store (polled every ${CLOSE_POLL_MS} ms once all handlers have started);`,
    "CPU = the worker process's user + system time (all threads) over the drain, per 1,000 tasks; start-up is in neither (JSON: startSeconds, startCpuMs);",
    "DB CPU = the database server's processes (PostgreSQL's, or Redis for BullMQ) over the start call and the drain, per 1,000 tasks;",
    `p95/p99 = enqueue call → handler start, tasks sent open-loop one by one at that rate for ${config.latencySeconds} s;`,
    "dispatch = enqueue resolved (committed) → handler start. All in ms, medians over runs.",
    ...rows.filter((r) => r.missing > 0).map((r) => `warning: ${r.system.name}: ${r.missing} latency tasks never started within ${START_TIMEOUT_MS / 1000} s (left out of its percentiles)`),
    ...rows.flatMap((r) =>
      r.results.flatMap((x) => x.phases.filter((p) => p.senderLateP99 > 5).map((p) => `warning: ${r.system.name}: sender up to ${p.senderLateP99.toFixed(1)} ms late (p99) at ${p.rate}/s`)),
    ),
    ...[...failures].flatMap(([name, errors]) => errors.map((e) => `failed run: ${name}: ${e}`)),
    "",
    "Settings:",
    ...systems.map((s) => `  ${s.name}: ${s.settings}`),
    "",
  ];

  const roundPercentiles = (p: Percentiles) => ({ count: p.count, p50: round(p.p50), p95: round(p.p95), p99: round(p.p99), max: round(p.max) });
  const json = {
    bench: "peers",
    date: new Date().toISOString(),
    node: process.version,
    cpus: availableParallelism(),
    ...env,
    jobs: config.jobs,
    batch: config.batch,
    payloadBytes: PAYLOAD_BYTES,
    concurrency: CONCURRENCY,
    runs: config.runs,
    latencySeconds: config.latencySeconds,
    rates: RATES,
    bestPeer: Object.fromEntries(FIGURES.map(({ key }) => [key, round(best[key])])),
    systems: rows.map((r) => ({
      name: r.system.name,
      version: r.system.version(),
      settings: r.system.settings,
      median: Object.fromEntries(FIGURES.map(({ key }) => [key, round(r.medians[key])])),
      ratioToBestPeer: Object.fromEntries(FIGURES.map(({ key }) => [key, (v => (v === null ? null : round(v)))(ratio(key, r.medians[key]))])),
      failures: failures.get(r.system.name) ?? [],
      runs: r.results.map((x) => ({
        enqueueSeconds: round(x.enqueueSeconds),
        startSeconds: round(x.startSeconds),
        startCpuMs: round(x.startCpuMs, 1),
        handledAtStart: x.handledAtStart,
        drainSeconds: round(x.drainSeconds),
        drainPerSecond: round(x.drainPerSecond, 1),
        cpuUserMs: round(x.cpuUserMs, 1),
        cpuSystemMs: round(x.cpuSystemMs, 1),
        cpuMsPer1000: round(x.cpuMsPer1000),
        databaseCpuMsPer1000: round(x.databaseCpuMsPer1000),
        phases: x.phases.map((p) => ({
          ...p,
          latency: roundPercentiles(p.latency),
          dispatch: roundPercentiles(p.dispatch),
          enqueue: roundPercentiles(p.enqueue),
          senderLateP99: round(p.senderLateP99),
          producerCpuPercent: round(p.producerCpuPercent, 1),
        })),
      })),
    })),
  };
  console.log(lines.join("\n"));
  console.log(JSON.stringify(json));
}

// ---------------------------------------------------------------------------------------------

const abort = new AbortController();
onInterrupt(() => abort.abort(new Error("interrupted")));

async function environment(systems: System[], machine: MachineState): Promise<Environment> {
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    const names = systems.map((s) => s.name);
    return {
      machine,
      postgres: await postgresServer(admin),
      redis: names.includes("bullmq") ? await (await import("./peers/bullmq.js")).redisServer() : null,
      sqlite: names.includes("taskpool-sqlite") ? (new Database(":memory:").prepare("SELECT sqlite_version() AS v").get() as { v: string }).v : null,
    };
  } finally {
    await admin.end().catch(() => {});
  }
}

async function main(): Promise<void> {
  const machine = machineState(); // before loading the peers' modules, which is work of the bench's own
  const systems = await Promise.all(config.systems.map(loadSystem));
  const env = await environment(systems, machine);
  const runs = new Map<SystemName, RunResult[]>(systems.map((s) => [s.name, []]));
  const failures = new Map<SystemName, string[]>();
  for (let pass = 0; pass < config.runs; pass++) {
    const order = systems.map((_, i) => systems[(i + pass) % systems.length]);
    for (const system of order) {
      abort.signal.throwIfAborted();
      log(`run ${pass + 1}/${config.runs}: ${system.name}`);
      try {
        const r = await runOnce(system, abort.signal);
        runs.get(system.name)!.push(r);
        const phases = r.phases.map(
          (p) =>
            `@${p.rate}/s p50 ${p.latency.p50.toFixed(1)} p95 ${p.latency.p95.toFixed(1)} p99 ${p.latency.p99.toFixed(1)} ms ` +
            `(enqueue p50 ${p.enqueue.p50.toFixed(1)}, dispatch p50 ${p.dispatch.p50.toFixed(1)}, sender late p99 ${p.senderLateP99.toFixed(1)}, producer CPU ${p.producerCpuPercent.toFixed(0)}%)`,
        );
        log(
          `  enqueue ${r.enqueueSeconds.toFixed(2)} s, start ${r.startSeconds.toFixed(3)} s (CPU ${r.startCpuMs.toFixed(0)} ms), drain ${r.drainSeconds.toFixed(2)} s ` +
            `(${Math.round(r.drainPerSecond)} tasks/s), CPU ${r.cpuMsPer1000.toFixed(0)} ms/1k` +
            phases.map((p) => `; ${p}`).join(""),
        );
      } catch (error) {
        if (abort.signal.aborted) throw error;
        // One failing system should not void the others' runs; the report lists the failure.
        log(`  failed: ${(error as Error).stack ?? error}`);
        failures.set(system.name, [...(failures.get(system.name) ?? []), (error as Error).message]);
      }
    }
  }
  report(systems, runs, failures, env);
  if (failures.size > 0) process.exitCode = 1;
}

main().catch((error) => {
  // An interrupt surfaces as whichever abort error the bench was waiting in; the cause is known.
  if (abort.signal.aborted) log("interrupted");
  else console.error(error);
  process.exitCode = 1;
});
