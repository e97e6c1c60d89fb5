/**
 * The worker runtime.
 *
 * One claim loop fills free slots and a buffer of ready tasks in batches (see Prefetch.claimLimit),
 * then sleeps until the poll interval passes, a notification says tasks of its roles arrived, or a
 * running task finishes. Each claimed task runs its handler with an AbortController whose signal fires when:
 *   - the heartbeat learns the lease is gone (recovered by the coordinator, or the task cancelled),
 *   - a write through the context is refused with lease_lost,
 *   - the task's timeout passes (the lease then stops being renewed, so a handler that never
 *     returns loses the task to the coordinator),
 *   - shutdown's grace period ends.
 * Heartbeats run apart from the handlers (a worker thread by default), so CPU-bound handlers do not
 * make a live worker look dead. Any failure to reach the database is logged and retried with
 * backoff; the worker stops claiming meanwhile but never crashes.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { inspect } from "node:util";
import { pino, type Logger } from "pino";
import { monotonicMs } from "../core/clock.js";
import { counted } from "../core/counted.js";
import { InvalidTransitionError, isRefusal, LeaseLostError, retryAfterMs, TaskNotFoundError, TaskpoolError, ValidationError } from "../core/errors.js";
import { truncatedMessage } from "../core/schemas.js";
import { cancelledTasks } from "../core/notices.js";
import { ofAnotherLiveProcess } from "../core/process-alive.js";
import { type ClaimedTask, type EnqueueInput, inStateUnder, type Json, type TaskStatus } from "../core/task.js";
import { DEFAULT_DEAD_AFTER_MS, DEFAULT_STALE_AFTER_MS } from "../core/worker.js";
import { WriteBatcher } from "../api/write-batcher.js";
import type { DatabaseConfig } from "../store/open-store.js";
import type { Store } from "../store/store.js";
import { type Heartbeats, type HeartbeatState, InProcessHeartbeats, type LeaseRef, ThreadHeartbeats } from "./heartbeats.js";
import { resolveWorkerOptions, type ResolvedWorkerOptions, type WorkerOptions } from "./options.js";
import { Prefetch } from "./prefetch.js";
import { RunAbort } from "./run-abort.js";
import { createTaskContext } from "./task-context.js";

/** Throw this from a handler to fail the task for good, whatever attempts remain. */
export class NonRetryableError extends Error {
  override name = "NonRetryableError";
}

/**
 * The reason of `ctx.stopping` once the worker has begun a graceful stop, thrown by
 * `ctx.stopping.throwIfAborted()`. A handler that ends by throwing it during a stop gives its task back
 * at once: released, checkpoint kept, no attempt charged.
 */
export class WorkerStoppingError extends Error {
  override name = "WorkerStoppingError";
}

interface Running {
  task: ClaimedTask;
  /**
   * When this process asked for it (monotonicMs(), as every deadline here: a wall-clock step must not
   * stop a lease's renewal early or keep it going late): its lease runs from about then until a heartbeat renews it.
   */
  claimedAt: number;
  abort: RunAbort;
  done: Promise<void>;
  /** The handler has returned or thrown: what is left is writing its outcome, never to be released. */
  returned: boolean;
  renewUntil: number | null;
  /** When the last heartbeat that renewed its lease was sent (monotonicMs()): see leaseMayHaveRunOut. */
  renewedAt: number | null;
  timeout: NodeJS.Timeout | null;
  /**
   * The lease is known gone: a beat was told so, or the task's cancel was announced. Not one this worker
   * fenced itself (beats failing): that lease may still be held, and a beat that leaves it out takes it back.
   */
  gone: boolean;
}

/** The stops a signal began in this process, one per worker handling signals: see installSignalHandlers. */
const signalledStops: Promise<boolean>[] = [];

/** How old the worker's knowledge of its roles' recovery policies may get (see readFailPolicies). */
const FAIL_POLICIES_MAX_AGE_MS = 30_000;

/**
 * Resolves after `ms`, or at once when `signal` fires (or has fired). The listener goes when the
 * timer fires: the signal is the worker's own (lastTry), and each retried write left one on it for the
 * worker's life, hundreds an outage.
 */
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });

/** Whether `work` settled before the monotonic `deadline`; it is not awaited past it. */
async function settledBy(deadline: number, work: Promise<unknown> | null | undefined): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, deadline - monotonicMs()))));
  const settled = await Promise.race([Promise.resolve(work).then(() => true, () => true), late]);
  clearTimeout(timer);
  return settled;
}

export class Worker {
  readonly id: string;
  readonly options: ResolvedWorkerOptions;
  private readonly logger: Logger;
  /** Completions and failures of concurrent handlers share a statement (group commit). */
  private readonly outcomes: WriteBatcher;
  private readonly running = new Map<number, Running>();
  /** When the first failing heartbeat was sent (null while they get through): see fenceExpiredLeases. */
  private beatsFailingSince: number | null = null;
  /** Set while beats fail: fences the next lease to run out, at its end (see fenceExpiredLeases). */
  private fenceTimer: NodeJS.Timeout | null = null;
  /** The roles whose type recovers by failing: never claimed into the buffer (see claimScope). */
  private failPolicyRoles = new Set<string>();
  private failPoliciesReadAt = -Infinity;
  private tasksProcessed = 0;
  /** Handlers running; `running` also holds the tasks in `ready` and those whose outcome is being written. */
  private handling = 0;
  /** Claimed tasks waiting for a free slot, in claim order. */
  private readonly ready: Running[] = [];
  private readonly prefetch: Prefetch;
  private state: "idle" | "running" | "stopping" | "stopped" = "idle";
  /** Set while the claim loop waits (see idle). */
  private resumeLoop: (() => void) | null = null;
  private wokenWhileBusy = false;
  private loop: Promise<void> | null = null;
  private heartbeats: Heartbeats | null = null;
  private unsubscribe: (() => Promise<void>) | null = null;
  private signalHandler: ((signal: NodeJS.Signals) => void) | null = null;
  /** Ends shutdown's grace period early (a second SIGTERM); set while the grace period runs. */
  private endGrace: (() => void) | null = null;
  private graceCut = false;
  /** Fired when a graceful stop begins: every run's ctx.stopping (one for the worker, nothing per task). */
  private readonly stoppingSignal = new AbortController();
  private starting: Promise<void> | null = null;
  private stopping: Promise<void> | null = null;
  /** Fired when a stop's grace period is over: outcomes still being written get one last try, now. */
  private readonly lastTry = new AbortController();
  /** The tasks a stop could neither record nor give back: still leased to this worker. */
  private readonly leftLeased = new Set<number>();
  /** Whether a stop could not mark the worker inactive in the registry. */
  private leftActive = false;
  /**
   * Sent with every beat. The registry refuses a beat of this run once the worker has shut down,
   * whenever it arrives: over HTTP the server stamps a beat when it writes it, so a beat sent before
   * the shutdown but landing after (held up, or sent again by the transport) revived the worker. No
   * wait or cancel here can prevent that (a request already on the wire cannot be recalled), and
   * without the run the server cannot tell it from a restart, whose first beat is no different. Sent
   * with the shutdown too: one landing after another run registered under the id leaves that run be.
   */
  private readonly runId = randomUUID();
  /** The options' interval, or the shorter one a server asks for (see followServerInterval). */
  private heartbeatIntervalMs: number;
  private readonly heartbeatIntervalGiven: boolean;

