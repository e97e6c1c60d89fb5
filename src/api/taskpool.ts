import { setTimeout as sleep } from "node:timers/promises";
import { type ApiKeyRecord, generateApiKey, hashApiKey } from "../core/api-key.js";
import { type Clock, systemClock } from "../core/clock.js";
import { checkedMs } from "../core/milliseconds.js";
import type { TaskEvent } from "../core/event.js";
import type { CapacityRow, Failures, ReassignmentStats, Throughput } from "../core/monitoring.js";
import type { RecountOptions, RecountResult } from "../core/recount.js";
import { type ApiKeyOptions, ApiKeyOptionsSchema, type CancelOptions, type RetryOptions, type EnqueueCallOptions, type EnqueueOptions, type EventsQuery, type FailuresQuery, type ReassignmentQuery, type ThroughputQuery, TaskTypeName } from "../core/schemas.js";
import type { EnqueueInput, JsonObject, Page, Task, TaskCounts, TaskFilter, TaskPage } from "../core/task.js";
import type { TaskTypeDefinition, TaskTypeRecord } from "../core/task-type.js";
import { describe, refuseUnknownOptions, validate } from "../core/validation.js";
import type { ReassignmentEvent, WorkerList, WorkerQuery } from "../core/worker.js";
import { coordinatorNotOverHttp } from "../client/errors.js";
import { Coordinator, type CoordinatorOptions } from "../coordinator/coordinator.js";
import { PoolClosedError, RateLimitedError, retryAfterMs, TaskNotFoundError, UnsupportedUrlError, ValidationError } from "../core/errors.js";
import { FINISHED_STATUSES } from "../core/state-machine.js";
import { type DatabaseConfig, isServerUrl, openStore } from "../store/open-store.js";
import type { EnqueueResult, SqlConnection, Store } from "../store/store.js";
import type { WorkerOptions } from "../worker/options.js";
import { Worker } from "../worker/worker.js";
import { CheckedStore, type Limits, resolveLimits } from "./checked-store.js";
import { type ScheduleOperations, scheduleOperations } from "./schedules.js";
import { EnqueueBatcher } from "./write-batcher.js";
import type { GenerateInput, GenerateResult, ScheduleDefinition, ScheduleRecord } from "../core/schedule.js";

export interface ConnectOptions {
  /** PostgreSQL schema (default "taskpool"). */
  schema?: string;
  /** The API key of a taskpool server (`connect("http://…")`); `taskpool keys create` makes one. */
  apiKey?: string;
  /**
   * Over HTTP: how long a call that failed for want of the server (a network error, a 5xx) is sent
   * again, with backoff, from its first attempt, creates included; 0 fails at once. A 4xx is never
   * retried. Default: about 2 to 3 s, creates 8 to 15 s (through a restart of `taskpool serve`).
   * Ignored on a database URL, as `apiKey` is, so one program runs on either.
   */
  retryForMs?: number;
  /**
   * Over HTTP: the longest one call may take, its attempts and the pauses between them together; no
   * attempt starts after it, and one under way is cut off at it, failing with `ServerTimeoutError`
   * (code `server_unreachable`). Default: none, each attempt waiting up to 30 s for an answer, as a
   * worker riding out an outage wants; a one-shot tool (the CLI: 30 s) wants an answer, or a clear
   * failure, within seconds. Ignored on a database URL.
   */
  callTimeoutMs?: number;
  /**
   * Where "now" comes from (tests). Default: the database server's clock on PostgreSQL, the host's on
   * SQLite (docs/reliability.md#clocks). Workers on a custom clock beat from their own event loop.
   */
  clock?: Clock;
  /**
   * Apply pending migrations on connect, and refuse a database a newer taskpool migrated
   * (SchemaTooNewError) (default true). false touches the database only when it is first used: run
   * `taskpool migrate` with this same version first (docs/upgrading.md).
   */
  migrate?: boolean;
  /**
   * Set up a database taskpool never set up: create the SQLite file, or the PostgreSQL schema and its
   * tables (default true). false refuses one (DatabaseNotFoundError) and creates nothing, so a mistyped
   * path or schema name fails rather than opening an empty pool; tools that only read want it. On
   * PostgreSQL it is checked while migrating (with `migrate: false`, not at all). Ignored over HTTP.
   */
  create?: boolean;
  /** Size limits of params, checkpoints, results and worker metadata (default 1 MiB, 64 KiB for metadata). */
  limits?: Partial<Limits>;
  /** Refuse to enqueue tasks of task types that were never registered (default false: typos wait forever). */
  requireRegistered?: boolean;
  /**
   * On PostgreSQL, how long the database runs one statement before it cancels it (default 10000, from
   * 100 to 3,600,000 ms); the call then fails (pg's error, code 57014; a server answers 503), rolled
   * back. On a connection gone silent the client gives up a second later, and opening a connection, or
   * waiting for a free one, gives up then too (at 11 s at most). Migrations and recount are not
   * limited. Ignored on other URLs, as `apiKey` is on a database's.
   */
  statementTimeoutMs?: number;
}

