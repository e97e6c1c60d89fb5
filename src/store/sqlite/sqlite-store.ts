import type Database from "better-sqlite3";
import { type Clock, systemClock } from "../../core/clock.js";
import type { ApiKeyRecord } from "../../core/api-key.js";
import { ApiKeyNotFoundError, ScheduleNotFoundError, TaskpoolError, UnavailableError, UniqueKeyTakenError, WorkerNotFoundError } from "../../core/errors.js";
import { omittedCheckpoint, type TaskEvent } from "../../core/event.js";
import { type NewTask, type NewTaskRules, prepareNewTask, prepareNewTasks } from "../../core/new-task.js";
import { ParamsValidators } from "../../core/params-schema.js";
import type { TaskAction } from "../../core/state-machine.js";
import {
  type ClaimedTask,
  type ClaimOptions,
  type CompleteOptions,
  DEFAULT_LEASE_SECONDS,
  type EnqueueInput,
  type FailOptions,
  type Json,
  type Lease,
  type Page,
  type Task,
  type TaskCounts,
  type TaskFilter,
  type TaskPage,
} from "../../core/task.js";
import { resolveTaskType, sameDefinition, type TaskTypeDefinition, type TaskTypeRecord } from "../../core/task-type.js";
import { type CancelOptions, type RetryOptions, type ClaimByIdOptions, type Completion, type EnqueueCallOptions, type EventsQuery, type Failure, type HeartbeatOptions, type NewApiKey, type ReassignmentQuery, type ReleaseOptions, type ThroughputQuery, type FailuresQuery, WORKER_BEAT_DEFAULTS } from "../../core/schemas.js";
import { type ReassignmentEvent, secondsToRecovery, type SweepOptions, type SweepResult, UNKNOWN_TO_ITS_WORKER, type WorkerBeat, type WorkerBeatResult, type WorkerList, type WorkerQuery, type WorkerStatus } from "../../core/worker.js";
import type { CapacityRow, Failures, ReassignmentStats, Throughput } from "../../core/monitoring.js";
import {
  type CapacityViewRow,
  type ReassignmentViewRows,
  type ThroughputGroupRow,
  type FailureGroupRow,
  failuresParams,
  toFailures,
  throughputKeptSince,
  throughputWindow,
  toCapacity,
  toReassignmentRate,
  toReassignmentStats,
  toThroughput,
  VIEW_READS,
} from "../monitoring-records.js";
import { toLeadershipStatus, toReassignment, toWorker } from "../worker-records.js";
import { resolveWorkerList, workerCounts, workerPageOf } from "../worker-paging.js";
import { type ApiKeyRow, toApiKey } from "../api-key-records.js";
import { ClaimMemory, FRUITLESS_ROUND_MS, resolveClaim } from "../claim-options.js";
import { recountResult, tallyCounts } from "../counts.js";
import { pageOf, resolveList } from "../paging.js";
import { type LeaseRow, refusalError } from "../refusal.js";
import type { BatchOptions, BatchOutcome, CompleteResult, EnqueueResult, LeadershipStatus, RegisterTaskTypeResult, Store } from "../store.js";
import { replayResults, requestFingerprint } from "../idempotency.js";
import { claimTaskById, claimTasks } from "./claim.js";
import { CommitWatcher } from "./commit-watcher.js";
import { type EventInput, isUniqueViolation, SqliteConnection } from "./connection.js";
import { channelOf, notifyLocal, subscribeLocal } from "./local-signal.js";
import { cancelNotice } from "../../core/notices.js";
import { migrateSqlite } from "./migrate.js";
import { pruneSqlite } from "./sqlite-retention.js";
import type { PruneOptions, PruneResult } from "../../core/retention.js";
import type { RecountOptions, RecountResult } from "../../core/recount.js";
import { sweepSqlite } from "./sqlite-sweep.js";
import * as keySql from "./key-queries.js";
import * as sql from "./queries.js";
import {
  decodeTaskType,
  type SqliteEventRow,
  type SqliteReassignmentRow,
  type SqliteTaskRow,
  type SqliteTaskTypeRow,
  type SqliteWorkerRow,
  toEvent,
  toTask,
} from "./rows.js";
import * as typeSql from "./task-type-queries.js";
import * as monitoringSql from "./monitoring-queries.js";
import * as workerSql from "./worker-queries.js";
import * as scheduleSql from "./schedule-queries.js";
import { checkScheduleTasks, nextRunWhen, noResultsSchedule, resolveSchedule, resultsScheduleOf, scheduleCancelled, type FiredSchedule, type FireOptions, type GenerateInput, type GenerateResult, type SaveScheduleResult, type ScheduleDefinition, type ScheduleRecord } from "../../core/schedule.js";
import { type ScheduleRow, storedRunResult, toSchedule } from "../schedule-records.js";
import { fireDueSchedules as fireSchedules, generateTasks, type PassWrite, type RunWrite, type ScheduleWriter } from "../schedule-passes.js";

export interface SqliteStoreOptions {
  /** A file path, or ":memory:" for a private in-process database. */
  path: string;
  clock?: Clock;
  /** Jitter source for retry backoff, in [0, 1). */
  random?: () => number;
  /** How long to wait for another process's write lock before failing (default 5000 ms). */
  busyTimeoutMs?: number;
  /** Refuse tasks of unregistered types (see prepareNewTask). */
  requireRegistered?: boolean;
}

/**
 * The embedded store: zero set-up, one file, several processes may share it (WAL mode, one writer at
 * a time, BEGIN IMMEDIATE so a transaction never has to upgrade a read lock and deadlock).
 *
 * Durability per operation, as on PostgreSQL: synchronous=NORMAL (survives a process crash, may lose
 * the last commits on power loss) for claim, start, heartbeat and progress; FULL (fsync at commit) for
 * everything that records submitted or finished work.
 */
