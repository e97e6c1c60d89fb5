import { Worker as Thread } from "node:worker_threads";
import { monotonicMs } from "../core/clock.js";
import type { WorkerBeat } from "../core/worker.js";
import type { DatabaseConfig } from "../store/open-store.js";
import type { Store } from "../store/store.js";

/** A lease the worker wants renewed, until `renewUntil` (monotonicMs(); the task's timeout) if set. */
export interface HeldLease {
  taskId: number;
  leaseToken: string;
  renewUntil: number | null;
}

export interface HeartbeatState {
  beat: Omit<WorkerBeat, "leases">;
  leases: HeldLease[];
}

/**
 * A lease a beat's answer names, lost or renewed. The token says which run of the task it was: by the
 * time the answer arrives the worker may be running the same task again under a new lease.
 */
export interface LeaseRef {
  taskId: number;
  leaseToken: string;
}

/** The leases of `beat` among the task ids the store reported lost. */
function lostLeases(beat: WorkerBeat, lost: number[]): LeaseRef[] {
  const ids = new Set(lost);
  return (beat.leases ?? []).filter((l) => ids.has(l.taskId));
}

export interface HeartbeatEvents {
  /** Leases the store says this worker no longer holds. */
  onLost(leases: LeaseRef[]): void;
  /**
   * A beat got through: `leases`, those it listed that the store did not report lost (after onLost),
   * now run for a lease's length from `sentAt` (monotonicMs(): when it was sent). Only those: the
   * heartbeat thread beats with the state last posted to it, which may not list a lease just claimed.
   */
  onRenewed(sentAt: number, leases: LeaseRef[]): void;
  /** A beat failed, or is still unanswered when the next is due; `sentAt` (monotonicMs()): when it was sent. */
  onError(error: Error, sentAt: number): void;
  onRecovered(): void;
}

/**
 * Sends the worker's heartbeat (registry row + lease renewals) every interval, reading the worker's
 * state when it beats: a task starting or finishing costs nothing here but a call to changed().
 */
export interface Heartbeats {
  /** Resolves once the first heartbeat went out. */
  readonly ready: Promise<void>;
  /** The worker's state changed (a task started or finished); `now`: tell the heartbeats before returning. */
  changed(now?: boolean): void;
  stop(): Promise<void>;
}

/**
 * The beat to send now. A lease past its task's timeout is no longer renewed: if the handler never
 * returns, the lease runs out and the coordinator gives the task to someone else. Otherwise the beat
 * lists every lease the worker holds, and says so (`allLeases`): a task leased to this worker that it
 * does not know of (its claim's answer was lost) then goes back to the pool well before its lease runs out.
 */
function beatOf(state: HeartbeatState, now: number): WorkerBeat {
  const renewed = state.leases.filter((l) => l.renewUntil === null || l.renewUntil > now);
  return { ...state.beat, leases: renewed.map(({ taskId, leaseToken }) => ({ taskId, leaseToken })), allLeases: renewed.length === state.leases.length };
}

/**
 * Beats every interval: each beat sends the state's beat and reports lost leases, an error, or the
 * first success after errors. stop() waits for a beat in flight, so that it lands before the worker's
 * shutdown (one landing after is refused, being of the run that shut down: see Worker.runId). The
 * heartbeat thread and InProcessHeartbeats each run one.
 *
 * One beat at a time: a beat still unanswered when the next is due (a transport retrying it for
 * longer than the interval) is reported as failing, from when it was sent, and goes on; none starts
 * beside it. Waiting for its answer, the worker learnt of the failure only when the retries ended,
 * and fenced its handlers that much past their leases; and a second beat sent beside it could land
 * after stop().
 */
export class BeatLoop {
  private failing = false;
  private beating: Promise<void> = Promise.resolve();
  /** When the beat in flight was sent (monotonicMs()), null when none is. */
  private sentAt: number | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly store: Pick<Store, "workerHeartbeat">,
    private readonly state: () => HeartbeatState,
    private readonly events: HeartbeatEvents,
  ) {}

  async beat(): Promise<void> {
    const sentAt = monotonicMs();
    this.sentAt = sentAt;
    try {
      const sent = beatOf(this.state(), sentAt);
      const { lost } = await this.store.workerHeartbeat(sent);
      if (this.failing) this.events.onRecovered();
      this.failing = false;
      if (lost.length > 0) this.events.onLost(lostLeases(sent, lost));
      const gone = new Set(lost);
      this.events.onRenewed(sentAt, (sent.leases ?? []).filter((l) => !gone.has(l.taskId)));
    } catch (error) {
      this.failing = true;
      this.events.onError(error as Error, sentAt);
    } finally {
      this.sentAt = null;
    }
  }

  start(intervalMs: number): void {
    this.timer = setInterval(() => {
      if (this.sentAt === null) {
        this.beating = this.beat();
        return;
      }
      this.failing = true;
      this.events.onError(new Error(`no answer to the heartbeat sent ${Math.round(monotonicMs() - this.sentAt)} ms ago`), this.sentAt);
    }, intervalMs);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.beating;
  }
}