  /**
   * `store` is the pool's checked store. `heartbeatDatabase`, when given, is where the heartbeat
   * thread opens its own connection (the same database and settings); without it heartbeats run on
   * this event loop.
   */
  constructor(
    private readonly store: Store,
    options: WorkerOptions,
    private readonly heartbeatDatabase: DatabaseConfig | null = null,
    /**
     * What else a signal stops before the process exits (the coordinators made on this worker's pool):
     * left running, a coordinator ended with the process held its leadership for its lease (45 s),
     * and no dead worker was recovered meanwhile.
     */
    private readonly stopOthersOnSignal: () => Promise<unknown> = async () => {},
  ) {
    this.options = resolveWorkerOptions(options, store.dialect === "sqlite" && !store.remote);
    this.heartbeatIntervalMs = this.options.heartbeatIntervalMs;
    this.heartbeatIntervalGiven = options.heartbeatIntervalMs !== undefined;
    this.id = this.options.workerId;
    this.logger = (options.logger ?? pino({ name: "taskpool" })).child({ workerId: this.id });
    this.outcomes = new WriteBatcher(store);
    this.prefetch = new Prefetch(this.options.concurrency, this.options.prefetch);
  }

  /** Registers, starts heartbeats and the claim loop; resolves once the worker is claiming. */
  start(): Promise<void> {
    if (this.state !== "idle") {
      return Promise.reject(new TaskpoolError("invalid_state", `Worker ${this.id} was already ${this.state === "running" ? "started" : "stopped"}: a worker runs once; make another with pool.worker()`));
    }
    this.state = "running";
    this.starting = this.begin();
    return this.starting;
  }

  /**
   * A stop gives up waiting for a start at its deadline (see shutdown), and a start answered after
   * it must do nothing more: it went on to register and begin heartbeats, the worker shown active
   * again after its shutdown and beating for ever. Each step after a wait looks first.
   */
  private async begin(): Promise<void> {
    try {
      await this.register();
    } catch (error) {
      // Refused (an option only the store checks): nothing was registered or started. Left running, the
      // worker held its id in the pool, could not start again, and its stop said it stayed registered.
      if (this.state === "running") this.state = "stopped";
      throw error;
    }
    if (this.state !== "running") return;
    const events = {
      onLost: (leases: LeaseRef[]) => void this.leasesLost(leases),
      onRenewed: (sentAt: number, leases: LeaseRef[]) => {
        for (const { taskId, leaseToken } of leases) {
          const entry = this.running.get(taskId);
          if (entry?.task.leaseToken === leaseToken) entry.renewedAt = Math.max(entry.renewedAt ?? sentAt, sentAt);
        }
        // Tasks held ready past their lease's end (see startReady) may start now: the beat renewed them.
        this.startReady();
      },
      onError: (error: Error, sentAt: number) => {
        // One warning per outage, not one per interval while it lasts (a minute's outage flooded the
        // log); its end is said at info, with how long it lasted.
        if (this.beatsFailingSince === null) this.logger.warn({ err: error.message }, "Heartbeat failed; retrying at the next interval");
        else this.logger.debug({ err: error.message }, "Heartbeat failed again");
        this.beatsFailingSince ??= sentAt;
        this.fenceExpiredLeases();
      },
      onRecovered: () => {
        const failedFor = this.beatsFailingSince === null ? "" : `, after failing for ${Math.round((monotonicMs() - this.beatsFailingSince) / 1000)} s`;
        this.beatsFailingSince = null;
        this.fenceExpiredLeases(); // only clears its timer now
        this.logger.info(`Heartbeats reach ${this.reaches} again${failedFor}`);
        // The database (or server) is back: a claim loop backing off after failed claims (up to 30 s) tries now.
        this.wake();
      },
    };
    const thread = this.options.heartbeatThread === false ? null : this.heartbeatDatabase;
    if (this.options.heartbeatThread === true && thread === null) {
      this.logger.warn("heartbeatThread: this pool cannot open a second connection (in-memory or custom clock); beating from the event loop");
    }
    const state = () => this.heartbeatState();
    const inProcess = () => new InProcessHeartbeats(this.store, state, this.heartbeatIntervalMs, events);
    this.heartbeats =
      thread !== null
        ? new ThreadHeartbeats(thread, state, this.heartbeatIntervalMs, events, () => {
            this.logger.error("The heartbeat thread ended; beating from the event loop instead");
            // Its error was the thread's, not the database's: leases are renewed again from here on.
            this.beatsFailingSince = null;
            this.fenceExpiredLeases(); // only clears its timer now
            return inProcess();
          })
        : inProcess();
    // Claim only once heartbeats flow: a worker that claims but never beats would look dead.
    await this.heartbeats.ready;
    if (this.state !== "running") return;
    const unsubscribe = await this.store
      .subscribe((types) => {
        for (const id of cancelledTasks(types)) this.cancelled(id);
        if (types.length === 0 || types.some((t) => this.options.roles.includes(t))) this.wake();
      })
      .catch((error) => {
        this.logger.warn({ err: error.message }, "No wake-up notifications; relying on polling");
        return null;
      });
    if (this.state !== "running") {
      await unsubscribe?.().catch(() => {});
      return;
    }
    this.unsubscribe = unsubscribe;
    if (this.options.handleSignals) this.installSignalHandlers();
    this.logger.info({ roles: this.options.roles, concurrency: this.options.concurrency }, `Starting worker ${this.id} for roles: ${this.options.roles.join(", ")}`);
    // Not refused: one handlers object may serve several workers of different roles.
    const unclaimed = Object.keys(this.options.handlers).filter((type) => !this.options.roles.includes(type));
    if (unclaimed.length > 0) this.logger.warn(`Handlers for ${unclaimed.join(", ")} will not run here: not among this worker's roles (${this.options.roles.join(", ")}); add them to roles to claim their tasks`);
    this.warnOfLongBeats();
    this.loop = this.claimLoop();
  }