export class SqliteStore implements Store {
  readonly dialect = "sqlite";
  readonly db: Database.Database;
  private readonly conn: SqliteConnection;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly channel: string;
  /** Hears other processes' commits while anyone subscribes (made at the first subscribe on a file). */
  private commits: CommitWatcher | null = null;
  private readonly rules: NewTaskRules;
  /** Claims whose passes past concurrency keys found nothing, until when they make none (see claimTasks). */
  private readonly fruitlessRounds = new ClaimMemory(FRUITLESS_ROUND_MS);

  constructor(options: SqliteStoreOptions) {
    this.conn = new SqliteConnection(options.path, options.busyTimeoutMs ?? 5000);
    this.channel = channelOf(options.path);
    this.db = this.conn.db;
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.rules = { validators: new ParamsValidators(), requireRegistered: options.requireRegistered ?? false };
  }

  migrate(): Promise<number[]> {
    return migrateSqlite(this.conn);
  }

  async close(): Promise<void> {
    this.commits?.stop();
    this.conn.close();
  }

  private now(): string {
    return this.clock.now().toISOString();
  }

  async enqueue(input: EnqueueInput, options: EnqueueCallOptions = {}): Promise<EnqueueResult> {
    const [result] = await this.conn.tx(true, () =>
      this.keyed("one", [input], options.idempotencyKey, () => {
        const prepared = prepareNewTask(input, this.clock.now(), this.latestTypes([input]).get(input.taskType), this.rules);
        return [this.insert(prepared, this.now())];
      }),
    );
    if (result.created) notifyLocal(this.channel, [result.task.taskType]);
    return result;
  }

  async enqueueMany(inputs: EnqueueInput[], options: EnqueueCallOptions = {}): Promise<EnqueueResult[]> {
    const results = await this.conn.tx(true, () =>
      this.keyed("many", inputs, options.idempotencyKey, () => {
        const prepared = prepareNewTasks(inputs, this.clock.now(), this.latestTypes(inputs), this.rules);
        const now = this.now();
        return prepared.map((p) => this.insert(p, now));
      }),
    );
    this.notifyCreated(results);
    return results;
  }

  /**
   * Runs an enqueue's inserts inside the caller's write transaction, with its idempotency key if it has
   * one (see idempotency.ts): a key already recorded answers its tasks and inserts nothing; a new one is
   * recorded with the tasks' ids. The write lock is held throughout, so a racing call with the same key,
   * in this process or another, finds the record.
   */
  private keyed(kind: "one" | "many", inputs: EnqueueInput[], key: string | undefined, insert: () => EnqueueResult[]): EnqueueResult[] {
    if (key === undefined) return insert();
    const fingerprint = requestFingerprint(kind, inputs);
    const record = this.conn.stmt(sql.IDEMPOTENCY_KEY).get(key) as { fingerprint: string; task_ids: string } | undefined;
    if (record) {
      const taskIds = JSON.parse(record.task_ids) as number[];
      const tasks = (this.conn.stmt(sql.TASKS_BY_IDS).all(record.task_ids) as SqliteTaskRow[]).map(toTask);
      return replayResults(key, fingerprint, { fingerprint: record.fingerprint, taskIds }, tasks);
    }
    const results = insert();
    this.conn.stmt(sql.RECORD_IDEMPOTENCY_KEY).run({ key, fingerprint, taskIds: JSON.stringify(results.map((r) => r.task.id)), now: this.now() });
    return results;
  }

  /**
   * The latest registered version of each type among `inputs`, read inside the caller's write
   * transaction, so the version whose schema and defaults apply is the latest one at commit.
   */
  private latestTypes(inputs: EnqueueInput[]): Map<string, TaskTypeRecord> {
    if (inputs.length === 0) return new Map();
    const names = JSON.stringify([...new Set(inputs.map((i) => i.taskType))]);
    const rows = this.conn.stmt(typeSql.LATEST_TASK_TYPES).all({ names }) as SqliteTaskTypeRow[];
    return new Map(rows.map((r) => [r.name, decodeTaskType(r)]));
  }

  /** Inserts one task inside the caller's transaction, or returns the pending task holding its unique key. */
  private insert(t: NewTask, now: string): EnqueueResult {
    const row = this.conn.stmt(sql.INSERT_TASK).get({
      taskType: t.taskType,
      taskTypeVersion: t.taskTypeVersion,
      params: JSON.stringify(t.params),
      priority: t.priority,
      scheduledFor: t.scheduledFor.toISOString(),
      concurrencyKey: t.concurrencyKey,
      uniqueKey: t.uniqueKey,
      maxAttempts: t.maxAttempts,
      backoff: JSON.stringify(t.backoff),
      timeoutSeconds: t.timeoutSeconds,
      parentId: t.parentId,
      now,
    }) as SqliteTaskRow | undefined;
    if (row) {
      this.conn.logEvent({ taskId: row.id, event: "created", message: t.parentId === null ? null : `follow-up of task ${t.parentId}` }, now);
      return { task: toTask(row), created: true };
    }
    // The write lock is held, so the holder cannot have been claimed since the insert was skipped.
    const holder = this.conn.stmt(sql.PENDING_BY_UNIQUE_KEY).get(t.uniqueKey) as SqliteTaskRow;
    return { task: toTask(holder), created: false };
  }

  async claim(options: ClaimOptions): Promise<ClaimedTask[]> {
    return claimTasks(this.conn, this.clock, resolveClaim(options), this.fruitlessRounds);
  }

