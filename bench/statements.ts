/**
 * PostgreSQL's own CPU per task for the statements a draining worker sends, without the worker:
 * the claim and the completion, each on its own connection, so each backend's CPU time (from /proc,
 * so PostgreSQL must run on this machine) is one statement's. A third connection completes the same
 * way graphile-worker's batched completion does (`DELETE … USING unnest($1)`: no lease check, no
 * audit event, no history kept), as a floor to compare with. A third drain runs graphile-worker's own
 * statements on its own tables: the batched claim of its worker's local queue (`batchGetJobs`) and
 * the batched completion (`batchCompleteJobs`), the very functions its worker calls.
 *
 *   npm run bench:statements
 *   BENCH_TASKS=30000 BENCH_BATCH=250 BENCH_RUNS=3 npm run bench:statements
 *
 * Each run seeds BENCH_TASKS pending tasks (100-byte params, as bench:peers) in a fresh schema, twice:
 * one set drained by claims of BENCH_BATCH (the size a draining worker's claims reach) each followed by
 * the store's batched completion of what it claimed, the other by the same claims followed by the
 * bare delete; then the same number of graphile-worker jobs (the same payloads) in a schema of its own,
 * claimed and completed by graphile-worker's functions in batches of the same size. Runs alternate the
 * three; the table gives each run and the medians, in µs of backend CPU per task (10 ms ticks: a run
 * of 30,000 tasks resolves about 0.3 µs).
 */
import { randomBytes } from "node:crypto";
import { makeWorkerUtils } from "graphile-worker";
import pg from "pg";
import { connect } from "../src/api/taskpool.js";
import { sessionSettings } from "../src/store/postgres/session-settings.js";
import * as sql from "../src/store/postgres/queries.js";
import { describeMachine, machineState, processCpuMs } from "./lib/cpu.js";
import { dropSchema, PG_URL } from "./lib/database.js";
import { envInt } from "./lib/env.js";
import { onInterrupt } from "./lib/interrupt.js";
import { median, round } from "./lib/stats.js";
import { formatTable } from "./lib/table.js";

const config = { tasks: envInt("BENCH_TASKS", 30_000), batch: envInt("BENCH_BATCH", 250), runs: envInt("BENCH_RUNS", 3) };
const machine = machineState();
const schemas: string[] = [];
onInterrupt(() => void Promise.all(schemas.map(dropSchema)).finally(() => process.exit(130)));

/** The worker's claim (typed, started at once, one worker) and the store's batched completion, as the store prepares them. */
const CLAIM = sql.leanClaimStatement("priority", "desc", true, true, true);
const COMPLETE = sql.completeMany(false);
const BARE_DELETE = "DELETE FROM tasks t USING unnest($1::bigint[]) n(n) WHERE t.id = n";

async function backend(schema: string) {
  const client = new pg.Client({ connectionString: PG_URL, options: sessionSettings(schema) });
  await client.connect();
  const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0].pid;
  return { client, cpuMs: () => processCpuMs(pid) };
}

/** The payload of task n, as every drain here and bench:peers send it. */
const payload = (n: number) => ({ n, pad: "x".repeat(80) });

/** Drains a fresh schema; returns µs of backend CPU per task for its claims and its completions. */
async function drain(bare: boolean): Promise<{ claim: number; complete: number }> {
  const schema = `tp_bench_statements_${randomBytes(4).toString("hex")}`;
  schemas.push(schema);
  const pool = await connect(PG_URL, { schema });
  for (let i = 0; i < config.tasks; i += 1000) {
    await pool.enqueueMany(Array.from({ length: Math.min(1000, config.tasks - i) }, (_, j) => ({ taskType: "noop", params: payload(i + j) })));
  }
  await pool.close();
  const claimer = await backend(schema);
  const completer = await backend(schema);
  try {
    await claimer.client.query("VACUUM ANALYZE tasks");
    const claimStart = claimer.cpuMs();
    const completeStart = completer.cpuMs();
    let done = 0;
    for (;;) {
      const values = [["w1"], new Date(), config.batch, 60, null, [config.batch], ["noop"]];
      const rows = (await claimer.client.query({ name: "claim", text: CLAIM, values })).rows.filter((r) => r.id !== null);
      if (rows.length === 0) break;
      const ids = rows.map((r) => r.id);
      if (bare) await completer.client.query({ name: "complete", text: BARE_DELETE, values: [ids] });
      else await completer.client.query({ name: "complete", text: COMPLETE, values: [ids, rows.map((r) => r.worker_id), rows.map((r) => r.lease_token), new Date(), rows.map(() => "null")] });
      done += rows.length;
    }
    if (done !== config.tasks) throw new Error(`drained ${done} of ${config.tasks} tasks`);
    return { claim: ((claimer.cpuMs() - claimStart) * 1000) / done, complete: ((completer.cpuMs() - completeStart) * 1000) / done };
  } finally {
    await claimer.client.end();
    await completer.client.end();
    await dropSchema(schema);
  }
}

