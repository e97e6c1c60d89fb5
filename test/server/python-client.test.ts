import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import { postgresKind, sqliteKind } from "../helpers/stores.js";
import { type Body, useServer } from "./harness.js";

const CLIENT_DIR = new URL("../../clients/python/", import.meta.url).pathname;
const CHAIN_WORKER = `${CLIENT_DIR}tests/chain_worker.py`;
/** How many tests clients/python/tests holds: fewer ran means some were lost (an import error, a renamed file). */
const PYTHON_TESTS = 38;

/** The Python worker's hash chain (chain_worker.py), computed here to check its result. */
function hashChain(seed: string, rounds: number): string {
  let digest = seed;
  for (let index = 0; index < rounds; index++) {
    let value: Buffer = Buffer.from(`${digest}:${index}`);
    for (let i = 0; i < 1000; i++) value = createHash("sha256").update(value).digest();
    digest = value.toString("hex");
  }
  return digest;
}

/** Every Python process a test started: afterEach kills those still running (a test that timed out left its suite running for good). */
const started = new Set<ChildProcessWithoutNullStreams>();
afterEach(() => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  started.clear();
});

/** A Python process whose JSON lines can be awaited one by one. */
class PythonProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly events: Body[] = [];
  private readonly waiters: { predicate: (e: Body) => boolean; resolve: (e: Body) => void }[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;

  constructor(args: string[], env: Record<string, string> = {}) {
    this.child = spawn("python3", args, { cwd: CLIENT_DIR, env: { ...process.env, ...env, PYTHONUNBUFFERED: "1" } });
    started.add(this.child);
    let stderr = "";
    this.child.stderr.on("data", (chunk) => (stderr += chunk));
    createInterface({ input: this.child.stdout }).on("line", (line) => {
      if (!line.startsWith("{")) return;
      const event = JSON.parse(line) as Body;
      this.events.push(event);
      for (const w of [...this.waiters]) {
        if (w.predicate(event)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(event);
        }
      }
    });
    this.exited = new Promise((resolve) => this.child.on("exit", (code, signal) => resolve({ code, signal, stderr })));
  }

  /** The first event (printed already or to come) that matches. */
  next(predicate: (e: Body) => boolean): Promise<Body> {
    const seen = this.events.find(predicate);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => this.waiters.push({ predicate, resolve }));
  }
}

