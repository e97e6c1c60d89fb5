import type { ApiKeyRecord } from "../core/api-key.js";
import type { TaskEvent } from "../core/event.js";
import type { TaskTypeDefinition, TaskTypeRecord } from "../core/task-type.js";
import type { CancelOptions, RetryOptions, ClaimByIdOptions, Completion, EnqueueCallOptions, EventsQuery, Failure, HeartbeatOptions, NewApiKey, FailuresQuery, ReassignmentQuery, ReleaseOptions, ThroughputQuery } from "../core/schemas.js";
import type { CapacityRow, Failures, ReassignmentStats, Throughput } from "../core/monitoring.js";
import type { PruneOptions, PruneResult } from "../core/retention.js";
import type { RecountOptions, RecountResult } from "../core/recount.js";
import type { ReassignmentEvent, SweepOptions, SweepResult, WorkerBeat, WorkerBeatResult, WorkerList, WorkerQuery } from "../core/worker.js";
import type { FiredSchedule, FireOptions, GenerateInput, GenerateResult, SaveScheduleResult, ScheduleDefinition, ScheduleRecord } from "../core/schedule.js";
import type {
  ClaimedTask,
  ClaimOptions,
  CompleteOptions,
  EnqueueInput,
  FailOptions,
  Json,
  Lease,
  Page,
  Task,
  TaskCounts,
  TaskStatus,
  TaskFilter,
  TaskPage,
} from "../core/task.js";

/** One single enqueue call, as enqueueCalls takes it. */
export interface EnqueueCall {
  input: EnqueueInput;
  idempotencyKey?: string;
}

/** Its answer: the task, or the refusal of this call alone (its key came with another request). */
export type EnqueueCallOutcome = { ok: true; value: EnqueueResult } | { ok: false; error: Error };

/**
 * What enqueue did: `created` is false when a pending task with the same unique key was returned
 * instead, or when the call's idempotency key was used before (`replayed`: the first call's task, as
 * it is now).
 */
export interface EnqueueResult {
  task: Task;
  created: boolean;
  /** Present, and true, only in the answer to a call whose idempotency key an earlier call used. */
  replayed?: true;
}

/**
 * A PostgreSQL connection of the caller's: a pg `Client` or `PoolClient` is one. Anything with pg's
 * `query(text, values)` that answers `{ rows }` will do (an adapter for another driver).
 */
export interface SqlConnection {
  query(text: string, values: unknown[]): Promise<{ rows: unknown[] }>;
}

/** What registration did: `created` is false when the definition matched the latest version, which is returned. */
export interface RegisterTaskTypeResult {
  taskType: TaskTypeRecord;
  created: boolean;
}

/**
 * What one item of a batched write came to: applied (the task's status after it, when a retry is due,
 * and with `returnTasks` the whole task as the write left it), or refused with the error a single call
 * would have thrown. A refused item changes nothing and does not affect the others.
 */
export type BatchOutcome = { id: number; ok: true; status: TaskStatus; scheduledFor: Date; task?: Task } | { id: number; ok: false; error: Error };

/** How much a batched write answers: the whole tasks only when asked (a worker needs their status, a server answering single calls the tasks). */
export interface BatchOptions {
  returnTasks?: boolean;
}

export interface CompleteResult {
  task: Task;
  followUps: Task[];
}

/**
 * The one seam between taskpool and a database. Every backend implements it and passes the same
 * contract suite (test/contract/), which is the definition of correct behaviour.
 *
 * Rules every implementation keeps:
 * - Each method is atomic: the change and its audit event commit together or not at all.
 * - Calls that act on a lease check `worker_id` and `lease_token` in the statement that writes, so a
 *   stale holder gets LeaseLostError and changes nothing.
 * - Input reaching a store was checked by the API layer (src/api/checked-store.ts): stores trust it
 *   and check only what needs the database (a registered params schema, the state machine, leases).
 * - "Now" comes from the store's Clock, never from a statement's now(): the PostgreSQL store's is by
 *   default the database server's clock (see DatabaseClock), the one clock that all its hosts share.
 */
export interface Store {
  readonly dialect: "postgres" | "sqlite";
  /** True for a taskpool server reached over HTTP (src/client/): the database is on the other side. */
  readonly remote?: boolean;

  /**
   * Applies pending migrations; safe when several processes call it at once. Gives the versions this
   * call applied, in order: none when the database was up to date or another process migrated it.
   */
  migrate(): Promise<number[]>;
  close(): Promise<void>;