  /** One claim after another: each is a short in-process transaction, with no round trip to share. */
  async claimMany(claims: ClaimOptions[]): Promise<ClaimedTask[][]> {
    const claimed: ClaimedTask[][] = [];
    for (const options of claims) claimed.push(await claimTasks(this.conn, this.clock, resolveClaim(options), this.fruitlessRounds));
    return claimed;
  }

  async claimById(id: number, options: ClaimByIdOptions): Promise<ClaimedTask> {
    return claimTaskById(this.conn, this.clock, id, options.workerId, options.leaseSeconds ?? DEFAULT_LEASE_SECONDS);
  }

  /** Runs a lease-guarded update inside `tx`; on zero rows, explains why with a typed error. */
  private guarded(action: TaskAction, text: string, id: number, lease: Lease, extra: Record<string, unknown>, now: string): SqliteTaskRow {
    const row = this.conn.stmt(text).get({ id, workerId: lease.workerId, leaseToken: lease.leaseToken, now, ...extra }) as SqliteTaskRow | undefined;
    if (row) return row;
    throw refusalError(id, this.conn.stmt(sql.LEASE_STATE).get(id) as LeaseRow | undefined, action, lease);
  }

  async start(id: number, lease: Lease): Promise<Task> {
    return await this.conn.tx(false, () => {
      const now = this.now();
      const row = this.guarded("start", sql.START, id, lease, {}, now);
      this.conn.logEvent({ taskId: id, event: "started", toWorkerId: lease.workerId }, now);
      return toTask(row);
    });
  }

  async heartbeat(id: number, lease: Lease, options: HeartbeatOptions = {}): Promise<Task> {
    return await this.conn.tx(false, () =>
      toTask(this.guarded("heartbeat", sql.HEARTBEAT, id, lease, { leaseSeconds: options.leaseSeconds ?? null, progress: options.progress ?? null }, this.now())),
    );
  }

  async checkpoint(id: number, lease: Lease, data: Json): Promise<Task> {
    return await this.conn.tx(true, () => {
      const now = this.now();
      const text = JSON.stringify(data);
      const row = this.guarded("checkpoint", sql.CHECKPOINT, id, lease, { checkpoint: text }, now);
      this.conn.logEvent({ taskId: id, event: "checkpoint", toWorkerId: lease.workerId, data: omittedCheckpoint(text) ?? data }, now);
      return toTask(row);
    });
  }

  async progress(id: number, lease: Lease, progress: number): Promise<Task> {
    return await this.conn.tx(false, () => toTask(this.guarded("progress", sql.PROGRESS, id, lease, { progress }, this.now())));
  }

  async complete(id: number, lease: Lease, options: CompleteOptions = {}): Promise<CompleteResult> {
    const result = options.result ?? null;
    const inputs = options.followUps ?? [];
    const done = await this.conn.tx(true, () => {
      const followUps = prepareNewTasks(inputs, this.clock.now(), this.latestTypes(inputs), this.rules, id);
      const now = this.now();
      const row = this.guarded("complete", sql.COMPLETE, id, lease, { result: JSON.stringify(result) }, now);
      this.conn.logEvent({ taskId: id, event: "completed", fromWorkerId: lease.workerId }, now);
      const created = followUps.map((f) => this.insert(f, now)).filter((r) => r.created);
      return { task: toTask(row), followUps: created.map((r) => r.task) };
    });
    if (done.followUps.length > 0) notifyLocal(this.channel, [...new Set(done.followUps.map((t) => t.taskType))]);
    return done;
  }

  async fail(id: number, lease: Lease, options: FailOptions): Promise<Task> {
    return await this.conn.tx(true, () => this.failOne({ id, lease, ...options }, this.now()));
  }

  async completeMany(items: Completion[], options: BatchOptions = {}): Promise<BatchOutcome[]> {
    const text = options.returnTasks ? sql.COMPLETE : sql.COMPLETE_STATUS;
    return await this.conn.tx(true, () => {
      const now = this.now();
      return items.map(({ id, lease, result }) =>
        outcome(id, options, () => {
          const row = this.guarded("complete", text, id, lease, { result: JSON.stringify(result ?? null) }, now);
          this.conn.logEvent({ taskId: id, event: "completed", fromWorkerId: lease.workerId }, now);
          return options.returnTasks ? toTask(row) : { status: row.status, scheduledFor: new Date(row.scheduled_for) };
        }),
      );
    });
  }

  async failMany(items: Failure[], options: BatchOptions = {}): Promise<BatchOutcome[]> {
    return await this.conn.tx(true, () => {
      const now = this.now();
      return items.map((item) => outcome(item.id, options, () => this.failOne(item, now)));
    });
  }

  /** One lease-guarded failure and its event, inside the caller's transaction. */
  private failOne({ id, lease, error, retryable, stack }: Failure, now: string): Task {
    const extra = { error, retryable: retryable === false ? 0 : 1, jitterDraw: this.random() };
    const task = toTask(this.guarded("fail", sql.FAIL, id, lease, extra, now));
    const retrying = task.status === "pending";
    this.conn.logEvent(
      {
        taskId: id,
        event: retrying ? "retry_scheduled" : "failed",
        fromWorkerId: lease.workerId,
        message: error,
        data: { attempt: task.attempts, max_attempts: task.maxAttempts, retry_at: retrying ? task.scheduledFor.toISOString() : null, ...(stack === undefined ? {} : { stack }) },
      },
      now,
    );
    return task;
  }

  async release(id: number, lease: Lease, options: ReleaseOptions = {}): Promise<Task> {
    const replace = options.checkpoint !== undefined;
    return await this.conn.tx(true, () => {
      const now = this.now();
      const row = this.guarded("release", sql.RELEASE, id, lease, { replace: replace ? 1 : 0, checkpoint: replace ? JSON.stringify(options.checkpoint) : null }, now);
      const task = toTask(row);
      this.conn.logEvent({ taskId: id, event: "released", fromWorkerId: lease.workerId, message: options.reason ?? null, data: task.checkpoint }, now);
      return task;
    });
  }