/** Pool.inTransaction's producer: enqueue and enqueueMany as the pool has them, written in your transaction. */
export interface TransactionProducer {
  /** No idempotency key: your transaction already makes the tasks exist once, with your rows. */
  enqueue(taskType: string, params?: JsonObject, options?: Omit<EnqueueOptions, "idempotencyKey">): Promise<Task>;
  enqueueMany(inputs: EnqueueInput[]): Promise<EnqueueResult[]>;
}

/**
 * A connected pool: what producers, operators and workers call. The same code runs on
 * `sqlite:./file.db` and `postgres://…`. Every input is checked here once (see CheckedStore) before
 * the database sees it.
 */
export class Taskpool {
  constructor(
    /**
     * The lease protocol and coordination calls (claim, start, heartbeat, checkpoint, progress,
     * complete, fail, release, workerHeartbeat, sweep, tryLead…), checked like everything else. It is
     * what the worker runtime, the coordinator and the HTTP server serving remote workers use; to run
     * tasks, use `worker()`.
     */
    readonly protocol: CheckedStore,
    /** Where a worker's heartbeat thread opens its own connection; null when it cannot (in-memory, custom clock). */
    private readonly heartbeatDatabase: DatabaseConfig | null,
  ) {}

  private readonly revocationListeners = new Set<(id: number) => void>();
  /** The workers and coordinators made on this pool, stopped by close(). */
  private readonly runners = new Set<{ stop(): Promise<void> }>();
  private enqueues: EnqueueBatcher | null = null;
  private closed = false;

  /**
   * Puts one task in the pool; with a unique key already pending, returns that task instead. Calls
   * made while an earlier one is being written share the next insert and commit (EnqueueBatcher), so
   * a producer sending one task at a time is not held to one durable commit per task.
   */
  async enqueue(taskType: string, params: JsonObject = {}, options: EnqueueOptions = {}): Promise<Task> {
    // Destructured here, before the store's checks: null was a TypeError.
    if (options === null || typeof options !== "object" || Array.isArray(options)) {
      throw new ValidationError(`Invalid enqueue options: expected an object such as { priority: 5 } (got ${describe(options)})`, [{ path: "options", message: "not an object" }]);
    }
    const { idempotencyKey, ...taskOptions } = options;
    return (await this.enqueueOne({ ...taskOptions, taskType, params }, idempotencyKey === undefined ? {} : { idempotencyKey })).task;
  }

  /**
   * enqueue() as the HTTP API takes it: one input, answered with the task and whether it was created
   * (false for a unique-key hit or an idempotency key used before). Concurrent calls share inserts
   * and commits (EnqueueBatcher), keyed ones too where the store can (PostgreSQL's enqueueCalls).
   */
  enqueueOne(input: EnqueueInput, options: EnqueueCallOptions = {}): Promise<EnqueueResult> {
    this.enqueues ??= new EnqueueBatcher(this.protocol);
    return this.enqueues.enqueue(input, options);
  }

  /**
   * All or nothing: one bad item refuses the batch, naming its index. `created` is false for unique-key
   * hits, and for every task when the idempotency key was used before (the first call's tasks).
   */
  enqueueMany(inputs: EnqueueInput[], options: EnqueueCallOptions = {}): Promise<EnqueueResult[]> {
    return this.protocol.enqueueMany(inputs, options);
  }

  /**
   * A producer that writes inside a transaction you have open on your own PostgreSQL connection (a
   * pg Client or PoolClient, after BEGIN): its tasks commit with your own writes, and workers hear of
   * them at your COMMIT, or they vanish with your ROLLBACK. Calls are not batched with others.
   */
  inTransaction(connection: SqlConnection): TransactionProducer {
    return {
      enqueue: async (taskType, params = {}, options = {}) => (await this.protocol.enqueueWithin(connection, [{ ...options, taskType, params }]))[0].task,
      enqueueMany: (inputs) => this.protocol.enqueueWithin(connection, inputs),
    };
  }