  /**
   * Fields the producer leaves out come from the latest registered version of the task's type (if any),
   * whose params schema the params must then satisfy; the task records that version.
   */
  enqueue(input: EnqueueInput, options?: EnqueueCallOptions): Promise<EnqueueResult>;
  /**
   * All or nothing: one bad item rejects the whole batch. Results are in input order. With an
   * idempotency key (one per call, single or batch) the tasks and the key's record commit together,
   * and a later call with the key writes nothing (see idempotency.ts).
   */
  enqueueMany(inputs: EnqueueInput[], options?: EnqueueCallOptions): Promise<EnqueueResult[]>;

  /**
   * enqueueMany inside the caller's own transaction, on the caller's connection: the tasks commit or
   * roll back with the caller's writes. PostgreSQL only.
   */
  enqueueWithin?(connection: SqlConnection, inputs: EnqueueInput[]): Promise<EnqueueResult[]>;

  /**
   * Single enqueue calls made at once (a server's concurrent requests), keyed or not, as one
   * transaction: each call's task, or, for a call whose idempotency key was used before, its replay
   * or its refusal (EnqueueCallOutcome). Any other refusal (a bad input) refuses them all and writes
   * nothing; the caller then makes each call alone. A store without it takes keyed calls one by one.
   */
  enqueueCalls?(calls: EnqueueCall[]): Promise<EnqueueCallOutcome[]>;

  /**
   * Claims up to `limit` ready tasks; tasks reserved for this worker come first. Empty when none. Never
   * takes a task whose type already has its registered max_running tasks claimed or running.
   */
  claim(options: ClaimOptions): Promise<ClaimedTask[]>;
  /**
   * Several claims at once (concurrent workers, or concurrent HTTP requests), answered in input order.
   * Each claim gets what `claim` would give it: its worker's reserved tasks first, never more than its
   * limit, the same filters. Ready tasks are shared out in turn among claims of the same shape, so with
   * limit 1 each gets what it would have got claiming alone, one after another. A store may run claims
   * of one shape as one statement.
   */
  claimMany(claims: ClaimOptions[]): Promise<ClaimedTask[][]>;
  /**
   * Claims one pending task by id, ready or not; AlreadyClaimedError when another worker holds it,
   * TaskTypeAtCapacityError when its type is at its max_running cap.
   */
  claimById(id: number, options: ClaimByIdOptions): Promise<ClaimedTask>;

  start(id: number, lease: Lease): Promise<Task>;
  /** Extends the lease by `leaseSeconds` (default: the claim's lease length) and records liveness. */
  heartbeat(id: number, lease: Lease, options?: HeartbeatOptions): Promise<Task>;
  /** Saves the handler's resume point; it survives retries, release and reassignment. */
  checkpoint(id: number, lease: Lease, data: Json): Promise<Task>;
  progress(id: number, lease: Lease, progress: number): Promise<Task>;
  complete(id: number, lease: Lease, options?: CompleteOptions): Promise<CompleteResult>;
  /**
   * Completes many tasks in one transaction (one statement on PostgreSQL), each fenced by its own
   * lease and logged with its event. Outcomes are in input order; ids are distinct.
   */
  completeMany(items: Completion[], options?: BatchOptions): Promise<BatchOutcome[]>;
  /** Retries after backoff while attempts remain and `retryable` is not false; else `failed`. */
  fail(id: number, lease: Lease, options: FailOptions): Promise<Task>;
  /** fail() for many tasks in one transaction, as completeMany. */
  failMany(items: Failure[], options?: BatchOptions): Promise<BatchOutcome[]>;
  /** Back to pending without charging an attempt, keeping (or replacing) the checkpoint. */
  release(id: number, lease: Lease, options?: ReleaseOptions): Promise<Task>;

  cancel(id: number, options?: CancelOptions): Promise<Task>;
  /** Manual retry of a failed (dead-letter) task: pending again with a fresh attempt budget, its checkpoint kept unless reset. */
  retry(id: number, options?: RetryOptions): Promise<Task>;
  /** Holds a pending task for one worker until `seconds` pass; that worker's next claim takes it first. */
  reserve(id: number, workerId: string, seconds: number): Promise<Task>;

  /** A remote store's reads (get, list, and tasks enqueued, cancelled or retried) have leaseToken null: the server tells a token only to the worker holding the lease. */
  get(id: number): Promise<Task | null>;
  /** Newest first unless `page.order` says oldest; pass `nextCursor` back as `cursor` for the next page. */
  list(filter?: TaskFilter, page?: Page): Promise<TaskPage>;
  counts(): Promise<TaskCounts>;
  /**
   * Sets the totals counts() reads completed tasks from to the number of completed task rows of each
   * type, in one transaction, while workers go on completing tasks: once it commits, counts() is exact,
   * with no completion lost or counted twice. Answers the types whose count was wrong, before and
   * after. With `dryRun`, only answers. An operator's repair (docs/upgrading.md): it reads every
   * completed task.
   */
  recount(options?: RecountOptions): Promise<RecountResult>;
  /** The audit trail of one task, oldest first; with `limit`, only its latest events. */
  events(taskId: number, query?: EventsQuery): Promise<TaskEvent[]>;