  /** Operator actions: no lease, just the state machine. */
  private operatorAction(action: TaskAction, id: number, write: (now: string) => SqliteTaskRow | undefined, event: (before: LeaseRow, now: string) => EventInput): Promise<Task> {
    return this.conn.tx(true, () => {
      const now = this.now();
      const before = this.conn.stmt(sql.LEASE_STATE).get(id) as LeaseRow | undefined;
      const row = write(now);
      if (!row || !before) throw refusalError(id, before, action);
      this.conn.logEvent(event(before, now), now);
      return toTask(row);
    });
  }

  async cancel(id: number, options: CancelOptions = {}): Promise<Task> {
    const task = await this.operatorAction(
      "cancel",
      id,
      (now) => this.conn.stmt(sql.CANCEL).get({ id, now }) as SqliteTaskRow | undefined,
      (before) => ({ taskId: id, event: "cancelled", fromWorkerId: before.worker_id, message: options.reason ?? null }),
    );
    // A held task's worker in this process stops it at once (core/notices.ts); one in another process hears [] and learns at its next heartbeat.
    if (task.workerId !== null) notifyLocal(this.channel, [cancelNotice(id)]);
    return task;
  }

  async retry(id: number, options: RetryOptions = {}): Promise<Task> {
    const reset = options.resetCheckpoint === true;
    try {
      // Awaited here: the refusal to map comes from the transaction, once it has waited for the lock.
      return await this.operatorAction(
        "retry",
        id,
        (now) => this.conn.stmt(sql.RETRY).get({ id, now, reset: reset ? 1 : 0 }) as SqliteTaskRow | undefined,
        () => ({ taskId: id, event: "requeued", message: reset ? "manual retry, checkpoint reset" : "manual retry" }),
      );
    } catch (error) {
      if (isUniqueViolation(error, "unique_key")) throw new UniqueKeyTakenError(id);
      throw error;
    }
  }

  async reserve(id: number, workerId: string, seconds: number): Promise<Task> {
    // From the transaction's now, not the call's: the write may have waited for the lock.
    const until = (now: string) => new Date(Date.parse(now) + seconds * 1000).toISOString();
    return this.operatorAction(
      "reserve",
      id,
      (now) => this.conn.stmt(sql.RESERVE).get({ id, workerId, reservedUntil: until(now), now }) as SqliteTaskRow | undefined,
      (_before, now) => ({ taskId: id, event: "reassigned", toWorkerId: workerId, data: { reserved_until: until(now) } }),
    );
  }

  async get(id: number): Promise<Task | null> {
    const row = this.conn.stmt(sql.GET).get(id) as SqliteTaskRow | undefined;
    return row ? toTask(row) : null;
  }

  async list(filter?: TaskFilter, page?: Page): Promise<TaskPage> {
    const q = resolveList(filter, page);
    const onlyPending = q.statuses !== null && q.statuses.length > 0 && q.statuses.every((s) => s === "pending");
    const fewPending = onlyPending && (this.conn.stmt(sql.PENDING_UP_TO_FEW).get() as { n: number }).n < sql.FEW_PENDING;
    const rows = this.conn.stmt(sql.listStatement(q, q.order, fewPending)).all({
      taskType: q.taskType,
      workerId: q.workerId,
      search: q.search,
      cursor: q.afterCursor,
      limit: q.readLimit,
    }) as SqliteTaskRow[];
    return pageOf(rows.map(toTask), q);
  }

  async counts(): Promise<TaskCounts> {
    return tallyCounts(this.conn.stmt(sql.COUNTS).all() as { task_type: string; status: Task["status"]; n: number }[]);
  }

  /**
   * The triggers of migration 009 keep the totals in every process, so they are wrong only if a
   * statement went around them. Read and write in one write transaction: with the file's one writer
   * no completion can commit between the count and the totals it sets.
   */
  async recount({ dryRun = false }: RecountOptions = {}): Promise<RecountResult> {
    type Row = { task_type: string; before: number; after: number };
    if (dryRun) return recountResult(this.conn.stmt(sql.RECOUNT_FIGURES).all() as Row[], true);
    return await this.conn.tx(true, () => {
      const rows = this.conn.stmt(sql.RECOUNT_FIGURES).all() as Row[];
      this.conn.stmt(sql.CLEAR_COMPLETED_TOTALS).run();
      this.conn.stmt(sql.SET_COMPLETED_TOTALS).run();
      return recountResult(rows, false);
    });
  }

  async events(taskId: number, query: EventsQuery = {}): Promise<TaskEvent[]> {
    return (this.conn.stmt(sql.EVENTS).all({ taskId, limit: query.limit ?? -1 }) as SqliteEventRow[]).map(toEvent);
  }

  private notifyCreated(results: EnqueueResult[]): void {
    const types = [...new Set(results.filter((r) => r.created).map((r) => r.task.taskType))];
    if (types.length > 0) notifyLocal(this.channel, types);
  }

  async registerTaskType(definition: TaskTypeDefinition): Promise<RegisterTaskTypeResult> {
    const spec = resolveTaskType(definition);
    return await this.conn.tx(true, () => {
      const [latest] = [...this.latestTypes([{ taskType: spec.name }]).values()];
      if (latest && sameDefinition(latest, spec)) return { taskType: latest, created: false };
      const row = this.conn.stmt(typeSql.INSERT_TASK_TYPE).get({
        ...spec,
        version: (latest?.version ?? 0) + 1,
        paramsSchema: spec.paramsSchema === null ? null : JSON.stringify(spec.paramsSchema),
        backoff: JSON.stringify(spec.backoff),
        now: this.now(),
      }) as SqliteTaskTypeRow;
      return { taskType: decodeTaskType(row), created: true };
    });
  }