  /**
   * Registers (or re-registers) a task type: its params schema, defaults and policy. An unchanged
   * definition keeps its version; a changed one becomes the next version.
   */
  async registerTaskType(definition: TaskTypeDefinition): Promise<TaskTypeRecord> {
    return (await this.protocol.registerTaskType(definition)).taskType;
  }

  /** The latest version of a task type, or null if it was never registered. */
  taskType(name: string): Promise<TaskTypeRecord | null> {
    return this.protocol.getTaskType(name);
  }

  /** The latest version of every registered task type. */
  taskTypes(): Promise<TaskTypeRecord[]> {
    return this.protocol.listTaskTypes();
  }

  taskTypeVersions(name: string): Promise<TaskTypeRecord[]> {
    return this.protocol.taskTypeVersions(name);
  }

  get(id: number): Promise<Task | null> {
    return this.protocol.get(id);
  }

  /**
   * The task once it has finished: completed (its `result`), failed for good (`errorMessage`) or
   * cancelled. A failure with attempts left is not the end: it waits on through the retries. It
   * asks the store every 25 ms at first, backing off to once a second; over HTTP a read refused by
   * the key's rate limit waits out its Retry-After and asks again. Give `signal` (such as
   * `AbortSignal.timeout(60_000)`) to stop waiting, which rejects with the signal's reason.
   */
  async waitFor(id: number, options: { signal?: AbortSignal } = {}): Promise<Task> {
    const { signal } = options;
    const pauseFor = (ms: number) => sleep(ms, undefined, signal === undefined ? {} : { signal }).catch(() => signal?.throwIfAborted());
    for (let pause = 25; ; pause = Math.min(pause * 2, 1000)) {
      signal?.throwIfAborted();
      const task = await this.protocol.get(id).catch((error: unknown) => {
        // A waiter polls for as long as the task takes: a key's limit of 100 requests a minute is met by two at once.
        if (error instanceof RateLimitedError) return error;
        throw error;
      });
      if (task instanceof RateLimitedError) {
        await pauseFor(retryAfterMs(task));
        continue;
      }
      if (task === null) throw new TaskNotFoundError(id);
      if ((FINISHED_STATUSES as readonly string[]).includes(task.status)) return task;
      await pauseFor(pause);
    }
  }

  /** Filtered and paged; pass `nextCursor` back as `page.cursor` for the next page. */
  list(filter?: TaskFilter, page?: Page): Promise<TaskPage> {
    return this.protocol.list(filter, page);
  }

  /** A task's audit trail, oldest first; `{ limit }` keeps only its latest events. */
  events(taskId: number, query?: EventsQuery): Promise<TaskEvent[]> {
    return this.protocol.events(taskId, query);
  }

  cancel(id: number, options?: CancelOptions): Promise<Task> {
    return this.protocol.cancel(id, options);
  }

  /**
   * Puts a failed (dead-letter) task back in the pool with a fresh attempt budget. Its checkpoint is
   * kept, so the next run resumes where the last got to; `resetCheckpoint: true` starts it afresh (a
   * checkpoint that is itself what made it fail).
   */
  retry(id: number, options?: RetryOptions): Promise<Task> {
    return this.protocol.retry(id, options);
  }

  counts(): Promise<TaskCounts> {
    return this.protocol.counts();
  }

  /**
   * Sets the completed counts right from the tasks themselves, after processes of an earlier version
   * left them wrong (docs/upgrading.md); safe while workers run. Answers the types it changed, before
   * and after; `dryRun` changes nothing. Not over HTTP: run it on the database.
   */
  recount(options?: RecountOptions): Promise<RecountResult> {
    return this.protocol.recount(options);
  }

  /**
   * The worker registry (status, load, seconds since heartbeat, active tasks), a page at a time: the
   * live workers, the 100 gone ones most recently heard from, and counts by status (see Store.listWorkers).
   */
  workers(query?: WorkerQuery): Promise<WorkerList> {
    return this.protocol.listWorkers(query);
  }

  /** Reassignment history, newest first. */
  reassignments(query?: ReassignmentQuery): Promise<ReassignmentEvent[]> {
    return this.protocol.reassignments(query);
  }

  reassignmentStats(): Promise<ReassignmentStats> {
    return this.protocol.reassignmentStats();
  }