/**
 * Beats from a timer on the worker's own event loop. Used when the pool cannot give a thread a
 * connection of its own (in-memory database, custom clock); a handler that blocks the loop blocks these too.
 */
export class InProcessHeartbeats implements Heartbeats {
  readonly ready = Promise.resolve();
  private readonly loop: BeatLoop;

  constructor(store: Store, state: () => HeartbeatState, intervalMs: number, events: HeartbeatEvents) {
    this.loop = new BeatLoop(store, state, events);
    this.loop.start(intervalMs);
  }

  changed(): void {}

  stop(): Promise<void> {
    return this.loop.stop();
  }
}

const POST_STATE_MS = 100;

/** What the heartbeat thread starts with: everything it needs, explicitly (it reads no environment). */
export interface ThreadData {
  database: DatabaseConfig;
  intervalMs: number;
  state: HeartbeatState;
}

/** Messages between the worker and its heartbeat thread. */
export type ToThread = { type: "state"; state: HeartbeatState } | { type: "stop" };
export type FromThread =
  | { type: "ready" }
  | { type: "lost"; leases: LeaseRef[] }
  | { type: "renewed"; sentAt: number; leases: LeaseRef[] }
  | { type: "error"; message: string; sentAt: number }
  | { type: "recovered" };

/**
 * Beats from a worker thread with its own database connection, so heartbeats keep going while a
 * CPU-bound handler holds the main event loop; lost leases are reported back and acted on as soon
 * as the loop is free again. A thread that ends unasked (it could not load, or crashed) is replaced
 * by `fallback()`: heartbeats from the event loop, since a worker that runs tasks without beating
 * would be declared dead and lose them all.
 */
export class ThreadHeartbeats implements Heartbeats {
  readonly ready: Promise<void>;
  private readonly thread: Thread;
  private readonly exited: Promise<void>;

  private posting: NodeJS.Timeout | null = null;
  private stopping = false;
  private replacement: Heartbeats | null = null;

  constructor(
    database: DatabaseConfig,
    private readonly state: () => HeartbeatState,
    intervalMs: number,
    events: HeartbeatEvents,
    fallback: () => Heartbeats,
    entry = new URL(`./heartbeat-thread.${import.meta.url.endsWith(".ts") ? "ts" : "js"}`, import.meta.url),
  ) {
    const workerData: ThreadData = { database, intervalMs, state: state() };
    this.thread = entry.pathname.endsWith(".ts")
      ? // Running from TypeScript sources (tests, tsx): the thread registers the same loader first.
        new Thread(`import("tsx/esm/api").then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); })`, { eval: true, workerData })
      : new Thread(entry, { workerData });
    this.exited = new Promise((resolve) => this.thread.once("exit", () => resolve()));
    this.ready = new Promise((resolve) => {
      this.thread.on("message", (msg: FromThread) => msg.type === "ready" && resolve());
      void this.exited.then(() => {
        if (this.stopping) return resolve();
        this.replacement = fallback();
        void this.replacement.ready.then(resolve);
      });
    });
    this.thread.on("message", (msg: FromThread) => {
      if (msg.type === "lost") events.onLost(msg.leases);
      // monotonicMs() reads the process's monotonic clock: the thread's sentAt is comparable here.
      else if (msg.type === "renewed") events.onRenewed(msg.sentAt, msg.leases);
      else if (msg.type === "error") events.onError(new Error(msg.message), msg.sentAt);
      else if (msg.type === "recovered") events.onRecovered();
    });
    this.thread.on("error", (error) => events.onError(error as Error, monotonicMs()));
  }

  /**
   * Posts the state at most every POST_STATE_MS, not per task (posting to a thread costs more than
   * running a no-op task), except for new leases, which the thread must know before their handlers
   * run. A lease the thread learns of that much later is still renewed in time
   * (leases last at least two heartbeat intervals), and renewing one that just finished is refused
   * harmlessly.
   */
  changed(now = false): void {
    if (this.replacement) return this.replacement.changed(now);
    if (now) {
      this.post();
      return;
    }
    this.posting ??= setTimeout(() => this.post(), POST_STATE_MS);
  }

  private post(): void {
    if (this.posting) clearTimeout(this.posting);
    this.posting = null;
    this.thread.postMessage({ type: "state", state: this.state() } satisfies ToThread);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.posting) clearTimeout(this.posting);
    if (this.replacement) return this.replacement.stop();
    this.thread.postMessage({ type: "stop" } satisfies ToThread);
    const timeout = setTimeout(() => void this.thread.terminate(), 5000);
    await this.exited;
    clearTimeout(timeout);
  }
}