/**
 * graphile-worker's batched claim and completion: not in its published API (only its worker runs
 * them), so loaded from its package's files, and called as its worker calls them (prepared statements,
 * the database's clock, no named queues or flags). The options are the part of its compiled options they read.
 */
type GraphileStatement = (options: unknown, withPgClient: unknown, ...args: unknown[]) => Promise<{ id: string }[] | void>;
const graphileSql = async (file: string, name: string) =>
  ((await import(new URL(`./sql/${file}`, import.meta.resolve("graphile-worker")).href)) as Record<string, GraphileStatement>)[name];
const batchGetJobs = await graphileSql("getJobs.js", "batchGetJobs");
const batchCompleteJobs = await graphileSql("completeJobs.js", "batchCompleteJobs");

/** Drains a fresh graphile-worker schema of the same jobs with its own statements; µs of backend CPU per job, as drain(). */
async function drainGraphile(): Promise<{ claim: number; complete: number }> {
  const schema = `gw_bench_statements_${randomBytes(4).toString("hex")}`;
  schemas.push(schema);
  const utils = await makeWorkerUtils({ connectionString: PG_URL, schema });
  const claimer = await backend(schema);
  const completer = await backend(schema);
  try {
    await utils.migrate();
    for (let i = 0; i < config.tasks; i += 1000) {
      await utils.addJobs(Array.from({ length: Math.min(1000, config.tasks - i) }, (_, j) => ({ identifier: "noop", payload: payload(i + j) })));
    }
    await claimer.client.query(`VACUUM ANALYZE "${schema}"._private_jobs`);
    const options = { escapedWorkerSchema: `"${schema}"`, workerSchema: schema, resolvedPreset: { worker: { preparedStatements: true, useNodeTime: false } }, logger: console };
    const on = (client: pg.Client) => Object.assign(<T>(run: (c: pg.Client) => Promise<T>) => run(client), { withRetries: <T>(run: (c: pg.Client) => Promise<T>) => run(client) });
    // The first claim also registers the task identifier (once per worker, as in its worker): off the clock.
    const tasks = { noop: async () => {} };
    const first = (await batchGetJobs(options, on(claimer.client), tasks, "bench", null, config.batch)) ?? [];
    await batchCompleteJobs(options, on(completer.client), "bench", first);
    let done = first.length;
    const claimStart = claimer.cpuMs();
    const completeStart = completer.cpuMs();
    let counted = 0;
    for (;;) {
      const jobs = (await batchGetJobs(options, on(claimer.client), tasks, "bench", null, config.batch)) ?? [];
      if (jobs.length === 0) break;
      await batchCompleteJobs(options, on(completer.client), "bench", jobs);
      counted += jobs.length;
    }
    done += counted;
    if (done !== config.tasks) throw new Error(`graphile-worker drained ${done} of ${config.tasks} jobs`);
    return { claim: ((claimer.cpuMs() - claimStart) * 1000) / counted, complete: ((completer.cpuMs() - completeStart) * 1000) / counted };
  } finally {
    await claimer.client.end();
    await completer.client.end();
    await utils.release();
    await dropSchema(schema);
  }
}

const rows: (string | number)[][] = [];
const figures = { claim: [] as number[], complete: [] as number[], bareDelete: [] as number[], graphileClaim: [] as number[], graphileComplete: [] as number[] };
for (let run = 1; run <= config.runs; run++) {
  process.stderr.write(`run ${run}/${config.runs}\n`);
  const kept = await drain(false);
  const bare = await drain(true);
  const graphile = await drainGraphile();
  figures.claim.push(kept.claim, bare.claim);
  figures.complete.push(kept.complete);
  figures.bareDelete.push(bare.complete);
  figures.graphileClaim.push(graphile.claim);
  figures.graphileComplete.push(graphile.complete);
  rows.push([`run ${run}`, round(kept.claim, 1), round(kept.complete, 1), round(bare.complete, 1), round(graphile.claim, 1), round(graphile.complete, 1)]);
}
const medians = {
  claim: median(figures.claim),
  complete: median(figures.complete),
  bareDelete: median(figures.bareDelete),
  graphileClaim: median(figures.graphileClaim),
  graphileComplete: median(figures.graphileComplete),
};
rows.push(["median", ...Object.values(medians).map((m) => round(m, 1))]);
console.log(`bench:statements: ${config.tasks} tasks in batches of ${config.batch}, ${config.runs} runs; ${describeMachine(machine)}\n`);
console.log("PostgreSQL backend CPU per task (µs)");
console.log(formatTable(["", "claim", "complete", "bare delete", "graphile-worker claim", "graphile-worker complete"], rows));
console.log(`\ncomplete / bare delete: ${round(medians.complete / medians.bareDelete, 2)}`);
console.log(`taskpool / graphile-worker: claim ${round(medians.claim / medians.graphileClaim, 2)}, complete ${round(medians.complete / medians.graphileComplete, 2)}, both ${round((medians.claim + medians.complete) / (medians.graphileClaim + medians.graphileComplete), 2)}`);
console.log(JSON.stringify({ bench: "statements", machine, ...config, medians, runs: figures }));