  /**
   * Registers a task type: a definition that differs from the latest version becomes version + 1 (the
   * first is 1); an identical one returns the latest version unchanged. An invalid definition or params
   * schema throws ValidationError.
   */
  registerTaskType(definition: TaskTypeDefinition): Promise<RegisterTaskTypeResult>;
  /** The latest version of a type, or null if it was never registered. */
  getTaskType(name: string): Promise<TaskTypeRecord | null>;
  /** The latest version of every registered type, by name. */
  listTaskTypes(): Promise<TaskTypeRecord[]>;
  /** Every version of a type, oldest first; empty if it was never registered. */
  taskTypeVersions(name: string): Promise<TaskTypeRecord[]>;

  /** Registers or refreshes a worker and renews the leases it still holds, in one call. */
  workerHeartbeat(beat: WorkerBeat): Promise<WorkerBeatResult>;
  /**
   * workerHeartbeat for many workers (a server's concurrent heartbeat requests), one statement on
   * PostgreSQL; answers in input order. Worker ids are distinct.
   */
  workerHeartbeatMany(beats: WorkerBeat[]): Promise<WorkerBeatResult[]>;
  /**
   * Graceful deregistration: what it still holds goes back to the pool (no attempt charged); it turns
   * inactive. WorkerNotFoundError when the registry has no such worker and it held nothing.
   * `runId` names the run shutting down (the runId of its beats): when the registry's current run is
   * another (one registered under the id since, and this shutdown landed late: held up, or sent again
   * by a transport), it answers [] and changes nothing but recording `runId` as the run that shut down
   * (its late beats are refused too): the worker stays active and the tasks leased under its id, the
   * new run's, stay leased. Without it (an operator's shutdown), or when the registry knows no run of
   * the worker, it is of whichever run is current.
   */
  shutdownWorker(workerId: string, runId?: string): Promise<number[]>;
  /**
   * A page of the registry (src/store/worker-paging.ts): the live workers by id (up to
   * MAX_LIVE_LISTED), then the `limit` gone ones (default 100) most recently heard from, with the
   * whole registry's counts by status; pass `nextCursor` back as `cursor` for the gone ones left out.
   * With `workerId`, that worker alone, whatever its status.
   */
  listWorkers(query?: WorkerQuery): Promise<WorkerList>;
  /** One coordinator pass: stale/dead workers, recovery of their tasks and of expired leases, reassignment. */
  sweep(options: SweepOptions): Promise<SweepResult>;
  /**
   * Seconds by the store's clock until sweep(options) would next take something back: a live (active
   * or stale) worker passing deadAfterSeconds of silence, or a lease running out. 0 when one is due
   * already, null when no worker is live and nothing is leased. The leading coordinator wakes then,
   * not at its next interval.
   */
  nextRecoveryIn(options: SweepOptions): Promise<number | null>;
  /**
   * One bounded retention pass (the leading coordinator's): deletes up to `batchSize` tasks of each
   * finished status older than its age by the store's clock (completed_at), with their audit events
   * and reassignment rows, deleted by task id, not by cascade; then up to `batchSize` dead or
   * shut-down workers and worker-level events older than the completed age. A task that a remaining
   * task names as its parent waits for it. Each statement is its own short transaction and never
   * locks (or waits on) an unfinished task, so claims and lease writes go on meanwhile.
   */
  prune(options: PruneOptions): Promise<PruneResult>;
  /** Takes or renews the named leadership for `ttlSeconds`; true while `holder` leads. */
  tryLead(name: string, holder: string, ttlSeconds: number): Promise<boolean>;
  resign(name: string, holder: string): Promise<void>;
  /** Reassignment history, newest first. */
  reassignments(options?: ReassignmentQuery): Promise<ReassignmentEvent[]>;
  /** Seed 003's statistics: 24-hour success rate, the workers whose tasks were recovered most, tasks reassigned more than once. */
  reassignmentStats(): Promise<ReassignmentStats>;
  /**
   * reassignmentStats()'s `last24Hours` alone, what /metrics reports on every scrape: the other two
   * statistics read 7 days and all of the reassignment history.
   */
  reassignmentRate(): Promise<ReassignmentStats["last24Hours"]>;
  /** Seed 004's capacity planning, one row per task type with work, workers, recent throughput or a registration. */
  capacity(): Promise<CapacityRow[]>;
  /**
   * Completed and failed (for good) tasks per minute over the last `minutes` minutes by the store's
   * clock, the current minute last, with their pickup latency (ready to last claim).
   */
  throughput(query?: ThroughputQuery): Promise<Throughput>;
  /**
   * The newest `limit` failed tasks (by failure time) grouped by type and error, in one statement that
   * reads none of their params, checkpoints or results: the Dead letter page read 1,000 whole tasks a
   * poll (178 MB of 200 KB params; at 1 MB each the answer outgrew a JavaScript string and was a 500).
   */
  failures(query?: FailuresQuery): Promise<Failures>;
  /**
   * Calls `listener` with task types when tasks become ready, so idle workers wake at once instead of
   * at their next poll; `[]` means "something changed, re-check" (types unknown). PostgreSQL:
   * LISTEN/NOTIFY across machines. SQLite: stores of this process on the same file hear each other at
   * once, with types; other processes are heard about a millisecond after their commit, with `[]`,
   * because while anyone is subscribed the store's connection reads `PRAGMA data_version` whenever the
   * WAL file changes (see commit-watcher.ts), and it moves when another connection commits to the
   * file (any commit, so a heartbeat wakes too). In-memory: this store only.
   */
  subscribe(listener: (taskTypes: string[]) => void): Promise<() => Promise<void>>;
  /** Records that `holder`, leading `name` and sweeping every `intervalSeconds`, just finished a sweep (see leadershipStatus). */
  recordSweep(name: string, holder: string, intervalSeconds: number): Promise<void>;
  /** Who leads `name` now and when its last sweep was recorded, by the store's clock. */
  leadershipStatus(name: string): Promise<LeadershipStatus>;

