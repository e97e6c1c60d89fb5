/**
 * Creates over HTTP, with and without an idempotency key: what a key costs a server whose producers
 * send one task per request, as the Python client and curl do.
 *
 *   npm run bench:http-enqueue
 *   BENCH_CONNECTIONS=32 BENCH_CALLS=4000 BENCH_RUNS=3 npm run bench:http-enqueue
 *
 * A real `taskpool serve` process (the CLI from the sources) on a fresh PostgreSQL schema, without
 * keys, its rate limit and coordinator off; this process sends BENCH_CALLS `POST /api/tasks` of one
 * task each, BENCH_CONNECTIONS at a time over keep-alive connections (undici's Pool), first without
 * an `Idempotency-Key` header, then each with its own (a UUID), alternated BENCH_RUNS times after an
 * unrecorded warm-up of each. Prints creates per second for each run and the medians.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { Pool } from "undici";
import { describeMachine, machineState } from "./lib/cpu.js";
import { envInt } from "./lib/env.js";
import { waitForServer } from "./lib/server.js";
import { onInterrupt } from "./lib/interrupt.js";
import { dropSchema, PG_URL } from "./lib/database.js";
import { median, round } from "./lib/stats.js";

const config = {
  connections: envInt("BENCH_CONNECTIONS", 32),
  calls: envInt("BENCH_CALLS", 4000),
  runs: envInt("BENCH_RUNS", 3),
  port: envInt("BENCH_PORT", 18_081),
};
const CLI = fileURLToPath(new URL("../src/cli/index.ts", import.meta.url));
const log = (message: string) => process.stderr.write(`${message}\n`);

const machine = machineState();
const schema = `tp_bench_http_enqueue_${randomBytes(4).toString("hex")}`;
let server: ChildProcess | null = null;
onInterrupt(async () => {
  server?.kill("SIGKILL");
  await dropSchema(schema);
});

try {
  server = spawn(process.execPath, ["--import", "tsx", CLI, "serve", "--db", PG_URL, "--schema", schema, "--port", String(config.port), "--no-auth", "--rate-limit", "0", "--no-coordinator"], {
    env: { ...process.env, LOG_LEVEL: "error" },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const base = `http://127.0.0.1:${config.port}`;
  await waitForServer(base);
  const agent = new Pool(base, { connections: config.connections });
  const body = JSON.stringify({ task_type: "bench", params: { payload: "x".repeat(100) } });

  /** Creates per second, `config.calls` of them with `config.connections` in flight. */
  const run = async (keyed: boolean): Promise<number> => {
    let sent = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: config.connections }, async () => {
        while (sent < config.calls) {
          sent++;
          const headers: Record<string, string> = { "content-type": "application/json" };
          if (keyed) headers["idempotency-key"] = randomUUID();
          const answer = await agent.request({ path: "/api/tasks", method: "POST", headers, body });
          const text = await answer.body.text();
          if (answer.statusCode !== 201) throw new Error(`POST /api/tasks answered ${answer.statusCode}: ${text}`);
        }
      }),
    );
    return config.calls / ((performance.now() - started) / 1000);
  };

  log(`warm-up`);
  await run(false);
  await run(true);
  const unkeyed: number[] = [];
  const keyed: number[] = [];
  for (let r = 1; r <= config.runs; r++) {
    log(`run ${r}/${config.runs}`);
    unkeyed.push(await run(false));
    keyed.push(await run(true));
  }
  await agent.close();

  console.log(`bench:http-enqueue: ${config.calls} creates of one task per run, ${config.connections} in flight; ${describeMachine(machine)}`);
  console.log("creates/s   " + unkeyed.map((_, i) => `run ${i + 1}`.padStart(8)).join("") + "  median".padStart(9));
  const row = (name: string, xs: number[]) => console.log(name.padEnd(12) + xs.map((x) => String(Math.round(x)).padStart(8)).join("") + String(Math.round(median(xs))).padStart(9));
  row("unkeyed", unkeyed);
  row("keyed", keyed);
  console.log(JSON.stringify({ bench: "http-enqueue", machine, connections: config.connections, calls: config.calls, unkeyed: unkeyed.map((x) => round(x)), keyed: keyed.map((x) => round(x)) }));
} finally {
  server?.kill("SIGTERM");
  if (server) await new Promise((resolve) => server!.once("exit", resolve));
  await dropSchema(schema);
}
