/**
 * The HTTP API under load (issue 10's benchmark): claim + complete cycles over HTTP, and worker
 * heartbeats, against `taskpool serve` on PostgreSQL, with API keys on.
 *
 *   npm run bench:http
 *   BENCH_CONNECTIONS=16 BENCH_SECONDS=10 BENCH_RUNS=3 npm run bench:http
 *   BENCH_SERVER_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=/tmp/prof" npm run bench:http   (profile the server)
 *
 * The server is a real `taskpool serve` process (the CLI from the sources) on a fresh
 * schema, with a worker-scoped key and the rate limit off (the key's limit is what the bench would
 * otherwise measure). This process is the client, through undici's Pool (Node's own fetch is built
 * on it; it costs about a quarter less CPU per request than node:http, CPU this 2-core machine's server
 * then has): BENCH_CONNECTIONS keep-alive connections, each a
 * worker in a loop: `POST /api/tasks/claim` (limit 1), then `POST /api/tasks/:id/complete` with the
 * lease token, timing each request; then the same cycles chained, each completion carrying `claim_next`
 * and its answer the next task (one request per task); then each connection a worker beating (`POST
 * /api/workers/heartbeat`) as fast as it is answered. BENCH_RUNS runs of each, interleaved; the
 * tables give each run and the medians, with the CPU time the server, this client and PostgreSQL
 * spent per operation (on a 2-core machine the three share the cores, so the server's CPU per cycle
 * is what says how fast it would go on cores of its own). Those are the server flat out: with 16
 * connections each sending its next request as soon as the last is answered, latency is mostly
 * waiting behind the other 15. So each run also paces both kinds of request, open loop at a fixed
 * rate (BENCH_PACED_CYCLES claim + complete cycles/s, BENCH_PACED_BEATS heartbeats/s, from as many
 * workers as connections and as BENCH_PACED_FLEET), each timed from the moment it was due, so a late
 * send counts against the server: the latency a fleet sees when the server is busy but not
 * saturated. Progress goes to stderr; the tables and one JSON line to stdout.
 *
 * Before each phase of cycles the tasks table is vacuumed, off the clock: the work autovacuum does on
 * a production server, which this machine's PostgreSQL runs without. Unvacuumed, every claimed task
 * leaves a dead entry at the head of the pending-task index that every later claim steps over, so each
 * phase ran slower than the one before (PostgreSQL's CPU per plain cycle 0.179, 0.219, 0.253 ms over
 * three runs). BENCH_VACUUM=0 leaves the table as it is, to see that cost.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { availableParallelism } from "node:os";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { Pool } from "undici";
import { connect } from "../src/api/taskpool.js";
import { describeMachine, machineState, postgresCpuMs, processCpuMs } from "./lib/cpu.js";
import { envInt } from "./lib/env.js";
import { waitForServer } from "./lib/server.js";
import { onInterrupt } from "./lib/interrupt.js";
import { dropSchema, PG_URL, postgresServer } from "./lib/database.js";
import { median, round, summarize } from "./lib/stats.js";
import { type Cell, formatTable } from "./lib/table.js";

const config = {
  connections: envInt("BENCH_CONNECTIONS", 16),
  seconds: envInt("BENCH_SECONDS", 10),
  runs: envInt("BENCH_RUNS", 3),
  port: envInt("BENCH_PORT", 18_080),
  pacedCycles: envInt("BENCH_PACED_CYCLES", 500),
  pacedBeats: envInt("BENCH_PACED_BEATS", 500),
  pacedFleet: envInt("BENCH_PACED_FLEET", 2_000),
  vacuum: envInt("BENCH_VACUUM", 1) !== 0,
};
/** The CLI from the sources (as tsx runs them), so the bench measures this checkout without a build. */
const CLI = fileURLToPath(new URL("../src/cli/index.ts", import.meta.url));
const log = (message: string) => process.stderr.write(`${message}\n`);