  /** Stores a new API key: its hash and shown prefix, never the key. */
  createApiKey(key: NewApiKey): Promise<ApiKeyRecord>;
  /** Every API key, revoked ones included, oldest first. */
  listApiKeys(): Promise<ApiKeyRecord[]>;
  /** The API key with this hash, revoked or not; null when none has it. */
  findApiKey(keyHash: string): Promise<ApiKeyRecord | null>;
  /** Revokes a key at once and for good; revoking it again changes nothing. ApiKeyNotFoundError for an unknown id. */
  revokeApiKey(id: number): Promise<ApiKeyRecord>;

  /**
   * Creates a schedule, or updates the one of that name. Its next run is the first tick after now; an
   * update that keeps the cron expression and zone keeps it, and one that leaves `enabled` out keeps
   * the schedule paused or running as it was. ValidationError, nothing saved, when its fan-out reads the
   * results of another schedule that does not exist, checked in the save's transaction.
   */
  saveSchedule(definition: ScheduleDefinition): Promise<SaveScheduleResult>;
  /** The schedule of that name, or null. */
  getSchedule(name: string): Promise<ScheduleRecord | null>;
  /** Every schedule, by name. */
  listSchedules(): Promise<ScheduleRecord[]>;
  /** Pauses (no next run) or resumes (next run: the first tick after now) a schedule. ScheduleNotFoundError for an unknown name. */
  setScheduleEnabled(name: string, enabled: boolean): Promise<ScheduleRecord>;
  /**
   * Cancels the pending tasks the schedule's runs made (a fan-out's later batches, due tasks not yet
   * claimed), with an event each saying why; those held by workers run on. The ids cancelled, in order.
   * ScheduleNotFoundError for an unknown name. Paused first, a schedule makes no run meanwhile.
   */
  cancelScheduleTasks(name: string): Promise<number[]>;
  /** Deletes a schedule and its ticks; its tasks stay. ScheduleNotFoundError for an unknown name. */
  removeSchedule(name: string): Promise<ScheduleRecord>;
  /**
   * Fires the schedules due by the store's clock (the coordinator's pass). Each tick fires once: its
   * row, with a unique (schedule, tick) key, is written in the same transaction as its tasks, so
   * concurrent passes, on any number of stores, and a pass after a restart create its tasks once.
   */
  fireDueSchedules(options: FireOptions): Promise<FiredSchedule[]>;
  /** Makes a fan-out's tasks now, as a schedule run would, all or nothing (seed 004's generation endpoints). */
  generateTasks(input: GenerateInput): Promise<GenerateResult>;
}

/** What `taskpool status` says about the coordinator: is anyone leading, and is anyone sweeping? */
export interface LeadershipStatus {
  /** The holder of the unexpired lease; null when nobody leads (never did, resigned, or lapsed). */
  holder: string | null;
  leaseExpiresAt: Date | null;
  /** The last recorded sweep: kept across resignations and changes of leader; null if none ever ran. */
  lastSweptBy: string | null;
  lastSweptAt: Date | null;
  /** Whole seconds from lastSweptAt to the store's clock. */
  secondsSinceSweep: number | null;
  /** The interval the coordinator that made the last sweep sweeps at; null if none ever ran (or it ran before taskpool recorded it). */
  sweepIntervalSeconds: number | null;
}