describe.each([sqliteKind, postgresKind])("the Python client against a real server on $name", (kind) => {
  const s = useServer(kind, { auth: "keys", rateLimitPerMinute: false, dashboard: false, coordinator: { staleAfterMs: 10_000, deadAfterMs: 20_000 } });

  it("passes its unittest suite (clients/python/tests)", async () => {
    const { key } = await s.pool.createApiKey({ scope: "admin", name: "python-tests" });
    // Spawned, not spawnSync: this process serves the API the tests call. The server's clock keeps up with
    // real time meanwhile, as a server's does: a lease must age for a heartbeat to find it unknown to its worker.
    const run = new PythonProcess(["-m", "unittest", "discover", "-s", "tests", "-v"], { TASKPOOL_URL: s.url, TASKPOOL_API_KEY: key });
    const ticking = setInterval(() => s.clock.advance(50), 50);
    const { code, stderr } = await run.exited.finally(() => clearInterval(ticking));
    expect(stderr, stderr).toMatch(new RegExp(`Ran ${PYTHON_TESTS} tests in [\\d.]+s\\s+OK`));
    expect(code).toBe(0);
  }, 60_000);

  it("a Python worker killed with SIGKILL mid-task: the sweep takes the task back, another resumes from its checkpoint; the dead one's lease is refused", async () => {
    const { key } = await s.pool.createApiKey({ scope: "worker", name: "python-workers" });
    const admin = (await s.pool.createApiKey({ scope: "admin", name: "operator" })).key;
    const rounds = 30;
    const seed = `seed-${kind.name}`;
    const created = await s.call("POST", "/api/tasks", { task_type: "hash_chain", params: { rounds, seed }, max_attempts: 3 }, { key: admin });
    expect(created.status).toBe(201);
    const id = created.body.task.id as number;
    const worker = (name: string) => new PythonProcess([CHAIN_WORKER, s.url, name, "--api-key", key, "--lease-seconds", "5", "--heartbeat", "0.1", "--max-tasks", "1"]);

    const first = worker("py-first");
    const started = await first.next((e) => e.event === "started");
    expect(started).toMatchObject({ task_id: id, attempt: 1, resumed_from: 0 });
    await first.next((e) => e.event === "checkpoint" && e.step >= 4);
    first.child.kill("SIGKILL");
    expect((await first.exited).signal).toBe("SIGKILL");
    const held = (await s.call("GET", `/api/tasks/${id}`, undefined, { key: admin })).body.task;
    expect(held).toMatchObject({ status: "running", worker_id: "py-first" });
    const resumeAt = held.checkpoint.step as number;
    expect(resumeAt).toBeGreaterThanOrEqual(4);
    expect(resumeAt).toBeLessThan(rounds);

    // Its heartbeats stopped: past the dead threshold one sweep takes the task back.
    s.clock.advance(30_000);
    const swept = await s.call("POST", "/api/tasks/recover-stale", undefined, { key: admin });
    expect(swept.body).toMatchObject({ dead_workers: ["py-first"], requeued: [id] });
    const requeued = (await s.call("GET", `/api/tasks/${id}`, undefined, { key: admin })).body.task;
    expect(requeued).toMatchObject({ status: "pending", worker_id: null, checkpoint: { step: resumeAt } });
    // A retry waits out its backoff; on a manual clock that means moving the clock past it.
    s.clock.set(new Date(Math.max(s.clock.now().getTime(), Date.parse(requeued.scheduled_for)) + 1000));

    const stale = { worker_id: "py-first", lease_token: started.lease_token };
    const refusal = {
      success: false,
      error: "lease_lost",
      message: `Task ${id} is no longer leased to this worker with this token; stop working on it, its result will not be accepted`,
    };
    expect(await s.call("POST", `/api/tasks/${id}/complete`, { ...stale, result: { digest: "forged" } }, { key })).toMatchObject({ status: 409, body: refusal });

    const second = worker("py-second");
    expect(await second.next((e) => e.event === "started")).toMatchObject({ task_id: id, attempt: 2, resumed_from: resumeAt });
    const finished = await second.next((e) => e.event === "finished");
    const exit = await second.exited;
    expect(exit.code, exit.stderr).toBe(0);
    expect(second.events.at(-1)).toEqual({ event: "exited", processed: 1 });
    const expected = hashChain(seed, rounds);
    expect(finished.digest).toBe(expected);

    const shown = (await s.call("GET", `/api/tasks/${id}`, undefined, { key: admin })).body;
    expect(shown.task).toMatchObject({ status: "completed", attempts: 2, worker_id: "py-second", result: { digest: expected, resumed_from: resumeAt }, checkpoint: { step: rounds } });
    const timeline = shown.events.map((e: Body) => `${e.event}:${e.to_worker_id ?? e.from_worker_id ?? ""}`);
    // The worker claims and starts in one request: one 'claimed' event that says so.
    expect(timeline.slice(0, 3)).toEqual(["created:", "claimed:py-first", "checkpoint:py-first"]);
    expect(shown.events[1].data).toEqual({ attempt: 1, started: true });
    expect(timeline.filter((e: string) => e.startsWith("started:"))).toEqual([]);
    expect(timeline.filter((e: string) => e.startsWith("checkpoint:py-second"))).toHaveLength(rounds - resumeAt);
    expect(timeline.slice(-2)).toEqual(["checkpoint:py-second", "completed:py-second"]);
    expect(timeline).toContain("claimed:py-second");
    // Still refused after the completion: the dead worker's token never comes back to life.
    expect(await s.call("POST", `/api/tasks/${id}/checkpoint`, { ...stale, checkpoint: { step: 0 } }, { key })).toMatchObject({ status: 409, body: { error: "lease_lost" } });
  }, 30_000);
});