/** Read before the bench does anything: its own work would show in it otherwise. */
const machine = machineState();
const schema = `tp_bench_http_${randomBytes(4).toString("hex")}`;
let server: ChildProcess | null = null;
onInterrupt(async () => {
  server?.kill("SIGKILL");
  await dropSchema(schema);
});

const pool = await connect(PG_URL, { schema });
const { key } = await pool.createApiKey({ scope: "worker", name: "bench:http" });
const WARM_UP_SECONDS = 2;
// Enough tasks that no run of either kind of cycle finds the pool empty, at up to ~8,000 cycles/s.
const backlog = 2 * (config.runs * config.seconds + WARM_UP_SECONDS) * 8_000 + config.runs * config.seconds * config.pacedCycles;
log(`enqueueing ${backlog} tasks into ${schema}`);
for (let done = 0; done < backlog; done += 10_000) {
  await pool.enqueueMany(Array.from({ length: Math.min(10_000, backlog - done) }, () => ({ taskType: "bench", params: { payload: "x".repeat(100) } })));
}

const serverNodeOptions = (process.env.BENCH_SERVER_NODE_OPTIONS ?? "").split(" ").filter((o) => o !== "");
server = spawn(process.execPath, [...serverNodeOptions, "--import", "tsx", CLI, "serve", "--db", PG_URL, "--schema", schema, "--port", String(config.port), "--rate-limit", "0"], {
  env: { ...process.env, LOG_LEVEL: "warn" },
  stdio: ["ignore", "inherit", "inherit"],
});
const base = `http://127.0.0.1:${config.port}`;
await waitForServer(base);

const agent = new Pool(base, { connections: config.connections });

/** Autovacuum's work on the tasks table, done between phases (see the header). */
async function vacuum(): Promise<void> {
  if (!config.vacuum) return;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    await admin.query(`VACUUM (ANALYZE) "${schema}".tasks`);
  } finally {
    await admin.end().catch(() => {});
  }
}

interface CycleRun {
  cycles: number;
  perSecond: number;
  claim: ReturnType<typeof summarize>;
  complete: ReturnType<typeof summarize>;
  cpu: CpuPerOperation;
}

/** CPU milliseconds per operation of the server process, this client process and PostgreSQL. */
interface CpuPerOperation {
  server: number;
  client: number;
  postgres: number;
}

function cpuMeter(): (operations: number) => CpuPerOperation {
  const read = () => ({ server: processCpuMs(server!.pid!), client: processCpuMs(process.pid), postgres: postgresCpuMs() });
  const before = read();
  return (operations) => {
    const after = read();
    const per = (k: keyof CpuPerOperation) => (after[k] - before[k]) / Math.max(1, operations);
    return { server: per("server"), client: per("client"), postgres: per("postgres") };
  };
}

/**
 * Claim + complete cycles. Plain: two requests per task, `POST /api/tasks/claim` then `…/complete`.
 * Chained: the completion carries `claim_next` and its answer the next task, so a cycle is one request
 * (a connection claims plainly only when the answer brought none); `complete` then times that request.
 */
async function cycleRun(run: number, chained: boolean, seconds = config.seconds): Promise<CycleRun> {
  await vacuum();
  const claims: number[] = [];
  const completes: number[] = [];
  const until = performance.now() + seconds * 1000;
  const loops = Array.from({ length: config.connections }, async (_, i) => {
    const workerId = `bench-${run}-${chained ? "chained" : "plain"}-${i}`;
    let held: { id: number; lease_token: string } | null = null;
    while (performance.now() < until) {
      let t = performance.now();
      if (!held) {
        const claimed = await post("/api/tasks/claim", { worker_id: workerId, task_types: ["bench"] });
        claims.push(performance.now() - t);
        if (claimed.status !== 200) throw new Error(`claim answered ${claimed.status}: ${JSON.stringify(claimed.body)}`);
        held = claimed.body.task as { id: number; lease_token: string };
      }
      t = performance.now();
      const completed = await post(`/api/tasks/${held.id}/complete`, { worker_id: workerId, lease_token: held.lease_token, result: { ok: true }, ...(chained ? { claim_next: { task_types: ["bench"] } } : {}) });
      completes.push(performance.now() - t);
      if (completed.status !== 200) throw new Error(`complete answered ${completed.status}: ${JSON.stringify(completed.body)}`);
      held = chained ? ((completed.body.next_tasks as (typeof held)[])[0] ?? null) : null;
    }
  });
  const started = performance.now();
  const cpu = cpuMeter();
  await Promise.all(loops);
  const elapsed = (performance.now() - started) / 1000;
  return { cycles: completes.length, perSecond: completes.length / elapsed, claim: summarize(claims), complete: summarize(completes), cpu: cpu(completes.length) };
}