  /**
   * Not refused: the coordinators' thresholds are theirs to raise, and the worker cannot read them. But
   * at their defaults a worker beating every 120 s or more is declared dead between beats, over and over,
   * and each task it runs is taken back and its result discarded; one beating every 60 s or more turns
   * stale between beats. Nothing else said why.
   */
  private warnOfLongBeats(): void {
    const interval = this.heartbeatIntervalMs;
    const dead = interval >= DEFAULT_DEAD_AFTER_MS;
    if (!dead && interval < DEFAULT_STALE_AFTER_MS) return;
    const outcome = dead
      ? `dead_after (${DEFAULT_DEAD_AFTER_MS / 1000} s) declares this worker dead between its beats and takes its tasks back, discarding their results`
      : `stale_after (${DEFAULT_STALE_AFTER_MS / 1000} s) marks this worker stale between its beats, and gives it no dead worker's task meanwhile`;
    this.logger.warn(
      `Heartbeats every ${interval / 1000} s: a coordinator at its default ${outcome}. Beat more often (heartbeatIntervalMs, HEARTBEAT_INTERVAL_MS), ` +
        `or run every coordinator and server with ${dead ? "--stale-after and --dead-after" : "--stale-after"} above two intervals (${2 * interval} ms)`,
    );
  }

  /** Graceful shutdown: stop claiming, let running tasks finish within the grace period, release the rest. */
  stop(graceMs = this.options.shutdownGraceMs): Promise<void> {
    this.stopping ??= this.shutdown(graceMs);
    return this.stopping;
  }

  /** Whether stop() has finished (or was called before start()). */
  get stopped(): boolean {
    return this.state === "stopped";
  }

  /** What the worker's calls go to, as its log lines name it. */
  private get reaches(): string {
    return this.store.remote === true ? "the taskpool server" : "the database";
  }

  /** Handlers running right now. */
  get load(): number {
    return this.handling;
  }

  /** First heartbeat, so the coordinator knows the worker before it claims; later beats retry. */
  private async register(): Promise<void> {
    await this.warnIfIdInUse();
    if (this.state !== "running") return;
    try {
      const { nextHeartbeatInSeconds } = await this.store.workerHeartbeat({ ...this.heartbeatState().beat, leases: [] });
      if (nextHeartbeatInSeconds !== undefined) this.followServerInterval(nextHeartbeatInSeconds * 1000);
    } catch (error) {
      if (isRefusal(error)) throw error; // bad options: retrying will not help
      this.logger.error({ err: (error as Error).message }, `Cannot reach ${this.reaches} to register; will keep trying`);
    }
  }

  /**
   * A server tells its HTTP workers how often to beat: half its coordinator's stale_after. A worker
   * beating less often is marked stale between beats, and one whose silences outlast dead_after is
   * declared dead, its tasks taken back (a server run with --stale-after 10000 --dead-after 20000,
   * say, and a worker at the default 30 s). Unless told an interval, the worker beats as often as the
   * server asks; told a longer one, it keeps it and says what follows.
   */
  private followServerInterval(askedMs: number): void {
    if (askedMs >= this.heartbeatIntervalMs) return;
    const asked = askedMs / 1000;
    if (!this.heartbeatIntervalGiven) {
      this.heartbeatIntervalMs = Math.max(10, Math.floor(askedMs));
      this.logger.info(`Heartbeats every ${asked} s, as the server asks (its coordinator's stale_after is ${2 * asked} s)`);
      return;
    }
    this.logger.warn(
      `Heartbeats every ${this.heartbeatIntervalMs / 1000} s, but the server asks for one every ${asked} s: its coordinator marks this worker stale between beats, ` +
        `and may declare it dead and take its tasks back. Set heartbeatIntervalMs (--heartbeat-interval, HEARTBEAT_INTERVAL_MS) to ${askedMs} or less, or leave it out to follow the server`,
    );
  }

  /**
   * Two live processes with one worker id pass for one worker: when either stops, its shutdown gives
   * back the other's running tasks too, and they run twice. A pool refuses a second live worker of
   * its own with the id; another process's cannot be refused (a restart after a crash reuses the id
   * while the dead one's record still looks alive), so the second one says so loudly at its start:
   * the record's process still runs on this host, or was heard from another host within two beats.
   */
  private async warnIfIdInUse(): Promise<void> {
    // Over HTTP a worker key may not list workers: then nothing is said.
    // Found by id among what the answer lists: a server of an earlier version ignores the filter and lists them all.
    const other = (await this.store.listWorkers({ workerId: this.id }).catch(() => ({ workers: [] }))).workers.find((w) => w.workerId === this.id);
    if (!other || !ofAnotherLiveProcess(other, this.heartbeatIntervalMs)) return;
    this.logger.warn(
      `Worker id ${this.id} is in use by another process (pid ${other.pid} on ${other.hostname ?? "an unknown host"}, heard ${other.secondsSinceHeartbeat} s ago): ` +
        "two live workers with one id give back each other's tasks when either stops, and those tasks run twice. Give each process its own id (WORKER_ID, --id), or leave it out for a generated one",
    );
  }