  /** reassignmentStats()'s 24-hour figures alone (what /metrics reports), without the 7-day and all-time statistics. */
  reassignmentRate(): Promise<ReassignmentStats["last24Hours"]> {
    return this.protocol.reassignmentRate();
  }

  /** Capacity planning per role (seed 004), or for one role. */
  async capacity(taskType?: string): Promise<CapacityRow[]> {
    if (taskType !== undefined) validate(TaskTypeName, taskType, "task type name");
    const rows = await this.protocol.capacity();
    return taskType === undefined ? rows : rows.filter((r) => r.taskType === taskType);
  }

  /** Completed and failed tasks per minute over the last hour (or `minutes`), with their pickup latency. */
  throughput(query?: ThroughputQuery): Promise<Throughput> {
    return this.protocol.throughput(query);
  }

  /** The newest failed tasks (1,000, or `limit`) grouped by type and error: the dead letter at a glance, without their params. */
  failures(query?: FailuresQuery): Promise<Failures> {
    return this.protocol.failures(query);
  }

  /**
   * Creates the recurring schedule of `definition.name`, or updates it: the leading coordinator then
   * makes its tasks at each cron tick, fanned out over keys in staggered batches if asked (docs/schedules.md).
   */
  async schedule(definition: ScheduleDefinition): Promise<ScheduleRecord> {
    return (await this.protocol.saveSchedule(definition)).schedule;
  }

  /** Recurring schedules: list, get, pause, resume, remove. */
  readonly schedules: ScheduleOperations = scheduleOperations(() => this.protocol);

  /** Makes a fan-out's tasks now, in its staggered batches, as one schedule run would (seed 004's generation). */
  generate(input: GenerateInput): Promise<GenerateResult> {
    return this.protocol.generateTasks(input);
  }

  /**
   * Creates an API key for the HTTP server. The key is returned once, here: only its SHA-256 is
   * stored, so it cannot be shown again (revoke it and create another if it is lost).
   */
  async createApiKey(options: ApiKeyOptions): Promise<{ key: string; apiKey: ApiKeyRecord }> {
    validate(ApiKeyOptionsSchema, options, "API key options");
    const { key, keyHash, prefix } = generateApiKey();
    return { key, apiKey: await this.protocol.createApiKey({ ...options, keyHash, prefix }) };
  }

  /** Every API key (never the keys themselves), revoked ones included. */
  apiKeys(): Promise<ApiKeyRecord[]> {
    return this.protocol.listApiKeys();
  }

  /**
   * Revokes an API key at once: a server on this pool refuses it from the next request on; servers
   * elsewhere within their key cache time (5 s by default).
   */
  async revokeApiKey(id: number): Promise<ApiKeyRecord> {
    const record = await this.protocol.revokeApiKey(id);
    for (const listener of this.revocationListeners) listener(id);
    return record;
  }

  /** Calls `listener` with the id of each key revoked through this pool (a server's key cache); returns how to stop. */
  onApiKeyRevoked(listener: (id: number) => void): () => void {
    this.revocationListeners.add(listener);
    return () => this.revocationListeners.delete(listener);
  }

  /** The active (unrevoked) key a request presents, or null for an unknown, malformed or revoked key. */
  async authenticate(key: string): Promise<ApiKeyRecord | null> {
    // Anything not shaped like a key cannot match one: answered without a query.
    if (typeof key !== "string" || key.length < 8 || key.length > 256) return null;
    const record = await this.protocol.findApiKey(hashApiKey(key));
    return record && record.revokedAt === null ? record : null;
  }

  /** A worker on this pool (call start()). */
  worker(options: WorkerOptions): Worker {
    if (this.closed) throw new PoolClosedError("a worker");
    const coordinators = () => [...this.runners].filter((runner) => runner instanceof Coordinator);
    const worker = new Worker(this.protocol, options, this.heartbeatDatabase, () => Promise.all(coordinators().map((c) => c.stop())));
    // A stopped worker has nothing left for close() to stop: kept, a process that makes a worker per
    // batch of work or per deploy of its handlers held every worker it ever made until the pool closed.
    for (const runner of this.runners) if (runner instanceof Worker && runner.stopped) this.runners.delete(runner);
    // Two live workers with one id pass for one: when either stops, its shutdown gives back the
    // other's running tasks too, and they run twice. Another process's worker cannot be seen from
    // here; this pool's can.
    const twin = [...this.runners].find((r) => r instanceof Worker && r.id === worker.id);
    if (twin) {
      throw new ValidationError(
        `Invalid workerId "${worker.id}": another worker of this pool has it and has not stopped; two workers with one id give back each other's tasks when either stops (give each its own id, or leave workerId out)`,
        [{ path: "workerId", message: "taken by a running worker" }],
      );
    }
    this.runners.add(worker);
    return worker;
  }