async function heartbeatRun(run: number): Promise<{ perSecond: number; latency: ReturnType<typeof summarize>; cpu: CpuPerOperation }> {
  const latencies: number[] = [];
  const until = performance.now() + config.seconds * 1000;
  const started = performance.now();
  const cpu = cpuMeter();
  await Promise.all(
    Array.from({ length: config.connections }, async (_, i) => {
      const beat = { worker_id: `beat-${run}-${i}`, roles: ["bench"], capacity: 10, current_load: 1, tasks_processed: 0 };
      while (performance.now() < until) {
        const t = performance.now();
        const answer = await post("/api/workers/heartbeat", beat);
        latencies.push(performance.now() - t);
        if (answer.status !== 200) throw new Error(`heartbeat answered ${answer.status}: ${JSON.stringify(answer.body)}`);
      }
    }),
  );
  return { perSecond: latencies.length / ((performance.now() - started) / 1000), latency: summarize(latencies), cpu: cpu(latencies.length) };
}

/**
 * Calls `request(n, due)` open loop, `perSecond` times a second for `seconds`, each without waiting
 * for the ones before; `due` is when it should have been sent, which the request times itself from.
 * Returns how late each was sent (this client's timers and event loop, counted in the latencies).
 */
async function paced(perSecond: number, seconds: number, request: (n: number, due: number) => Promise<void>): Promise<number[]> {
  const started = performance.now();
  const sent: Promise<void>[] = [];
  const late: number[] = [];
  for (let n = 0; n < Math.round(perSecond * seconds); n++) {
    const due = started + (n * 1000) / perSecond;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    late.push(Math.max(0, performance.now() - due));
    sent.push(request(n, due));
  }
  await Promise.all(sent);
  return late;
}

interface PacedRun {
  /** How late this client sent the cycles' claims, included in their latency. */
  sentLate: ReturnType<typeof summarize>;
  claim: ReturnType<typeof summarize>;
  complete: ReturnType<typeof summarize>;
  beat: ReturnType<typeof summarize>;
}

/**
 * Claim + complete cycles at config.pacedCycles a second (one worker per connection, cycle n by
 * worker n mod connections: claim timed from when the cycle was due, complete from the claim's
 * answer), then heartbeats at config.pacedBeats a second from a fleet of config.pacedFleet workers.
 */
async function pacedRun(run: number): Promise<PacedRun> {
  await vacuum();
  const claims: number[] = [];
  const completes: number[] = [];
  const late = await paced(config.pacedCycles, config.seconds, async (n, due) => {
    const workerId = `paced-${run}-${n % config.connections}`;
    const claimed = await post("/api/tasks/claim", { worker_id: workerId, task_types: ["bench"] });
    const answered = performance.now();
    claims.push(answered - due);
    if (claimed.status !== 200) throw new Error(`claim answered ${claimed.status}: ${JSON.stringify(claimed.body)}`);
    const task = claimed.body.task as { id: number; lease_token: string };
    const completed = await post(`/api/tasks/${task.id}/complete`, { worker_id: workerId, lease_token: task.lease_token, result: { ok: true } });
    completes.push(performance.now() - answered);
    if (completed.status !== 200) throw new Error(`complete answered ${completed.status}: ${JSON.stringify(completed.body)}`);
  });
  const beats: number[] = [];
  await paced(config.pacedBeats, config.seconds, async (n, due) => {
    const answer = await post("/api/workers/heartbeat", { worker_id: `fleet-${run}-${n % config.pacedFleet}`, roles: ["bench"], capacity: 10, current_load: 1, tasks_processed: 0 });
    beats.push(performance.now() - due);
    if (answer.status !== 200) throw new Error(`heartbeat answered ${answer.status}: ${JSON.stringify(answer.body)}`);
  });
  return { sentLate: summarize(late), claim: summarize(claims), complete: summarize(completes), beat: summarize(beats) };
}

