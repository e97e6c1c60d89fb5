import { Worker as Thread } from "node:worker_threads";
import type { WorkerBeat } from "../core/worker.js";
import type { DatabaseConfig } from "../store/open-store.js";
import type { Store } from "../store/store.js";

/** A lease the worker wants renewed, until `renewUntil` (epoch ms; the task's timeout) if set. */
export interface HeldLease {
  taskId: number;
  leaseToken: string;
  renewUntil: number | null;
}

export interface HeartbeatState {
  beat: Omit<WorkerBeat, "leases">;
  leases: HeldLease[];
}

export interface HeartbeatEvents {
  /** Leases the store says this worker no longer holds. */
  onLost(taskIds: number[]): void;
  onError(error: Error): void;
  onRecovered(): void;
}

/** Sends the worker's heartbeat (registry row + lease renewals) every interval. */
export interface Heartbeats {
  /** Resolves once the first heartbeat went out. */
  readonly ready: Promise<void>;
  update(state: HeartbeatState): void;
  stop(): Promise<void>;
}

/**
 * The beat to send now. A lease past its task's timeout is no longer renewed: if the handler never
 * returns, the lease runs out and the coordinator gives the task to someone else.
 */
export function beatOf(state: HeartbeatState, now: number): WorkerBeat {
  return {
    ...state.beat,
    leases: state.leases.filter((l) => l.renewUntil === null || l.renewUntil > now).map(({ taskId, leaseToken }) => ({ taskId, leaseToken })),
  };
}

/**
 * Beats from a timer on the worker's own event loop. Used when the pool cannot give a thread a
 * connection of its own (in-memory database, custom clock); a handler that blocks the loop blocks these too.
 */
export class InProcessHeartbeats implements Heartbeats {
  readonly ready = Promise.resolve();
  private state: HeartbeatState;
  private readonly timer: NodeJS.Timeout;
  private failing = false;

  constructor(store: Store, initial: HeartbeatState, intervalMs: number, events: HeartbeatEvents) {
    this.state = initial;
    this.timer = setInterval(async () => {
      try {
        const { lost } = await store.workerHeartbeat(beatOf(this.state, Date.now()));
        if (this.failing) events.onRecovered();
        this.failing = false;
        if (lost.length > 0) events.onLost(lost);
      } catch (error) {
        this.failing = true;
        events.onError(error as Error);
      }
    }, intervalMs);
  }

  update(state: HeartbeatState): void {
    this.state = state;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
  }
}

/** What the heartbeat thread starts with: everything it needs, explicitly (it reads no environment). */
export interface ThreadData {
  database: DatabaseConfig;
  intervalMs: number;
  state: HeartbeatState;
}

/** Messages between the worker and its heartbeat thread. */
export type ToThread = { type: "state"; state: HeartbeatState } | { type: "stop" };
export type FromThread = { type: "ready" } | { type: "lost"; taskIds: number[] } | { type: "error"; message: string } | { type: "recovered" };

/**
 * Beats from a worker thread with its own database connection, so heartbeats keep going while a
 * CPU-bound handler holds the main event loop; lost leases are reported back and acted on as soon
 * as the loop is free again.
 */
export class ThreadHeartbeats implements Heartbeats {
  readonly ready: Promise<void>;
  private readonly thread: Thread;
  private readonly exited: Promise<void>;

  constructor(database: DatabaseConfig, initial: HeartbeatState, intervalMs: number, events: HeartbeatEvents) {
    const workerData: ThreadData = { database, intervalMs, state: initial };
    const entry = new URL(`./heartbeat-thread.${import.meta.url.endsWith(".ts") ? "ts" : "js"}`, import.meta.url);
    this.thread = entry.pathname.endsWith(".ts")
      ? // Running from TypeScript sources (tests, tsx): the thread registers the same loader first.
        new Thread(`import("tsx/esm/api").then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); })`, { eval: true, workerData })
      : new Thread(entry, { workerData });
    this.exited = new Promise((resolve) => this.thread.once("exit", () => resolve()));
    this.ready = new Promise((resolve) => {
      this.thread.on("message", (msg: FromThread) => msg.type === "ready" && resolve());
      void this.exited.then(resolve);
    });
    this.thread.on("message", (msg: FromThread) => {
      if (msg.type === "lost") events.onLost(msg.taskIds);
      else if (msg.type === "error") events.onError(new Error(msg.message));
      else if (msg.type === "recovered") events.onRecovered();
    });
    this.thread.on("error", (error) => events.onError(error as Error));
  }

  update(state: HeartbeatState): void {
    this.thread.postMessage({ type: "state", state } satisfies ToThread);
  }

  async stop(): Promise<void> {
    this.thread.postMessage({ type: "stop" } satisfies ToThread);
    const timeout = setTimeout(() => void this.thread.terminate(), 5000);
    await this.exited;
    clearTimeout(timeout);
  }
}