  async getTaskType(name: string): Promise<TaskTypeRecord | null> {
    return this.latestTypes([{ taskType: name }]).get(name) ?? null;
  }

  async listTaskTypes(): Promise<TaskTypeRecord[]> {
    return (this.conn.stmt(typeSql.LIST_TASK_TYPES).all() as SqliteTaskTypeRow[]).map(decodeTaskType);
  }

  async taskTypeVersions(name: string): Promise<TaskTypeRecord[]> {
    return (this.conn.stmt(typeSql.TASK_TYPE_VERSIONS).all(name) as SqliteTaskTypeRow[]).map(decodeTaskType);
  }

  async workerHeartbeat(beat: WorkerBeat): Promise<WorkerBeatResult> {
    const leases = beat.leases ?? [];
    let givenBack = 0;
    const result = await this.conn.tx(false, () => {
      const now = this.now();
      const { changes: taken } = this.conn.stmt(workerSql.UPSERT_WORKER).run({
        workerId: beat.workerId,
        runId: beat.runId ?? null,
        roles: beat.roles === undefined ? null : JSON.stringify(beat.roles),
        hostname: beat.hostname ?? null,
        pid: beat.pid ?? null,
        version: beat.version ?? null,
        capacity: beat.capacity ?? null,
        currentLoad: beat.currentLoad ?? null,
        tasksProcessed: beat.tasksProcessed ?? null,
        metadata: beat.metadata === undefined ? null : JSON.stringify(beat.metadata),
        now,
        defaultRoles: JSON.stringify(WORKER_BEAT_DEFAULTS.roles),
        defaultCapacity: WORKER_BEAT_DEFAULTS.capacity,
        defaultCurrentLoad: WORKER_BEAT_DEFAULTS.currentLoad,
        defaultTasksProcessed: WORKER_BEAT_DEFAULTS.tasksProcessed,
      });
      const renew = this.conn.stmt(workerSql.RENEW_LEASE);
      const finished = this.conn.stmt(workerSql.FINISHED_UNDER_LEASE);
      const lost = leases.filter((l) => {
        const lease = { taskId: l.taskId, leaseToken: l.leaseToken, workerId: beat.workerId };
        return !renew.get({ ...lease, now }) && !finished.get(lease);
      });
      // Only a beat the registry took: a refused one is of a life that ended, and the tasks leased under
      // the id now are another run's (see UPSERT_WORKER).
      if (beat.allLeases === true && taken > 0) givenBack = this.giveBackUnlisted(beat.workerId, leases, now);
      return { lost: lost.map((l) => l.taskId) };
    });
    if (givenBack > 0) notifyLocal(this.channel, []);
    return result;
  }

  /** The tasks leased to `workerId` over half their lease ago that a beat listing all its leases leaves out, taken back as a recovery does (UNKNOWN_TO_ITS_WORKER). */
  private giveBackUnlisted(workerId: string, listed: { taskId: number; leaseToken: string }[], now: string): number {
    const known = new Set(listed.map((l) => `${l.taskId}:${l.leaseToken}`));
    const held = this.conn.stmt(workerSql.LEASED_OVER_HALF).all({ workerId, now }) as { id: number; lease_token: string }[];
    let givenBack = 0;
    for (const { id, lease_token: leaseToken } of held) {
      if (known.has(`${id}:${leaseToken}`)) continue;
      const row = this.conn.stmt(workerSql.GIVE_BACK_UNKNOWN).get({ id, workerId, leaseToken, now, reason: UNKNOWN_TO_ITS_WORKER }) as { checkpoint: string | null; status: Task["status"] } | undefined;
      if (!row) continue;
      this.conn.logEvent({ taskId: id, event: row.status === "pending" ? "requeued" : "failed", fromWorkerId: workerId, message: UNKNOWN_TO_ITS_WORKER, data: row.checkpoint === null ? null : JSON.parse(row.checkpoint) }, now);
      givenBack++;
    }
    return givenBack;
  }

  /** One beat after another: each is a short in-process transaction, with no round trip to share. */
  async workerHeartbeatMany(beats: WorkerBeat[]): Promise<WorkerBeatResult[]> {
    const results: WorkerBeatResult[] = [];
    for (const beat of beats) results.push(await this.workerHeartbeat(beat));
    return results;
  }

  async shutdownWorker(workerId: string, runId?: string): Promise<number[]> {
    const released = await this.conn.tx(true, () => {
      const now = this.now();
      // Another run registered under the id since: what the worker holds is that run's.
      if (this.conn.stmt(workerSql.MARK_REPLACED_RUN_GONE).run({ workerId, runId: runId ?? null }).changes > 0) return [];
      const rows = this.conn.stmt(workerSql.RELEASE_WORKER_TASKS).all({ workerId, now }) as { id: number; checkpoint: string | null }[];
      for (const r of rows) {
        this.conn.logEvent({ taskId: r.id, event: "released", fromWorkerId: workerId, message: "worker shut down", data: r.checkpoint === null ? null : JSON.parse(r.checkpoint) }, now);
      }
      this.conn.stmt(workerSql.UNRESERVE_FOR).run({ workers: JSON.stringify([workerId]) });
      const known = this.conn.stmt(workerSql.MARK_INACTIVE).run({ workerId, now }).changes > 0;
      if (!known && rows.length === 0) throw new WorkerNotFoundError(workerId);
      return rows.map((r) => r.id).sort((a, b) => a - b);
    });
    if (released.length > 0) notifyLocal(this.channel, []);
    return released;
  }