const cycles: CycleRun[] = [];
const chainedCycles: CycleRun[] = [];
const beats: Awaited<ReturnType<typeof heartbeatRun>>[] = [];
const pacedRuns: PacedRun[] = [];
try {
  // Warm-up, unrecorded: every connection opened, every statement prepared.
  await cycleRun(-1, false, WARM_UP_SECONDS);
  await cycleRun(-1, true, WARM_UP_SECONDS);
  for (let run = 0; run < config.runs; run++) {
    log(`run ${run + 1}/${config.runs}: claim + complete`);
    cycles.push(await cycleRun(run, false));
    log(`run ${run + 1}/${config.runs}: complete with claim_next`);
    chainedCycles.push(await cycleRun(run, true));
    log(`run ${run + 1}/${config.runs}: heartbeats`);
    beats.push(await heartbeatRun(run));
    log(`run ${run + 1}/${config.runs}: paced, ${config.pacedCycles} cycles/s then ${config.pacedBeats} heartbeats/s`);
    pacedRuns.push(await pacedRun(run));
  }
} finally {
  await agent.close();
  server.kill("SIGTERM");
  await new Promise((resolve) => server!.once("exit", resolve));
  await pool.close();
  await dropSchema(schema);
}

const client = new pg.Client({ connectionString: PG_URL });
await client.connect();
const pgInfo = await postgresServer(client);
await client.end();