  private heartbeatState(): HeartbeatState {
    return {
      beat: {
        workerId: this.id,
        runId: this.runId,
        roles: this.options.roles,
        hostname: hostname(),
        pid: process.pid,
        version: this.options.version,
        capacity: this.options.concurrency,
        // Stopping, it takes no more work: said full, it is no coordinator's pick for a dead worker's task,
        // which would wait out the grace period reserved for it.
        currentLoad: this.state === "stopping" ? this.options.concurrency : this.handling,
        tasksProcessed: this.tasksProcessed,
        metadata: this.options.metadata,
      },
      // Not a lease known gone (see Running.gone) whose handler has yet to return: listed, each beat was
      // told it lost it again, and taskpool_lease_lost_total counted it once per beat.
      leases: [...this.running.values()].filter((r) => !r.gone).map((r) => ({ taskId: r.task.id, leaseToken: r.task.leaseToken, renewUntil: r.renewUntil })),
    };
  }

  private publishState(): void {
    this.heartbeats?.changed();
  }

  private async claimLoop(): Promise<void> {
    let failures = 0;
    let failingSince: number | null = null;
    // After a claim refused (by a rate limit, or outright), no claim before this time, whatever wakes the loop
    // meanwhile (a finished task, a notification): each would be refused again, and count against it.
    let resumeAt = 0;
    while (this.state === "running") {
      const backoff = resumeAt - monotonicMs();
      if (backoff > 0) {
        await this.idle(backoff);
        continue;
      }
      // A slot frees when its handler returns, while the outcome is still being written: the write
      // and the next claim overlap (see Prefetch.claimLimit).
      await this.readFailPolicies();
      const { taskTypes, limit: free } = this.claimScope(this.prefetch.claimLimit(this.handling, this.ready.length, this.running.size));
      let claimed = 0;
      if (free > 0) {
        const askedAt = monotonicMs();
        try {
          const tasks = await this.store.claim({ workerId: this.id, taskTypes, limit: free, leaseSeconds: this.options.leaseSeconds, start: true });
          if (failingSince !== null) this.logger.info(`Claims reach ${this.reaches} again, after failing for ${Math.round((monotonicMs() - failingSince) / 1000)} s`);
          failures = 0;
          failingSince = null;
          claimed = tasks.length;
          if (this.state !== "running") {
            // Answered as the worker stopped (a stop waits for a claim only so long): given back, never run.
            await Promise.all(tasks.map((task) => this.release(task)));
            break;
          }
          for (const task of tasks) this.admit(task, askedAt);
          // The heartbeat thread learns the new leases before any handler runs: a handler that
          // blocks the event loop must not keep its own lease from being renewed.
          this.heartbeats?.changed(true);
          this.startReady();
        } catch (error) {
          failures++;
          // A rate-limited key (over HTTP) is told when it may call again: sooner would be refused too.
          const retryAfter = retryAfterMs(error);
          const delay = Math.max(retryAfter, Math.min(30_000, 250 * 2 ** failures));
          // A refusal (over HTTP, a revoked key or one of the wrong scope) is no outage that ends by
          // itself: the worker does nothing until someone acts, so each one is said, at most twice a
          // minute once backed off, and wake-ups do not hasten the next. An outage is said once; its
          // end at info.
          const refused = isRefusal(error);
          if (refused) this.logger.error({ err: (error as Error).message }, `Claim refused (${error.code}); not claiming for ${delay} ms: this worker claims nothing until that is fixed`);
          else if (failingSince === null) this.logger.error({ err: (error as Error).message }, `Claim failed; not claiming for ${delay} ms`);
          else this.logger.debug({ err: (error as Error).message }, `Claim failed again; not claiming for ${delay} ms`);
          failingSince ??= monotonicMs();
          // Any other failure (the database out of reach) may end sooner: a wake-up then tries at once.
          if (retryAfter > 0 || refused) resumeAt = monotonicMs() + delay;
          else await this.idle(delay);
          continue;
        }
      }
      if (claimed > 0 && claimed === free) continue; // there may be more right away
      await this.idle();
    }
  }

  /**
   * What to claim of the `free` tasks the worker may take. A task is started as it is claimed, so a
   * task held in the buffer that its worker dies with is recovered as if it had run: an attempt, and
   * under the `fail` recovery policy, failed ("Worker died unexpectedly") without ever having run,
   * which defeats that policy (a thousand quick tasks can fill the buffer with slow ones). So the roles
   * whose type recovers by failing are claimed only for a slot free now, never into the buffer.
   */
  private claimScope(free: number): { taskTypes: string[]; limit: number } {
    const roles = this.options.roles;
    if (this.failPolicyRoles.size === 0) return { taskTypes: roles, limit: free };
    const idle = this.options.concurrency - this.handling - this.ready.length;
    if (idle > 0) return { taskTypes: roles, limit: Math.min(free, idle) };
    const buffered = roles.filter((role) => !this.failPolicyRoles.has(role));
    return { taskTypes: buffered, limit: buffered.length === 0 ? 0 : free };
  }

  /**
   * Reads which roles recover by failing (the latest registered version of their type says so) when
   * the last read is older than FAIL_POLICIES_MAX_AGE_MS: a registration changes them rarely. A read
   * that fails keeps what the last one found; the claim that follows meets the same outage and says so.
   */
  private async readFailPolicies(): Promise<void> {
    if (monotonicMs() - this.failPoliciesReadAt < FAIL_POLICIES_MAX_AGE_MS) return;
    this.failPoliciesReadAt = monotonicMs();
    try {
      const types = await this.store.listTaskTypes();
      this.failPolicyRoles = new Set(types.filter((t) => t.recoveryPolicy === "fail" && this.options.roles.includes(t.name)).map((t) => t.name));
    } catch {
      // Kept as they were.
    }
  }