  async listWorkers(query?: WorkerQuery): Promise<WorkerList> {
    const q = resolveWorkerList(query);
    const now = this.clock.now();
    const rows = this.conn.stmt(workerSql.LIST_WORKERS).all({
      liveStatuses: JSON.stringify(q.liveStatuses),
      goneStatuses: JSON.stringify(q.goneStatuses),
      workerId: q.workerId,
      liveAfter: q.liveAfter,
      goneAt: q.goneAfter?.at.toISOString() ?? null,
      goneAfter: q.goneAfter?.workerId ?? null,
      liveLimit: q.liveReadLimit,
      goneLimit: q.goneReadLimit,
    }) as (SqliteWorkerRow & { gone: 0 | 1 })[];
    const worker = (r: SqliteWorkerRow) =>
      toWorker({ ...r, roles: JSON.parse(r.roles), metadata: JSON.parse(r.metadata), last_seen_at: new Date(r.last_seen_at), started_at: new Date(r.started_at) }, now);
    const counts = workerCounts(this.conn.stmt(workerSql.WORKER_COUNTS).all() as { status: WorkerStatus; n: number }[]);
    return workerPageOf(rows.filter((r) => r.gone === 0).map(worker), rows.filter((r) => r.gone === 1).map(worker), q, counts);
  }

  async sweep(options: SweepOptions): Promise<SweepResult> {
    const now = this.clock.now();
    const result = await sweepSqlite(this.conn, now, options);
    if (result.requeued.length > 0) notifyLocal(this.channel, []);
    // Housekeeping after the sweep committed: a file busy now must not lose the sweep's result; the next sweep does it.
    try {
      await this.conn.tx(false, () => this.conn.stmt(monitoringSql.DROP_OLD_THROUGHPUT).run({ keptSince: throughputKeptSince(now).toISOString() }));
    } catch (error) {
      if (!(error instanceof UnavailableError)) throw error;
    }
    return result;
  }

  async nextRecoveryIn(options: SweepOptions): Promise<number | null> {
    const row = this.conn.stmt(workerSql.NEXT_RECOVERY).get() as { last_seen_at: string | null; lease_expires_at: string | null; abandoned: 0 | 1 };
    const date = (iso: string | null) => (iso === null ? null : new Date(iso));
    return secondsToRecovery(date(row.last_seen_at), date(row.lease_expires_at), row.abandoned === 1, this.clock.now(), options.deadAfterSeconds);
  }

  async prune(options: PruneOptions): Promise<PruneResult> {
    return pruneSqlite(this.conn, this.clock.now(), options);
  }

  async tryLead(name: string, holder: string, ttlSeconds: number): Promise<boolean> {
    return await this.conn.tx(false, () => {
      // Read once the lock is held: a lease timed from before the wait would be short by it.
      const now = this.clock.now();
      const expiresAt = new Date(now.getTime() + ttlSeconds * 1000).toISOString();
      return this.conn.stmt(workerSql.TRY_LEAD).get({ name, holder, expiresAt, now: now.toISOString() }) !== undefined;
    });
  }

  async resign(name: string, holder: string): Promise<void> {
    await this.conn.tx(false, () => this.conn.stmt(workerSql.RESIGN).run({ name, holder }));
  }

  async reassignments(options: ReassignmentQuery = {}): Promise<ReassignmentEvent[]> {
    const rows = this.conn.stmt(workerSql.LIST_REASSIGNMENTS).all({ limit: options.limit ?? 100, taskId: options.taskId ?? null }) as SqliteReassignmentRow[];
    return rows.map((r) =>
      toReassignment({ ...r, success: r.success === 1, checkpoint: r.checkpoint === null ? null : JSON.parse(r.checkpoint), created_at: new Date(r.created_at) }),
    );
  }

  async reassignmentStats(): Promise<ReassignmentStats> {
    return toReassignmentStats({
      rate: this.conn.stmt(VIEW_READS.reassignmentRate).get() as ReassignmentViewRows["rate"],
      failing: this.conn.stmt(VIEW_READS.failingWorkers).all() as ReassignmentViewRows["failing"],
      repeated: this.conn.stmt(VIEW_READS.repeatedReassignments).all() as ReassignmentViewRows["repeated"],
    });
  }

  async reassignmentRate(): Promise<ReassignmentStats["last24Hours"]> {
    return toReassignmentRate(this.conn.stmt(VIEW_READS.reassignmentRate).get() as ReassignmentViewRows["rate"]);
  }

  async capacity(): Promise<CapacityRow[]> {
    return (this.conn.stmt(VIEW_READS.capacity).all() as CapacityViewRow[]).map(toCapacity);
  }

  async throughput(query: ThroughputQuery = {}): Promise<Throughput> {
    const window = throughputWindow(this.clock.now(), query.minutes);
    const groups = this.conn.stmt(monitoringSql.THROUGHPUT).all({
      since: window.since.toISOString(),
      until: window.until.toISOString(),
      taskType: query.taskType ?? null,
    }) as ThroughputGroupRow[];
    return toThroughput(groups, window);
  }

  async failures(query: FailuresQuery = {}): Promise<Failures> {
    const { limit, shown } = failuresParams(query);
    return toFailures(this.conn.stmt(monitoringSql.FAILURES).all({ limit, shown }) as FailureGroupRow[], limit);
  }

  async subscribe(listener: (taskTypes: string[]) => void): Promise<() => Promise<void>> {
    // A private in-memory database has no other connection to hear from.
    if (!this.db.memory) this.commits ??= new CommitWatcher(this.conn, `${this.db.name}-wal`);
    const unwatch = this.commits?.add(listener);
    const unsubscribe = subscribeLocal(this.channel, listener);
    return async () => {
      unsubscribe();
      unwatch?.();
    };
  }

