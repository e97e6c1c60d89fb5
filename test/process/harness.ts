import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { eventually } from "../helpers/logs.js";
import type { TestStore } from "../helpers/stores.js";
import { script } from "../helpers/processes.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/worker-process.ts", import.meta.url));

/** A worker process under test, with the JSON lines it printed. */
export interface WorkerProcess {
  id: string;
  child: ChildProcess;
  lines: Record<string, unknown>[];
  /** Waits until a printed line matches. */
  waitFor(match: Record<string, unknown>, timeoutMs?: number): Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
}

export const FAST = { HEARTBEAT_INTERVAL_MS: "200", POLL_INTERVAL_MS: "200", LEASE_SECONDS: "5" };

/**
 * Starts a worker process (by default test/fixtures/worker-process.ts) and waits until it is claiming.
 * `wrap` runs it through a command that execs it (`ip netns exec <ns>`), so the pid is still node's.
 */
export async function startWorker(handle: Pick<TestStore, "url" | "schema">, id: string, env: Record<string, string>, fixture = FIXTURE, wrap: string[] = []): Promise<WorkerProcess> {
  const [command, ...args] = [...wrap, process.execPath, script(fixture)];
  const child = spawn(command, args, {
    env: { ...process.env, ...FAST, TASKPOOL_URL: handle.url, TASKPOOL_SCHEMA: handle.schema ?? "", WORKER_ID: id, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines: Record<string, unknown>[] = [];
  let buffer = "";
  child.stdout!.on("data", (chunk) => {
    buffer += chunk.toString();
    const parts = buffer.split("\n");
    buffer = parts.pop() as string;
    for (const p of parts) if (p.trim()) lines.push(JSON.parse(p));
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const proc: WorkerProcess = {
    id,
    child,
    lines,
    exited,
    waitFor: (match, timeoutMs = 20_000) =>
      eventually(() => lines.find((l) => Object.entries(match).every(([k, v]) => l[k] === v)), timeoutMs, `${id} to print ${JSON.stringify(match)}`),
  };
  try {
    await proc.waitFor({ event: "ready" }, 30_000);
  } catch (error) {
    // Not yet on any kill list: left running, it would work on through the tests after this one.
    await killAll([proc]);
    throw error;
  }
  return proc;
}

/** Kills whatever is still running at the end of a test. */
export async function killAll(procs: WorkerProcess[]): Promise<void> {
  for (const p of procs) {
    if (p.child.exitCode === null && p.child.signalCode === null) {
      p.child.kill("SIGCONT");
      p.child.kill("SIGKILL");
      await p.exited;
    }
  }
}