  /**
   * Waits for the poll interval (or `ms`), a wake-up notification, a finished task or shutdown. A
   * wake-up that came while the loop was busy (say, a notification during a claim that had already
   * read the table) makes the next wait return at once: dropping it left new work waiting for the
   * next poll.
   */
  private idle(ms = this.options.pollIntervalMs): Promise<void> {
    if (this.state !== "running" || this.wokenWhileBusy) {
      this.wokenWhileBusy = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.resumeLoop?.(), ms);
      this.resumeLoop = () => {
        clearTimeout(timer);
        this.resumeLoop = null;
        resolve();
      };
    });
  }

  /** Ends the claim loop's wait, or makes its next one return at once. */
  private wake(): void {
    if (this.resumeLoop) this.resumeLoop();
    else this.wokenWhileBusy = true;
  }

  /** Takes a claimed task into the worker's care (its lease is renewed from now on) and queues it to run. */
  private admit(task: ClaimedTask, askedAt: number): void {
    const entry: Running = { task, claimedAt: askedAt, abort: new RunAbort(), renewUntil: null, renewedAt: null, timeout: null, done: Promise.resolve(), returned: false, gone: false };
    this.running.set(task.id, entry);
    this.ready.push(entry);
  }

  /**
   * Starts queued tasks while slots are free, none once the worker is stopping; a queued task whose
   * lease was lost meanwhile is dropped.
   * One whose lease may have run out (leaseMayHaveRunOut) is held, with those behind it, until the next
   * heartbeat that gets through renews it or says it is lost (onRenewed calls this again).
   * The heartbeats then learn the new load: the coordinator hands a dead worker's tasks to the least
   * loaded, and a worker whose heartbeats said 0 while busy was handed them to sit on.
   */
  private startReady(): void {
    // A stopping worker gives back what it holds ready, unstarted: a handler that hands its task back as
    // the stop begins (ctx.stopping) freed its slot for a buffered task, whose own ctx.stopping had
    // already fired, so it ran on until the grace period ended.
    if (this.state !== "running") return;
    const before = this.handling;
    while (this.handling < this.options.concurrency && this.ready.length > 0) {
      const entry = this.ready[0];
      if (entry.abort.aborted) {
        this.ready.shift();
        this.forget(entry);
        continue;
      }
      if (this.leaseMayHaveRunOut(entry)) break;
      this.ready.shift();
      this.run(entry);
    }
    if (this.handling !== before) this.publishState();
  }

  /**
   * Drops a run from the tasks whose leases are renewed, if it is still the task's run here: one that
   * lost its lease (a handler deaf to its signal) can end after this worker claimed the task again,
   * and dropping the new run stopped its lease's renewal, so it ran out while the new run went on.
   */
  private forget(entry: Running): void {
    if (this.running.get(entry.task.id) === entry) this.running.delete(entry.task.id);
  }

  private run(entry: Running): void {
    const { task, abort } = entry;
    this.handling++;
    if (task.timeoutSeconds !== null) {
      // The timeout runs from the handler's start, and the lease is renewed until then, no longer.
      entry.renewUntil = monotonicMs() + task.timeoutSeconds * 1000;
      entry.timeout = setTimeout(() => abort.abort("timeout"), task.timeoutSeconds * 1000);
    }
    if (this.logger.isLevelEnabled("debug")) this.logger.debug({ taskId: task.id, attempt: task.attempts }, `Claimed task ${task.id} (${task.taskType})`);
    entry.done = this.execute(entry)
      .catch(async (error: unknown) => {
        // A fault of the worker's own in handling the outcome, rather than the task left leased to a
        // worker whose process an unhandled rejection would end: the attempt fails, charged. Given back
        // uncharged, the task was claimed again at once and met the same fault, for ever (on SQLite a
        // loop that starved the event loop's timers).
        this.logger.error({ err: describeThrown(error) }, `Internal error after task ${task.id} ran: ${describeThrown(error)}; failing this attempt`);
        const failure = { error: storable(`Worker internal error after the handler ran: ${describeThrown(error)}`), retryable: true };
        await this.store.fail(task.id, task, failure).catch(() => this.store.release(task.id, task, { reason: "worker internal error" }).catch(() => {}));
      })
      .finally(() => {
      if (entry.timeout) clearTimeout(entry.timeout);
      this.forget(entry);
      this.publishState();
      this.wake();
    });
  }

  private async execute(entry: Running): Promise<void> {
    const { task, abort } = entry;
    const lease = { workerId: task.workerId, leaseToken: task.leaseToken };
    // Made on first use: most runs never log, and a pino child per task was 4 % of a draining worker's allocations.
    let child: Logger | null = null;
    const log = () => (child ??= this.logger.child({ taskId: task.id, taskType: task.taskType }));
    const followUps: EnqueueInput[] = [];
    let result: Json | void;
    let thrown: { error: unknown } | null = null;
    let returned = false;
    const started = performance.now();
    try {
      const handler = this.options.handlers[task.taskType];
      result = await handler(task.params, createTaskContext(this.store, task, abort, this.stoppingSignal.signal, log, followUps, () => returned, this.options.leaseSeconds * 1000));
    } catch (error) {
      thrown = { error };
    }
    returned = true;
    entry.returned = true;
    this.prefetch.finished(performance.now() - started);
    this.handling--;
    this.startReady();
    this.wake();
    if (thrown) {
      await this.afterFailure(task, abort, thrown.error, log);
      return;
    }
    if (abort.aborted && abort.reason === "cancelled") {
      log().info(`Task ${task.id} finished after it was cancelled; result discarded`);
      return;
    }
    if (abort.aborted && abort.reason !== "timeout") {
      log().warn(`Task ${task.id} finished after its lease ended (${abort.reason}); result discarded`);
      return;
    }
    await this.persist(task, abort, log, `complete task ${task.id}`, async () => {
      try {
        // Follow-ups are created in the completion's transaction, so those completions go one by one.
        if (followUps.length > 0) await this.store.complete(task.id, lease, { result: result ?? null, followUps });
        else await this.outcomes.complete({ id: task.id, lease, result: result ?? null });
      } catch (error) {
        if (await this.writtenEarlier(task, error, "completed")) {
          this.tasksProcessed++;
          if (this.logger.isLevelEnabled("debug")) log().debug(`Task ${task.id} completed (the answer to its first write was lost)`);
          return;
        }
        if (!(error instanceof ValidationError)) throw error;
        // The result or a follow-up cannot be stored: running the handler again would do the work
        // again and fail the same way, so the task fails now, saying what to fix.
        await this.store.fail(task.id, lease, { error: storable(`Handler output rejected, task not completed: ${error.message}`), retryable: false });
        this.tasksProcessed++;
        log().error({ err: error.message }, `Task ${task.id} failed: its handler's output cannot be stored`);
        return;
      }
      this.tasksProcessed++;
      if (this.logger.isLevelEnabled("debug")) log().debug(`Task ${task.id} completed`);
    });
  }

  private async afterFailure(task: ClaimedTask, abort: RunAbort, error: unknown, log: () => Logger): Promise<void> {
    const reason = abort.reason;
    // A cancel is an operator's decision, said at info; a lost lease is something to look into.
    if (reason === "cancelled") {
      log().info(`Task ${task.id} stopped: it was cancelled`);
      return;
    }
    if (reason === "lease_lost" || isA(error, LeaseLostError)) {
      log().warn(`Task ${task.id} stopped: its lease was lost to another worker`);
      return;
    }
    if (reason === "shutdown") return; // shutdown releases it
    if (isA(error, WorkerStoppingError) && this.state !== "running") {
      // The handler heard ctx.stopping and handed the task back: the grace period need not run out first.
      await this.release(task);
      return;
    }
    const message = reason === "timeout" ? `Timed out after ${task.timeoutSeconds} s` : storable(errorMessage(error));
    const stack = reason === "timeout" ? undefined : stackOf(error);
    const retryable = !isA(error, NonRetryableError);
    await this.persist(task, abort, log, `record the failure of task ${task.id}`, async () => {
      const lease = { workerId: task.workerId, leaseToken: task.leaseToken };
      const failed = await this.outcomes.fail({ id: task.id, lease, error: message, retryable, ...(stack === undefined ? {} : { stack }) }).catch(async (error: unknown) => {
        // A failure that ended the task for good keeps its lease on the row; one that scheduled a retry does not, and is refused as lease_lost.
        if (await this.writtenEarlier(task, error, "failed")) return null;
        throw error;
      });
      this.tasksProcessed++;
      if (failed === null) return;
      if (failed.status === "pending") log().warn({ err: message, stack, retryAt: failed.scheduledFor }, `Task ${task.id} failed (attempt ${task.attempts}); retry scheduled`);
      else log().error({ err: message, stack }, `Task ${task.id} failed for good`);
    });
  }

  /**
   * Whether an outcome refused as an invalid transition was in fact written by an earlier try whose
   * answer was lost (the connection dropped after the commit, and this worker or its HTTP client sent
   * it again): the task is then in the outcome's state under this very lease, which no one else holds.
   */
  private async writtenEarlier(task: ClaimedTask, error: unknown, status: TaskStatus): Promise<boolean> {
    if (!(error instanceof InvalidTransitionError)) return false;
    // Refused as invalid_transition rather than lease_lost, the write met this very lease (store/refusal.ts).
    return inStateUnder(await this.store.get(task.id).catch(() => null), status, task);
  }

  /**
   * Writes a task's outcome, retrying while the database (or server) is unreachable: a lost
   * completion would make the task run again. The task stays in `running` meanwhile, so heartbeats
   * keep renewing its lease; the write is retried for the lease's length, and ends sooner when the
   * lease is gone (a refusal, or the worker fenced the run after its heartbeats failed that long).
   * It used to give up after 8 tries (about 50 s over HTTP), so a server down for a minute dropped
   * outcomes whose leases still held, and those tasks ran again.
   */
  private async persist(task: ClaimedTask, abort: RunAbort, log: () => Logger, what: string, write: () => Promise<void>): Promise<void> {
    let failingSince: number | null = null;
    for (let attempt = 1; ; attempt++) {
      const last = this.lastTry.signal.aborted;
      try {
        await write();
        return;
      } catch (error) {
        if (isRefusal(error)) {
          // An operator's cancel while the handler ran is no failure of this worker's: said at info.
          if (error instanceof InvalidTransitionError && (await this.store.get(task.id).catch(() => null))?.status === "cancelled") {
            log().info(`Task ${task.id} was cancelled while it ran; its outcome is not recorded`);
          } else log().warn({ err: error.message }, `Could not ${what}: ${error.code}`);
          return;
        }
        failingSince ??= monotonicMs();
        const fenced = abort.aborted && abort.reason === "lease_lost";
        if (fenced || last || monotonicMs() - failingSince >= this.options.leaseSeconds * 1000) {
          log().error({ err: (error as Error).message }, `Could not ${what}; its lease will expire and it will run again`);
          // Fenced, the task is no longer this worker's to give back.
          if (this.state !== "running" && !fenced) this.leftLeased.add(task.id);
          return;
        }
        await sleep(Math.max(retryAfterMs(error), Math.min(10_000, 200 * 2 ** attempt)), this.lastTry.signal);
      }
    }
  }

  /**
   * Self-fencing. While heartbeats fail (a network partition, a database out of reach), the leases
   * they would renew run out: the last beat that got through was sent at most one interval before the
   * first failing one. Past the lease length the coordinator may have given the task to another worker,
   * so its handler here is stopped rather than left running beside its successor: its writes would
   * be refused anyway, but its side effects (a call to another service) would happen twice.
   */
  private fenceExpiredLeases(): void {
    if (this.fenceTimer !== null) clearTimeout(this.fenceTimer);
    this.fenceTimer = null;
    if (this.beatsFailingSince === null) return;
    const renewedAtLeast = this.beatsFailingSince - this.heartbeatIntervalMs;
    const now = monotonicMs();
    let next = Number.POSITIVE_INFINITY;
    for (const entry of this.running.values()) {
      if (entry.abort.aborted) continue;
      const leaseEnds = Math.max(renewedAtLeast, entry.claimedAt) + this.options.leaseSeconds * 1000;
      if (now < leaseEnds) {
        next = Math.min(next, leaseEnds);
        continue;
      }
      this.logger.warn(`Task ${entry.task.id}: no heartbeat got through for the lease's ${this.options.leaseSeconds} s; stopping its handler (another worker may hold it now)`);
      entry.abort.abort("lease_lost");
    }
    // At the lease's end, when the coordinator may hand the task on, not at the next failing beat: with
    // a lease that is no whole number of intervals, that came up to an interval later, and both ran.
    if (next !== Number.POSITIVE_INFINITY) this.fenceTimer = setTimeout(() => this.fenceExpiredLeases(), next - now);
  }

  /**
   * Whether no heartbeat that got through since its claim has renewed the task's lease for as long as
   * a lease lasts: a process frozen that long (SIGSTOP, a paused container or VM) may find, when it
   * runs again, that the coordinator has given the tasks it held ready to other workers, which may be
   * running or have finished them. Started before the next heartbeat said so, their handlers ran a
   * second time beside their new owners' (a thawed worker started 2 to 5 tasks another worker had
   * completed); their writes were refused, their side effects were not.
   *
   * A task no beat has renewed yet is held from half its lease on: a beat sent before the worker knew
   * of it (frozen between the claim's answer and reading it) says it lists every lease, and landing
   * then it gives the task back (UNKNOWN_TO_ITS_WORKER). The next beat lists it, and is sent after that
   * one's answer: it renews the task or says it is lost.
   */
  private leaseMayHaveRunOut(entry: Running): boolean {
    const leaseMs = this.options.leaseSeconds * 1000;
    if (entry.renewedAt === null) return monotonicMs() >= entry.claimedAt + leaseMs / 2;
    return monotonicMs() >= Math.max(entry.claimedAt, entry.renewedAt) + leaseMs;
  }

  /** A notification said the task was cancelled: its handler is told now, not at the next heartbeat. */
  private cancelled(taskId: number): void {
    const entry = this.running.get(taskId);
    if (entry) entry.gone = true;
    if (entry && !entry.abort.aborted) entry.abort.abort("cancelled");
  }

  private async leasesLost(leases: LeaseRef[]): Promise<void> {
    // Tasks that have not started are dropped at once (startReady), before onRenewed may start them.
    const waiting = new Set(this.ready);
    for (const { taskId, leaseToken } of leases) {
      const entry = this.running.get(taskId);
      if (entry?.task.leaseToken === leaseToken) entry.gone = true;
      if (entry && waiting.has(entry) && entry.task.leaseToken === leaseToken) entry.abort.abort("lease_lost");
    }
    for (const { taskId, leaseToken } of leases) {
      const entry = this.running.get(taskId);
      // Another run of the same task (re-claimed since that beat) holds a lease of its own.
      if (!entry || entry.task.leaseToken !== leaseToken || entry.abort.aborted) continue;
      const now = await this.store.get(taskId).catch(() => null);
      entry.abort.abort(now?.status === "cancelled" ? "cancelled" : "lease_lost");
    }
  }

  private installSignalHandlers(): void {
    let received = 0;
    this.signalHandler = (signal) => {
      received++;
      if (received > 1) {
        // Not an exit on the spot: that would leave the running tasks leased to a worker still shown
        // active, for the coordinator to find dead minutes later and charge them an attempt.
        this.logger.warn(`Second ${signal}: aborting the running tasks and releasing them now`);
        this.cutGrace();
        return;
      }
      this.logger.info(`${signal} received: finishing running tasks (grace ${this.options.shutdownGraceMs} ms); send again to abort and release them at once`);
      // Every worker of the process that handles signals hears this one, their handlers one after another
      // in the signal's emit: once it is over (a microtask later), the process exits when they all have
      // stopped. Each exiting after its own stop ended the process under the others, their tasks left
      // leased to workers shown active, for the coordinator to find dead and charge an attempt. Exit 1
      // when a stop left tasks leased here or the registry unaware: an orchestrator should know.
      signalledStops.push(this.stop().then(() => this.stoppedCleanly));
      const others = this.stopOthersOnSignal().catch(() => undefined);
      queueMicrotask(() => void Promise.all([Promise.all(signalledStops), others]).then(([clean]) => process.exit(clean.every(Boolean) ? 0 : 1)));
    };
    process.on("SIGTERM", this.signalHandler);
    process.on("SIGINT", this.signalHandler);
  }

  private cutGrace(): void {
    this.graceCut = true;
    this.endGrace?.();
  }

  private async release(task: ClaimedTask): Promise<void> {
    await this.store
      .release(task.id, task, { reason: "worker shutting down" })
      .then(() => this.logger.info({ taskId: task.id }, `Released task ${task.id} for another worker (checkpoint kept)`))
      .catch((error) => {
        // Refused for its lease or its status: the task is no longer this worker's (cancelled, or taken
        // back and given to another while it waited in the buffer or the process was frozen), so there is
        // nothing to give back and nothing left leased here. Counted as left leased, it made a stop that
        // held nothing say "stopped with N tasks still leased to it" and exit 1.
        if (error instanceof LeaseLostError || error instanceof InvalidTransitionError || error instanceof TaskNotFoundError) {
          this.logger.info({ err: error.message }, `Task ${task.id} was no longer this worker's to release`);
          return;
        }
        this.logger.warn({ err: error.message }, `Could not release task ${task.id}`);
        if (this.state !== "running") this.leftLeased.add(task.id);
      });
  }

  private async shutdown(graceMs: number): Promise<void> {
    // Never started, or its start refused (see begin): nothing runs, nothing was registered.
    if (this.state === "idle" || this.state === "stopped") {
      this.state = "stopped";
      return;
    }
    this.state = "stopping";
    this.stoppingSignal.abort(new WorkerStoppingError(`Worker ${this.id} is stopping: task given back for another worker`));
    this.wake();
    // Full from now on (heartbeatState), told at once rather than at the next beat; not waited for here
    // (the database may hang), only before the last beat, which it must not land after.
    this.publishState();
    const toldFull = this.store.workerHeartbeat({ ...this.heartbeatState().beat, leases: [] }).catch(() => {});
    // A stop during start() waits for it: start went on to begin heartbeats after the shutdown had
    // passed them, and the worker beat for ever, shown active and keeping its process alive. Neither
    // it nor a claim under way waits past the time the whole stop has (a claim over HTTP to a server
    // gone silent is retried for minutes).
    // Both deadlines count from here: a claim that hangs eats into them, it does not push them back.
    const graceEnds = monotonicMs() + graceMs;
    const stopBy = graceEnds + this.options.lastCallsMs;
    await settledBy(stopBy, this.starting);
    await settledBy(stopBy, this.loop);
    // Tasks that never started go back at once, for other workers: together, as a buffer of short
    // tasks can hold hundreds. Awaited with the last calls, not before the grace period.
    const unstarted = this.ready.splice(0);
    for (const entry of unstarted) this.forget(entry);
    const given = new Set<number>();
    const givingBack = Promise.all(unstarted.map((entry) => this.release(entry.task).then(() => given.add(entry.task.id))));
    const inFlight = [...this.running.values()];
    if (inFlight.length > 0 && !this.graceCut) {
      let timer: NodeJS.Timeout | undefined;
      const graceOver = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, Math.max(0, graceEnds - monotonicMs()));
        this.endGrace = resolve;
      });
      await Promise.race([Promise.all(inFlight.map((r) => r.done)), graceOver]);
      // Handlers that finished early leave no timer holding the process up for the rest of the grace period.
      clearTimeout(timer);
      this.endGrace = null;
    }
    // A handler still running is stopped and its task given back. One that has returned is not: its
    // outcome is being written, and released, the task would run again; it gets a last try now.
    // Each is looked at as its turn comes: a handler may return while an earlier task is being released.
    const unfinished = [...this.running.values()];
    for (const entry of unfinished) {
      if (entry.returned) continue;
      entry.abort.abort("shutdown");
      if (!(await settledBy(stopBy, this.release(entry.task)))) this.leftLeased.add(entry.task.id);
    }
    this.lastTry.abort();
    const returned = unfinished.filter((e) => e.returned);
    const written = new Set<number>();
    await settledBy(stopBy, Promise.all(returned.map((e) => e.done.then(() => written.add(e.task.id)))));
    for (const e of returned) if (!written.has(e.task.id)) this.leftLeased.add(e.task.id);
    await settledBy(stopBy, givingBack);
    for (const entry of unstarted) if (!given.has(entry.task.id)) this.leftLeased.add(entry.task.id);
    const beatsStopped = Promise.all([this.heartbeats?.stop(), toldFull]).catch(() => {});
    // A last beat: what the grace period finished reaches the registry (the heartbeats may not have
    // sent it). Only if the beats before it were answered in time: sent once they were, it went out
    // after the shutdown, a call of a worker that had stopped.
    const lastBeat = (await settledBy(stopBy, beatsStopped)) ? this.store.workerHeartbeat({ ...this.heartbeatState().beat, leases: [] }).catch(() => {}) : null;
    await settledBy(stopBy, lastBeat);
    // A beat still unanswered at the deadline may land after the shutdown, on another connection: being
    // of this run (runId), it leaves the worker inactive. The shutdown names the run too: landing late
    // itself (held up, sent again), after the worker restarted under its id, it leaves the new run be.
    const markedInactive = this.store.shutdownWorker(this.id, this.runId).then(
      // It gives back whatever the worker still held: an outcome that could not be written is lost, but
      // the task runs again now, not when its lease runs out.
      (released) => released.forEach((id) => this.leftLeased.delete(id)),
      (error) => {
        this.logger.warn({ err: error.message }, "Could not mark the worker inactive");
        this.leftActive = true;
      },
    );
    if (!(await settledBy(stopBy, markedInactive))) {
      this.logger.warn(`Could not mark the worker inactive: no answer within ${this.options.lastCallsMs / 1000} s of the grace period's end`);
      this.leftActive = true;
    }
    // The LISTEN connection's goodbye waits 5 s at most (PgListener).
    await settledBy(stopBy + 5000, this.unsubscribe?.().catch(() => {}));
    if (this.signalHandler) {
      process.off("SIGTERM", this.signalHandler);
      process.off("SIGINT", this.signalHandler);
    }
    if (this.fenceTimer !== null) clearTimeout(this.fenceTimer);
    this.state = "stopped";
    const held = [...this.leftLeased];
    if (held.length > 0) {
      this.logger.error(`Worker ${this.id} stopped with ${counted(held.length, "task")} still leased to it (${held.join(", ")}): the coordinator takes them back when their leases run out, an attempt each`);
    } else if (this.leftActive) this.logger.error(`Worker ${this.id} stopped, but the registry still shows it active until the coordinator finds it silent`);
    else this.logger.info(`Worker ${this.id} stopped`);
  }

  /** Whether the last stop recorded or gave back everything, and marked the worker inactive. */
  get stoppedCleanly(): boolean {
    return this.state === "stopped" && this.leftLeased.size === 0 && !this.leftActive;
  }
}