  async recordSweep(name: string, holder: string, intervalSeconds: number): Promise<void> {
    await this.conn.tx(false, () => this.conn.stmt(workerSql.RECORD_SWEEP).run({ name, holder, now: this.now(), intervalSeconds }));
  }

  async leadershipStatus(name: string): Promise<LeadershipStatus> {
    const now = this.clock.now();
    const row = this.conn.stmt(workerSql.LEADERSHIP_STATUS).get({ name, now: now.toISOString() }) as {
      holder: string | null;
      expires_at: string | null;
      swept_by: string | null;
      swept_at: string | null;
      interval_seconds: number | null;
    };
    const date = (s: string | null) => (s === null ? null : new Date(s));
    return toLeadershipStatus({ ...row, expires_at: date(row.expires_at), swept_at: date(row.swept_at) }, now);
  }

  async createApiKey(key: NewApiKey): Promise<ApiKeyRecord> {
    const row = await this.conn.tx(true, () =>
      this.conn.stmt(keySql.INSERT_API_KEY).get({
        name: key.name ?? null,
        scope: key.scope,
        keyHash: key.keyHash,
        prefix: key.prefix,
        rateLimitPerMinute: key.rateLimitPerMinute ?? null,
        now: this.now(),
      }),
    ) as SqliteApiKeyRow;
    return decodeApiKey(row);
  }

  async listApiKeys(): Promise<ApiKeyRecord[]> {
    return (this.conn.stmt(keySql.LIST_API_KEYS).all() as SqliteApiKeyRow[]).map(decodeApiKey);
  }

  async findApiKey(keyHash: string): Promise<ApiKeyRecord | null> {
    const row = this.conn.stmt(keySql.FIND_API_KEY).get(keyHash) as SqliteApiKeyRow | undefined;
    return row ? decodeApiKey(row) : null;
  }

  async revokeApiKey(id: number): Promise<ApiKeyRecord> {
    const row = await this.conn.tx(true, () => this.conn.stmt(keySql.REVOKE_API_KEY).get({ id, now: this.now() })) as SqliteApiKeyRow | undefined;
    if (!row) throw new ApiKeyNotFoundError(id);
    return decodeApiKey(row);
  }

  async saveSchedule(definition: ScheduleDefinition): Promise<SaveScheduleResult> {
    return await this.conn.tx(true, () => {
      // In the save's write transaction: checked before it, a delete committing in between left the fan-out reading no schedule.
      const readsFrom = resultsScheduleOf(definition);
      if (readsFrom !== null && !this.scheduleNamed(readsFrom)) throw noResultsSchedule(readsFrom);
      const now = this.clock.now();
      const existing = this.scheduleNamed(definition.name);
      const s = resolveSchedule(definition, existing, now);
      checkScheduleTasks(s, this.latestTypes([{ taskType: s.taskType }]).get(s.taskType), this.rules);
      const row = this.conn.stmt(existing ? scheduleSql.UPDATE_SCHEDULE : scheduleSql.INSERT_SCHEDULE).get({
        name: s.name,
        taskType: s.taskType,
        params: JSON.stringify(s.params),
        cron: s.cron,
        timezone: s.timezone,
        enabled: s.enabled ? 1 : 0,
        fanOut: s.fanOut === null ? null : JSON.stringify(s.fanOut),
        concurrencyKey: s.concurrencyKey,
        uniqueKey: s.uniqueKey,
        priority: s.priority,
        missedTicks: s.missedTicks,
        nextRunAt: s.nextRunAt?.toISOString() ?? null,
        now: now.toISOString(),
      }) as SqliteScheduleRow;
      return { schedule: decodeSchedule(row), created: existing === null };
    });
  }

  async getSchedule(name: string): Promise<ScheduleRecord | null> {
    return this.scheduleNamed(name);
  }

  private scheduleNamed(name: string): ScheduleRecord | null {
    const row = this.conn.stmt(scheduleSql.GET_SCHEDULE).get(name) as SqliteScheduleRow | undefined;
    return row ? decodeSchedule(row) : null;
  }

  async listSchedules(): Promise<ScheduleRecord[]> {
    return (this.conn.stmt(scheduleSql.LIST_SCHEDULES).all() as SqliteScheduleRow[]).map(decodeSchedule);
  }

  async setScheduleEnabled(name: string, enabled: boolean): Promise<ScheduleRecord> {
    return await this.conn.tx(true, () => {
      const existing = this.scheduleNamed(name);
      if (!existing) throw new ScheduleNotFoundError(name);
      const now = this.clock.now();
      const row = this.conn.stmt(scheduleSql.SET_SCHEDULE_ENABLED).get({
        name,
        enabled: enabled ? 1 : 0,
        nextRunAt: nextRunWhen(existing, enabled, now)?.toISOString() ?? null,
        now: now.toISOString(),
      }) as SqliteScheduleRow;
      return decodeSchedule(row);
    });
  }

  async cancelScheduleTasks(name: string): Promise<number[]> {
    return await this.conn.tx(true, () => {
      if (!this.scheduleNamed(name)) throw new ScheduleNotFoundError(name);
      const now = this.clock.now().toISOString();
      const ids = (this.conn.stmt(scheduleSql.CANCEL_SCHEDULE_TASKS).all({ name, now }) as { id: number }[]).map((r) => r.id).sort((a, b) => a - b);
      for (const taskId of ids) this.conn.logEvent({ taskId, event: "cancelled", message: scheduleCancelled(name) }, now);
      return ids;
    });
  }

