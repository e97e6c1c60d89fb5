/**
 * The worker runtime of one system for bench/peers.ts, alone in its own process so that its CPU time
 * can be measured (not meant to be run by hand).
 *
 *   argv: <system name> <namespace>
 *
 * It prepares the system's consumer (connections, runtime object), sends { type: "ready" }, and then
 * answers requests { id, op } from the bench with { id, result } or { id, error }:
 *
 *   start { latencyFrom, drainCount }  starts the runtime; → { startAt, startedAt, startCpuMs,
 *                                      handledAtStart }: wall clock before and after the start
 *                                      call, its CPU time, and drain handlers started meanwhile
 *   cpu                                CPU time since the start call resolved; → { userMs, systemMs }
 *   starts                             handler starts of tasks numbered >= latencyFrom;
 *                                      → { n: number[], at: number[] }
 *   stop                               stops the runtime; the process exits after the answer.
 *
 * When the handlers of `drainCount` tasks numbered below latencyFrom have started it sends
 * { type: "drain-handled" } unasked, so the bench can poll the store closely only from then on.
 *
 * Times are wall-clock milliseconds with sub-millisecond resolution, performance.timeOrigin +
 * performance.now(): comparable with the bench's own on the same machine. The handler records its
 * start in two arrays and returns; that bookkeeping is the same on every system.
 */
import { performance } from "node:perf_hooks";
import { type Payload, SYSTEM_NAMES, type SystemName } from "./system.js";
import { loadSystem } from "./systems.js";

export type Request =
  | { id: number; op: "start"; latencyFrom: number; drainCount: number }
  | { id: number; op: "cpu" | "starts" | "stop" };

export type ChildMessage =
  | { type: "ready" }
  | { type: "drain-handled" }
  | { type: "reply"; id: number; result?: unknown; error?: string };

const [name, namespace] = process.argv.slice(2) as [SystemName, string];
if (!process.send || !SYSTEM_NAMES.includes(name) || !namespace) {
  console.error("peers/worker-process is started by bench/peers.ts over IPC");
  process.exit(2);
}
const send = (message: ChildMessage, then?: () => void) => process.send!(message, undefined, {}, then);
const wallClock = () => performance.timeOrigin + performance.now();

// Ctrl-C in the terminal reaches the whole process group: leave it to the bench, which stops this
// process in order (and kills it if it must). If the bench dies, the IPC channel closes: leave too.
process.on("SIGINT", () => {});
process.on("disconnect", () => process.exit(1));

let latencyFrom = Number.POSITIVE_INFINITY;
let drainCount = 0;
let drainHandled = 0;
const startedN: number[] = [];
const startedAt: number[] = [];

const system = await loadSystem(name);
const consumer = system.consumer(namespace, (payload: Payload) => {
  const at = wallClock();
  if (payload.n >= latencyFrom) {
    startedN.push(payload.n);
    startedAt.push(at);
  } else if (++drainHandled === drainCount) {
    send({ type: "drain-handled" });
  }
});

let cpuAtStart: NodeJS.CpuUsage | undefined;

async function handle(request: Request): Promise<unknown> {
  switch (request.op) {
    case "start": {
      latencyFrom = request.latencyFrom;
      drainCount = request.drainCount;
      const cpuBefore = process.cpuUsage();
      const startAt = wallClock();
      await consumer.start();
      const startedAt = wallClock();
      cpuAtStart = process.cpuUsage();
      const startCpu = process.cpuUsage(cpuBefore);
      return { startAt, startedAt, startCpuMs: (startCpu.user + startCpu.system) / 1000, handledAtStart: drainHandled };
    }
    case "cpu": {
      // process.cpuUsage covers every thread of the process (taskpool's heartbeat thread included).
      const { user, system } = process.cpuUsage(cpuAtStart);
      return { userMs: user / 1000, systemMs: system / 1000 };
    }
    case "starts":
      return { n: startedN, at: startedAt };
    case "stop":
      await consumer.stop();
      return null;
  }
}

process.on("message", (request: Request) => {
  handle(request).then(
    (result) => send({ type: "reply", id: request.id, result }, request.op === "stop" ? () => process.exit(0) : undefined),
    (error: Error) => send({ type: "reply", id: request.id, error: error.stack ?? String(error) }),
  );
});

await consumer.prepare();
send({ type: "ready" });