/** A message the store accepts whatever the handler threw: no NUL, well-formed, not too long. */
function storable(message: string): string {
  return truncatedMessage(String(message).replaceAll("\0", "\\0").toWellFormed());
}

/**
 * Where a handler's error came from, kept in its failure's event (`data.stack`): the stack with the
 * error's causes and, for an AggregateError, its errors, as Node prints them. None for a thrown value
 * that is no Error: it has no stack.
 */
/** `value instanceof type`, false for a value whose prototype cannot be read (a Proxy that throws): a handler may throw anything. */
function isA<T>(value: unknown, type: abstract new (...args: never[]) => T): value is T {
  try {
    return value instanceof type;
  } catch {
    return false;
  }
}

function stackOf(error: unknown): string | undefined {
  if (!isA(error, Error)) return undefined;
  try {
    return storable(inspect(error, { depth: 4, colors: false, breakLength: Infinity }));
  } catch {
    return undefined; // a getter that throws, a Proxy
  }
}

/**
 * What a handler threw, as its task's error: an Error's message (or, with none, its name), a string
 * as it is, anything else shown ("Handler threw {"code":7} (not an Error)"). Never throws: an Error
 * whose message is a number, or an object that neither JSON nor String can show, ended the worker.
 */
function errorMessage(error: unknown): string {
  try {
    if (typeof error === "string") return error;
    const { message, name } = (error ?? {}) as { message?: unknown; name?: unknown };
    if (typeof message === "string" && message !== "") return message;
    if (error instanceof Error) {
      const label = typeof name === "string" && name !== "" ? name : "Error";
      return message === undefined || message === "" ? label : `${label}: ${describeThrown(message)}`;
    }
    return `Handler threw ${describeThrown(error)} (not an Error)`;
  } catch {
    return "Handler threw a value that cannot be shown (not an Error)";
  }
}

/** A thrown value as text, whatever it is: JSON for plain data, else String(), else its type. */
function describeThrown(value: unknown): string {
  try {
    if (value instanceof Error) return `${value.name}: ${value.message}`;
    if (typeof value === "object" && value !== null) {
      const json = JSON.stringify(value);
      if (json !== undefined) return json;
    }
  } catch {
    // a cycle or a BigInt inside: String() below
  }
  try {
    return String(value);
  } catch {
    return Object.prototype.toString.call(value); // no toString at all (a null-prototype object)
  }
}