console.log(`bench:http: ${config.connections} connections, ${config.seconds} s per run, ${config.runs} runs; PostgreSQL ${pgInfo.version} (synchronous_commit ${pgInfo.synchronousCommit}, autovacuum ${pgInfo.autovacuum}; tasks table ${config.vacuum ? "vacuumed before each phase of cycles" : "never vacuumed"}); ${availableParallelism()} cores, ${describeMachine(machine)}`);
const cpuCells = (cpu: CpuPerOperation[]) => [median(cpu.map((c) => c.server)), median(cpu.map((c) => c.client)), median(cpu.map((c) => c.postgres))].map((ms) => round(ms, 3));
const CPU_HEADERS = ["server CPU", "client CPU", "PostgreSQL CPU"];
const CPU_COLUMNS: Column<{ cpu: CpuPerOperation }>[] = [[(r) => r.cpu.server, 3], [(r) => r.cpu.client, 3], [(r) => r.cpu.postgres, 3]];
console.log("\nclaim + complete cycles over HTTP (latency in ms; CPU in ms per cycle)");
const cycleColumns: Column<CycleRun>[] = [[(c) => c.perSecond, 0], [(c) => c.claim.p50], [(c) => c.claim.p95], [(c) => c.claim.p99], [(c) => c.complete.p50], [(c) => c.complete.p95], ...CPU_COLUMNS];
console.log(formatTable(["", "cycles/s", "claim p50", "claim p95", "claim p99", "complete p50", "complete p95", ...CPU_HEADERS], runRows(cycles, cycleColumns)));
console.log("\ncycles chained with claim_next: one request per task, the completion claiming the next (latency in ms; CPU in ms per cycle)");
const chainedColumns: Column<CycleRun>[] = [[(c) => c.perSecond, 0], [(c) => c.complete.p50], [(c) => c.complete.p95], [(c) => c.complete.p99], ...CPU_COLUMNS];
console.log(formatTable(["", "cycles/s", "request p50", "request p95", "request p99", ...CPU_HEADERS], runRows(chainedCycles, chainedColumns)));
console.log("\nworker heartbeats over HTTP (latency in ms; CPU in ms per beat)");
const beatColumns: Column<(typeof beats)[number]>[] = [[(b) => b.perSecond, 0], [(b) => b.latency.p50], [(b) => b.latency.p95], [(b) => b.latency.p99], ...CPU_COLUMNS];
console.log(formatTable(["", "beats/s", "p50", "p95", "p99", ...CPU_HEADERS], runRows(beats, beatColumns)));
console.log(`\npaced, open loop: ${config.pacedCycles} claim + complete cycles/s, then ${config.pacedBeats} heartbeats/s from ${config.pacedFleet} workers (ms; claim and heartbeat timed from when they were due)`);
const pacedColumns: Column<PacedRun>[] = [[(p) => p.sentLate.p95], [(p) => p.claim.p50], [(p) => p.claim.p95], [(p) => p.claim.p99], [(p) => p.complete.p50], [(p) => p.complete.p95], [(p) => p.beat.p50], [(p) => p.beat.p95], [(p) => p.beat.p99]];
console.log(formatTable(["", "sent late p95", "claim p50", "claim p95", "claim p99", "complete p50", "complete p95", "heartbeat p50", "heartbeat p95", "heartbeat p99"], runRows(pacedRuns, pacedColumns)));
const [serverCpuPerCycle, clientCpuPerCycle, postgresCpuPerCycle] = cpuCells(cycles.map((c) => c.cpu));
const [serverCpuPerChainedCycle] = cpuCells(chainedCycles.map((c) => c.cpu));
const [serverCpuPerBeat] = cpuCells(beats.map((b) => b.cpu));
console.log(
  JSON.stringify({
    bench: "http",
    machine,
    connections: config.connections,
    vacuumed: config.vacuum,
    cyclesPerSecond: round(median(cycles.map((c) => c.perSecond)), 0),
    claimP95: round(median(cycles.map((c) => c.claim.p95))),
    completeP95: round(median(cycles.map((c) => c.complete.p95))),
    chainedCyclesPerSecond: round(median(chainedCycles.map((c) => c.perSecond)), 0),
    chainedRequestP95: round(median(chainedCycles.map((c) => c.complete.p95))),
    beatsPerSecond: round(median(beats.map((b) => b.perSecond)), 0),
    heartbeatP95: round(median(beats.map((b) => b.latency.p95))),
    serverCpuPerCycle,
    clientCpuPerCycle,
    postgresCpuPerCycle,
    serverCpuPerChainedCycle,
    serverCpuPerBeat,
    paced: {
      cyclesPerSecond: config.pacedCycles,
      beatsPerSecond: config.pacedBeats,
      claimP95: round(median(pacedRuns.map((p) => p.claim.p95))),
      completeP95: round(median(pacedRuns.map((p) => p.complete.p95))),
      heartbeatP95: round(median(pacedRuns.map((p) => p.beat.p95))),
    },
  }),
);

/** A figure of a run, and the decimals it is printed with (as measured when none are given). */
type Column<R> = [figure: (run: R) => number, decimals?: number];

/** A row per run and a last row of medians, each column's median taken before it is rounded. */
function runRows<R>(runs: R[], columns: Column<R>[]): Cell[][] {
  const cell = ([, decimals]: Column<R>, value: number) => (decimals === undefined ? value : round(value, decimals));
  const rows: Cell[][] = runs.map((run, i) => [`run ${i + 1}`, ...columns.map((column) => cell(column, column[0](run)))]);
  rows.push(["median", ...columns.map((column) => cell(column, median(runs.map(column[0]))))]);
  return rows;
}

async function post(path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const { statusCode, body: answer } = await agent.request({ path, method: "POST", headers: { "content-type": "application/json", "x-api-key": key }, body: JSON.stringify(body) });
  return { status: statusCode, body: (await answer.json()) as Record<string, unknown> };
}
