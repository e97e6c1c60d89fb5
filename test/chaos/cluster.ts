import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect, type Taskpool } from "../../src/api/taskpool.js";
import type { TaskEvent } from "../../src/core/event.js";
import type { Task } from "../../src/core/task.js";
import { eventually } from "../helpers/logs.js";
import { killAll, startWorker, type WorkerProcess } from "../process/harness.js";
import { checkHistory, type History, type HistoryEntry, type HistorySummary } from "./history.js";

const CHAOS_WORKER = fileURLToPath(new URL("../fixtures/chaos-worker.ts", import.meta.url));
const COORDINATOR = fileURLToPath(new URL("../fixtures/coordinator-process.ts", import.meta.url));

/** Where the database under test is: a TestStore, or the private PostgreSQL. */
export interface Target {
  url: string;
  schema?: string;
}

/**
 * Worker processes on one database, each appending its history to a file of its own, with what the
 * scenarios do to them (kill, freeze) and what the checker needs at the end.
 */
export class ChaosCluster {
  readonly dir = mkdtempSync(join(tmpdir(), "taskpool-chaos-"));
  readonly workers = new Map<string, WorkerProcess>();
  /** Coordinator processes (their lines are the sweeps they ran as leader). */
  readonly coordinators = new Map<string, WorkerProcess>();
  /** Workers whose process was SIGKILLed (their last history lines may be lost). */
  readonly killed = new Set<string>();
  private next = 1;

  private constructor(
    readonly target: Target,
    /** The checked pool the test reads the database through, as an operator would. */
    readonly pool: Taskpool,
  ) {}

  static async open(target: Target): Promise<ChaosCluster> {
    return new ChaosCluster(target, await connect(target.url, { schema: target.schema, migrate: false }));
  }

  /** Enqueues `count` step tasks in batches. */
  async enqueueSteps(count: number, params: { steps: number; stepMs?: number }, batch = 1000): Promise<void> {
    for (let done = 0; done < count; done += batch) {
      const n = Math.min(batch, count - done);
      // Each death of its worker costs a task an attempt (poison-pill protection); in a storm a task
      // may be caught by several kills, and "all complete" is only owed while attempts remain.
      await this.pool.enqueueMany(Array.from({ length: n }, () => ({ taskType: "step", params, maxAttempts: 50 })));
    }
  }

  /** Starts a worker process; `env` overrides chaos-worker.ts's settings; `wrap` as in harness.ts's startWorker. */
  async startWorker(env: Record<string, string> = {}, id = `w${this.next++}`, wrap: string[] = []): Promise<WorkerProcess> {
    const p = await startWorker(this.target, id, { HISTORY_LOG: join(this.dir, `${id}.history.jsonl`), RUNTIME_LOG: join(this.dir, `${id}.runtime.log`), ...env }, CHAOS_WORKER, wrap);
    this.workers.set(id, p);
    return p;
  }

  /** Starts a coordinator process (test/fixtures/coordinator-process.ts). */
  async startCoordinator(id: string, env: Record<string, string> = {}): Promise<WorkerProcess> {
    const p = await startWorker(this.target, id, { RUNTIME_LOG: join(this.dir, `${id}.runtime.log`), ...env }, COORDINATOR);
    this.coordinators.set(id, p);
    return p;
  }

  /** SIGKILLs a worker or coordinator process and waits for it to be gone. */
  async kill(id: string): Promise<void> {
    const p = this.workers.get(id) ?? this.coordinators.get(id);
    if (!p) return;
    this.killed.add(id);
    p.child.kill("SIGCONT");
    p.child.kill("SIGKILL");
    await p.exited;
  }

  /** Workers still running (not killed, not exited). */
  live(): WorkerProcess[] {
    return [...this.workers.values()].filter((p) => p.child.exitCode === null && p.child.signalCode === null);
  }

  /** Workers that exited on their own: a crash, which no scenario expects. */
  crashed(): { id: string; code: number | null }[] {
    return [...this.workers.values(), ...this.coordinators.values()]
      .filter((p) => !this.killed.has(p.id) && p.child.exitCode !== null)
      .map((p) => ({ id: p.id, code: p.child.exitCode }));
  }

  /** Waits until no task is pending, claimed or running. */
  async drained(timeoutMs: number): Promise<void> {
    await eventually(
      async () => {
        const { byStatus } = await this.pool.counts();
        return (byStatus.pending ?? 0) + (byStatus.claimed ?? 0) + (byStatus.running ?? 0) === 0;
      },
      timeoutMs,
      "every task to end",
    );
  }

  /** Every task, its audit trail and every worker's history, read once the run is over. */
  async history(): Promise<History> {
    const tasks: Task[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.pool.list({}, { limit: 1000, order: "oldest", cursor });
      tasks.push(...page.tasks);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    const events = new Map<number, TaskEvent[]>();
    // A few reads at a time: thousands of tasks, but the shared database has other users.
    for (let i = 0; i < tasks.length; i += 16) {
      await Promise.all(tasks.slice(i, i + 16).map(async (t) => events.set(t.id, await this.pool.events(t.id))));
    }
    const log: HistoryEntry[] = [];
    for (const file of readdirSync(this.dir).filter((f) => f.endsWith(".history.jsonl"))) {
      for (const line of readFileSync(join(this.dir, file), "utf8").split("\n")) {
        // A SIGKILL can cut the last line short; whatever was complete stands.
        if (line.trim()) {
          try {
            log.push(JSON.parse(line));
          } catch {
            /* the torn last line of a killed worker */
          }
        }
      }
    }
    return { tasks, events, log, killed: this.killed };
  }

  /** Runs the checker over the finished run. */
  async check(): Promise<HistorySummary> {
    return checkHistory(await this.history());
  }

  /** The runtime's warn-and-above lines of one worker (for failure messages). */
  runtimeLog(id: string): string {
    try {
      return readFileSync(join(this.dir, `${id}.runtime.log`), "utf8");
    } catch {
      return "";
    }
  }

  async close(): Promise<void> {
    await killAll([...this.workers.values(), ...this.coordinators.values()]);
    await this.pool.close().catch(() => {});
    rmSync(this.dir, { recursive: true, force: true });
  }
}