  /** A coordinator on this pool (call start()). Not over HTTP: it runs where the database is. */
  coordinator(options?: CoordinatorOptions): Coordinator {
    if (this.closed) throw new PoolClosedError("a coordinator");
    if (this.protocol.remote) {
      throw coordinatorNotOverHttp();
    }
    const coordinator = new Coordinator(this.protocol, options);
    this.runners.add(coordinator);
    return coordinator;
  }

  /**
   * Stops the workers and coordinators made on this pool (gracefully, as their stop() does: running
   * tasks get their grace period), then closes the connection. Closed under a running worker, the
   * connection could neither claim nor record what the handlers finished, while the heartbeat
   * thread kept the worker shown active and its leases renewed: finished tasks ran again later.
   */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.runners].map((runner) => runner.stop()));
    this.runners.clear();
    await this.protocol.close();
  }
}

/** The longest retryForMs: retrying longer is waiting on a server nobody is bringing back. */
const MAX_RETRY_FOR_MS = 86_400_000;

/**
 * Opens (and by default migrates) the database a URL names: `sqlite:./path.db`, `sqlite::memory:`,
 * `postgres://…`; or reaches a taskpool server, `http(s)://host:port` with `apiKey`, where the
 * same calls go over its HTTP API (the server migrates, checks the limits it was given, and runs
 * the coordinator).
 */
const CONNECT_OPTIONS: Record<keyof ConnectOptions, true> = { schema: true, apiKey: true, retryForMs: true, callTimeoutMs: true, clock: true, migrate: true, create: true, limits: true, requireRegistered: true, statementTimeoutMs: true };

export async function connect(url: string, options: ConnectOptions = {}): Promise<Taskpool> {
  if (typeof url !== "string") throw new UnsupportedUrlError(describe(url));
  refuseUnknownOptions(options, CONNECT_OPTIONS, "connect option");
  for (const flag of ["migrate", "create", "requireRegistered"] as const) {
    if (options[flag] !== undefined && typeof options[flag] !== "boolean") {
      throw new ValidationError(`Invalid connect option ${flag}: ${JSON.stringify(options[flag])} (must be true or false)`, [{ path: flag, message: "not a boolean" }]);
    }
  }
  const { schema, clock, migrate, requireRegistered, apiKey, retryForMs, callTimeoutMs, create, statementTimeoutMs } = options;
  const remote = isServerUrl(url);
  if (remote && (clock !== undefined || requireRegistered !== undefined || schema !== undefined)) {
    throw new ValidationError(`clock, requireRegistered and schema are the server's settings: they cannot be given to connect("${url}")`);
  }
  // Ignored, it would pass for a second pool beside the first in the same file.
  if (schema !== undefined && url.startsWith("sqlite:")) {
    throw new ValidationError(`Invalid connect option schema: a SQLite database has no schemas (it is PostgreSQL's option); use another file for another pool`, [{ path: "schema", message: "not for SQLite" }]);
  }
  if (retryForMs !== undefined) checkedMs("retryForMs", retryForMs, 0, MAX_RETRY_FOR_MS, `from 0 (no retries) to ${MAX_RETRY_FOR_MS} (a day)`);
  if (callTimeoutMs !== undefined) checkedMs("callTimeoutMs", callTimeoutMs, 1, MAX_RETRY_FOR_MS, `from 1 to ${MAX_RETRY_FOR_MS} (a day)`);
  const limits = resolveLimits(options.limits);
  // Over HTTP "migrating" is asking the server whether it is ready: done even with migrate: false.
  const store: Store = await openStore(url, { schema, clock, migrate: remote ? true : migrate, requireRegistered, apiKey, retryForMs, callTimeoutMs, create: remote ? true : create, statementTimeoutMs });
  // A heartbeat thread opens the same database with the same settings; it has the system clock only.
  const threadable = url !== "sqlite::memory:" && (options.clock ?? systemClock) === systemClock;
  return new Taskpool(new CheckedStore(store, limits), threadable ? { url, schema, apiKey, retryForMs, callTimeoutMs, statementTimeoutMs } : null);
}