  async removeSchedule(name: string): Promise<ScheduleRecord> {
    const row = await this.conn.tx(true, () => this.conn.stmt(scheduleSql.DELETE_SCHEDULE).get(name)) as SqliteScheduleRow | undefined;
    if (!row) throw new ScheduleNotFoundError(name);
    return decodeSchedule(row);
  }

  async fireDueSchedules(options: FireOptions): Promise<FiredSchedule[]> {
    return fireSchedules(this.scheduleWriter, this.clock.now(), options.graceSeconds * 1000);
  }

  async generateTasks(input: GenerateInput): Promise<GenerateResult> {
    return generateTasks({ ...this.scheduleWriter, enqueueMany: (inputs) => this.enqueueMany(inputs) }, this.clock.now(), input);
  }

  private readonly scheduleWriter: ScheduleWriter = {
    due: async (now) => (this.conn.stmt(scheduleSql.DUE_SCHEDULES).all(now.toISOString()) as SqliteScheduleRow[]).map(decodeSchedule),
    lastRunResults: async (name) => (this.conn.stmt(scheduleSql.LAST_RUN_RESULTS).all(name) as { result: string | null }[]).map((r) => (r.result === null ? null : JSON.parse(r.result))),
    getSchedule: async (name) => this.scheduleNamed(name),
    writeRun: async (run) => this.writeRun(run),
    writePass: async (pass) => await this.conn.tx(true, () => this.recordPass(pass, null, storedRunResult(pass.result))),
  };

  /**
   * One transaction: the tick's row, its tasks, the schedule's pass. The write lock is held from the
   * start, so the schedule read first is the one the pass updates.
   */
  private async writeRun(run: RunWrite): Promise<number[] | null> {
    const created = await this.conn.tx(true, () => {
      const current = this.scheduleNamed(run.name);
      if (!current?.enabled || current.nextRunAt?.getTime() !== run.expectedNextRunAt.getTime()) return null;
      const now = this.now();
      const tickAt = run.tickAt.toISOString();
      const fresh = this.conn.stmt(scheduleSql.INSERT_TICK).run({ name: run.name, tickAt, now }).changes > 0;
      // A tick that fired before only moves the schedule on; its result stays the one of that run.
      if (!fresh) {
        this.recordPass(run, null, null);
        return null;
      }
      const prepared = prepareNewTasks(run.inputs, this.clock.now(), this.latestTypes(run.inputs), this.rules);
      // Those whose unique key a pending task holds are not made (insert answers that task instead).
      const tasks = prepared.map((p) => this.insert(p, now)).flatMap((r) => (r.created ? [r.task] : []));
      this.conn.stmt(scheduleSql.SET_TICK_TASKS).run({ name: run.name, tickAt, taskIds: JSON.stringify(tasks.map((t) => t.id)) });
      this.recordPass(run, tickAt, storedRunResult(run.result(tasks.length)));
      return tasks;
    });
    if (created && created.length > 0) notifyLocal(this.channel, [...new Set(created.map((t) => t.taskType))]);
    return created?.map((t) => t.id) ?? null;
  }

  /** The schedule's pass inside the caller's transaction; false when the schedule changed since it was read. A null result keeps the last one. */
  private recordPass(pass: Omit<PassWrite, "result">, ranTick: string | null, result: string | null): boolean {
    return (
      this.conn.stmt(scheduleSql.RECORD_PASS).run({
        name: pass.name,
        expected: pass.expectedNextRunAt.toISOString(),
        nextRunAt: pass.nextRunAt?.toISOString() ?? null,
        lastRunAt: ranTick,
        result,
        now: this.now(),
      }).changes > 0
    );
  }
}

type SqliteScheduleRow = Omit<ScheduleRow, "params" | "enabled" | "fan_out" | "next_run_at" | "last_run_at" | "last_result" | "created_at" | "updated_at"> & {
  params: string;
  enabled: number;
  fan_out: string | null;
  next_run_at: string | null;
  last_run_at: string | null;
  last_result: string | null;
  created_at: string;
  updated_at: string;
};

function decodeSchedule(r: SqliteScheduleRow): ScheduleRecord {
  const date = (s: string | null) => (s === null ? null : new Date(s));
  return toSchedule({
    ...r,
    params: JSON.parse(r.params),
    enabled: r.enabled === 1,
    fan_out: r.fan_out === null ? null : JSON.parse(r.fan_out),
    next_run_at: date(r.next_run_at),
    last_run_at: date(r.last_run_at),
    last_result: r.last_result === null ? null : JSON.parse(r.last_result),
    created_at: new Date(r.created_at),
    updated_at: new Date(r.updated_at),
  });
}

type SqliteApiKeyRow = Omit<ApiKeyRow, "created_at" | "revoked_at"> & { created_at: string; revoked_at: string | null };

function decodeApiKey(r: SqliteApiKeyRow): ApiKeyRecord {
  return toApiKey({ ...r, created_at: new Date(r.created_at), revoked_at: r.revoked_at === null ? null : new Date(r.revoked_at) });
}

/**
 * One item of a batch inside its transaction: a refusal (a TaskpoolError) is its outcome; anything else
 * aborts the batch. `write` returns the whole task when the caller asked for it (options.returnTasks),
 * else at least its status and due time.
 */
function outcome(id: number, options: BatchOptions, write: () => Task | Pick<Task, "status" | "scheduledFor">): BatchOutcome {
  try {
    const task = write();
    return { id, ok: true, status: task.status, scheduledFor: task.scheduledFor, ...(options.returnTasks ? { task: task as Task } : {}) };
  } catch (error) {
    if (error instanceof TaskpoolError) return { id, ok: false, error };
    throw error;
  }
}
