/**
 * The one place input is checked. Everything above the store seam (the Taskpool facade, the worker
 * runtime, the coordinator, the CLI and the HTTP server) holds a CheckedStore; it checks each call's
 * input against its schema (core/schemas.ts) and the JSON rules (core/validation.ts), throwing a
 * ValidationError that names the field, and only then calls the store, which trusts what it gets.
 * So every store accepts exactly the same input, and a rejected call changes nothing.
 */
import type { ApiKeyRecord } from "../core/api-key.js";
import { InvalidTransitionError, PoolClosedError, TaskpoolError, ValidationError } from "../core/errors.js";
import { compileParamsSchema } from "../core/params-schema.js";
import { atItem } from "../core/new-task.js";
import type { CapacityRow, Failures, ReassignmentStats, Throughput } from "../core/monitoring.js";
import {
  ApiKeyHash,
  ApiKeyId,
  CancelOptionsSchema,
  RetryOptionsSchema,
  ClaimByIdOptionsSchema,
  ClaimOptionsSchema,
  BatchSchema,
  CompleteOptionsSchema,
  CompletionSchema,
  FailureSchema,
  type Completion,
  type Failure,
  EnqueueBatchSchema,
  type EnqueueCallOptions,
  EnqueueCallOptionsSchema,
  EnqueueInputSchema,
  FailOptionsSchema,
  HeartbeatOptionsSchema,
  LeadershipSchema,
  LeaseSchema,
  NewApiKeySchema,
  PageSchema,
  ProgressSchema,
  ReassignmentQuerySchema,
  Seconds,
  ReleaseOptionsSchema,
  SweepOptionsSchema,
  TaskFilterSchema,
  TaskId,
  TaskTypeDefinitionSchema,
  TaskTypeName,
  ThroughputQuerySchema,
  FailuresQuerySchema,
  WorkerBeatSchema,
  WorkerId,
  WorkerQuerySchema,
  WorkerShutdownSchema,
  type CancelOptions,
  type RetryOptions,
  type ClaimByIdOptions,
  type HeartbeatOptions,
  type NewApiKey,
  type ReassignmentQuery,
  type ReleaseOptions,
  type ThroughputQuery,
  type FailuresQuery,
} from "../core/schemas.js";
import type { TaskEvent } from "../core/event.js";
import {
  type ClaimedTask,
  type ClaimOptions,
  type CompleteOptions,
  type EnqueueInput,
  type FailOptions,
  inStateUnder,
  type Json,
  type Lease,
  type Page,
  type Task,
  type TaskCounts,
  type TaskFilter,
  type TaskPage,
} from "../core/task.js";
import type { TaskTypeDefinition, TaskTypeRecord } from "../core/task-type.js";
import { Type } from "../core/typebox.js";
import { checkJson, refuseUnknownOptions, validate } from "../core/validation.js";
import type { ReassignmentEvent, SweepOptions, SweepResult, WorkerBeat, WorkerBeatResult, WorkerList, WorkerQuery } from "../core/worker.js";
import { checkFanOut, checkScheduleDefinition, type FiredSchedule, type FireOptions, type GenerateInput, type GenerateResult, type SaveScheduleResult, type ScheduleDefinition, type ScheduleRecord } from "../core/schedule.js";
import { type EventsQuery, EventsQuerySchema, FireOptionsSchema, GenerateInputSchema, ScheduleDefinitionSchema, ScheduleName, truncatedMessage } from "../core/schemas.js";
import { type PruneOptions, PruneOptionsSchema, type PruneResult } from "../core/retention.js";
import { type RecountOptions, RecountOptionsSchema, type RecountResult } from "../core/recount.js";
import { resolveList } from "../store/paging.js";
import { resolveWorkerList } from "../store/worker-paging.js";
import type { BatchOptions, BatchOutcome, CompleteResult, EnqueueCall, EnqueueCallOutcome, EnqueueResult, LeadershipStatus, RegisterTaskTypeResult, SqlConnection, Store } from "../store/store.js";

/** Size limits of stored JSON, in bytes once serialized. */
export interface Limits {
  /** A task's params (default 1 MiB): every claim returns them, so keep them small. */
  paramsBytes: number;
  /** A checkpoint (default 1 MiB). */
  checkpointBytes: number;
  /** A handler's result (default 1 MiB). */
  resultBytes: number;
  /** A worker's metadata (default 64 KiB): sent with every heartbeat. */
  metadataBytes: number;
}

const MiB = 1024 * 1024;
export const DEFAULT_LIMITS: Limits = { paramsBytes: MiB, checkpointBytes: MiB, resultBytes: MiB, metadataBytes: 64 * 1024 };

/** The limits with their defaults; refuses a limit that is not a positive whole number of bytes. */
export function resolveLimits(limits: Partial<Limits> = {}): Limits {
  // A misspelt limit (paramBytes) was ignored: the caller believed it raised.
  refuseUnknownOptions(limits, { paramsBytes: true, checkpointBytes: true, resultBytes: true, metadataBytes: true }, "limit");
  // One given as undefined is left out, as an option left out: its default.
  const given = Object.fromEntries(Object.entries(limits).filter(([, value]) => value !== undefined));
  const resolved = { ...DEFAULT_LIMITS, ...given };
  for (const [name, value] of Object.entries(resolved)) {
    if (!Number.isInteger(value) || value < 1) {
      throw new ValidationError(`Invalid limits.${name}: ${value} (a whole number of bytes, at least 1)`, [{ path: `limits.${name}`, message: "not a positive integer" }]);
    }
  }
  return resolved;
}

/** The JSON rules, with the size limit of the kind of value (`path` names it in the error). */
function checkStored(limits: Limits, kind: "params" | "checkpoint" | "result" | "metadata", value: unknown, path: string = kind): void {
  const limit = `${kind}Bytes` as const;
  checkJson(value, path, limits[limit], `limits.${limit}`);
}

/** A backoff whose cap is below its base: the cap would win at every retry, the base never used. */
function checkBackoff(backoff: { baseSeconds?: number; maxSeconds?: number } | undefined, what: string): void {
  if (backoff?.baseSeconds === undefined || backoff.maxSeconds === undefined || backoff.maxSeconds >= backoff.baseSeconds) return;
  const message = `maxSeconds (${backoff.maxSeconds}) is below baseSeconds (${backoff.baseSeconds}): every retry would wait maxSeconds; raise maxSeconds or lower baseSeconds`;
  throw new ValidationError(`Invalid ${what}: backoff.${message}`, [{ path: "backoff.maxSeconds", message: `below baseSeconds (${backoff.baseSeconds})` }]);
}

/**
 * What an enqueue of `input` is checked for before any store sees it: its fields, and its params' JSON
 * rules and size. The CLI runs it before it opens a database, so that a refused task creates none.
 */
export function checkNewTask(input: EnqueueInput, limits: Limits, what = "task"): void {
  validate(EnqueueInputSchema, input, what);
  if (input.scheduledFor !== undefined && input.delaySeconds !== undefined) {
    const issues = [{ path: "scheduledFor", message: "not with a delay" }, { path: "delaySeconds", message: "not with a due time" }];
    throw new ValidationError((v) => `Invalid ${what}: ${v.field("scheduledFor")} and ${v.field("delaySeconds")} are both given: give one or the other`, issues);
  }
  checkBackoff(input.backoff, what);
  checkStored(limits, "params", input.params ?? {});
}

/** checkNewTask of each task of an enqueueMany, a refusal naming the item (atItem). */
export function checkNewTasks(inputs: EnqueueInput[], limits: Limits): void {
  validate(EnqueueBatchSchema, inputs, "tasks");
  inputs.forEach((input, index) => atItem(index, () => checkNewTask(input, limits)));
}

/** What registering a task type is checked for before any store sees it (see checkNewTask). */
export function checkTaskTypeDefinition(definition: TaskTypeDefinition, limits: Limits): void {
  validate(TaskTypeDefinitionSchema, definition, "task type");
  checkBackoff(definition.backoff, "task type");
  if (definition.paramsSchema !== undefined) {
    checkStored(limits, "params", definition.paramsSchema, "paramsSchema");
    compileParamsSchema(definition.paramsSchema, definition.name, { registering: true });
  }
}

/** What saving a schedule is checked for before any store sees it (see checkNewTask). */
export function checkScheduleInput(definition: ScheduleDefinition, limits: Limits): void {
  validate(ScheduleDefinitionSchema, definition, "schedule");
  checkStored(limits, "params", definition.params ?? {});
  // Only to refuse an expression that never fires again: the store computes the next run with its clock.
  checkScheduleDefinition(definition, new Date());
}

export class CheckedStore implements Store {
  /** Present when the store has it (PostgreSQL): each call checked as enqueue checks it; a bad one refuses them all, as Store.enqueueCalls says. */
  readonly enqueueCalls?: (calls: EnqueueCall[]) => Promise<EnqueueCallOutcome[]>;

  constructor(
    private store: Store,
    readonly limits: Limits = DEFAULT_LIMITS,
  ) {
    if (store.enqueueCalls) {
      this.enqueueCalls = async (calls) => {
        for (const { input, idempotencyKey } of calls) this.checkEnqueueCall(input, idempotencyKey === undefined ? {} : { idempotencyKey });
        return calls.length === 0 ? [] : this.store.enqueueCalls!(calls);
      };
    }
  }

  get dialect(): Store["dialect"] {
    return this.store.dialect;
  }

  get remote(): boolean {
    return this.store.remote === true;
  }

  migrate(): Promise<number[]> {
    return this.store.migrate();
  }

  /** Closes the store; from then on every call is refused with PoolClosedError (it met the driver's own error, which does not say why), and closing again does nothing. */
  close(): Promise<void> {
    const store = this.store;
    this.store = closedStore(store);
    return store.close();
  }

  async enqueue(input: EnqueueInput, options: EnqueueCallOptions = {}): Promise<EnqueueResult> {
    this.checkEnqueueCall(input, options);
    return this.store.enqueue(input, options);
  }

  async enqueueMany(inputs: EnqueueInput[], options: EnqueueCallOptions = {}): Promise<EnqueueResult[]> {
    validate(EnqueueCallOptionsSchema, options, "enqueue options");
    // Each item is checked on its own so the error names its index.
    checkNewTasks(inputs, this.limits);
    return inputs.length === 0 ? [] : this.store.enqueueMany(inputs, options);
  }

  /** enqueueMany inside the caller's transaction, checked the same way (a single task as enqueue checks it); PostgreSQL stores only. */
  async enqueueWithin(connection: SqlConnection, inputs: EnqueueInput[]): Promise<EnqueueResult[]> {
    if (!this.store.enqueueWithin) {
      const here = this.remote ? "a taskpool server, over HTTP" : this.dialect;
      throw new TaskpoolError("postgres_only", `Enqueueing inside your own transaction needs a PostgreSQL database; this pool is on ${here}. Its enqueue and enqueueMany commit on their own, not with your writes: to tie tasks to your rows, enqueue them once your transaction has committed (with an idempotency key, so a retry after a crash creates them once)`);
    }
    if (typeof (connection as Partial<SqlConnection> | null)?.query !== "function") {
      throw new ValidationError("connection: expected your open PostgreSQL connection (a pg Client or PoolClient, after BEGIN)", [{ path: "connection", message: "no query method" }]);
    }
    validate(EnqueueBatchSchema, inputs, "tasks");
    // A single task is checked as enqueue checks it: its errors name no index.
    if (inputs.length === 1) checkNewTask(inputs[0], this.limits);
    else inputs.forEach((input, index) => atItem(index, () => checkNewTask(input, this.limits)));
    return inputs.length === 0 ? [] : this.store.enqueueWithin(connection, inputs);
  }

  async claim(options: ClaimOptions): Promise<ClaimedTask[]> {
    checkClaim(options);
    return this.store.claim(options);
  }

  async claimMany(claims: ClaimOptions[]): Promise<ClaimedTask[][]> {
    claims.forEach((options, index) => atItem(index, () => checkClaim(options)));
    return claims.length === 0 ? [] : this.store.claimMany(claims);
  }

  /**
   * claimMany for independent callers (a server's concurrent claim requests): a bad claim is refused
   * alone, as its outcome, and the others are claimed together.
   */
  claimEach(claims: ClaimOptions[]): Promise<Outcome<ClaimedTask[]>[]> {
    return this.each(claims, checkClaim, (valid) => this.store.claimMany(valid));
  }

  async claimById(id: number, options: ClaimByIdOptions): Promise<ClaimedTask> {
    checkId(id);
    validate(ClaimByIdOptionsSchema, options, "claim options");
    return this.store.claimById(id, options);
  }

  /**
   * A start repeated under the lease that started the task (its first answer was lost, and a client
   * sent it again) answers the running task: refused, it told the worker to drop a task it holds.
   */
  async start(id: number, lease: Lease): Promise<Task> {
    checkLease(id, lease);
    try {
      return await this.store.start(id, lease);
    } catch (error) {
      // The refusal compared the lease first: a lease it did not match is lease_lost, not this.
      if (!(error instanceof InvalidTransitionError && error.from === "running")) throw error;
      const task = await this.store.get(id);
      if (!inStateUnder(task, "running", lease)) throw error;
      return task;
    }
  }

  async heartbeat(id: number, lease: Lease, options: HeartbeatOptions = {}): Promise<Task> {
    checkLease(id, lease);
    validate(HeartbeatOptionsSchema, options, "heartbeat");
    return this.store.heartbeat(id, lease, options);
  }

  async checkpoint(id: number, lease: Lease, data: Json): Promise<Task> {
    checkLease(id, lease);
    checkStored(this.limits, "checkpoint", data);
    return this.store.checkpoint(id, lease, data);
  }

  async progress(id: number, lease: Lease, progress: number): Promise<Task> {
    checkLease(id, lease);
    validate(ProgressSchema, progress, "progress");
    return this.store.progress(id, lease, progress);
  }

  async complete(id: number, lease: Lease, options: CompleteOptions = {}): Promise<CompleteResult> {
    checkLease(id, lease);
    validate(CompleteOptionsSchema, options, "completion");
    checkStored(this.limits, "result", options.result ?? null);
    (options.followUps ?? []).forEach((input, index) => atItem(index, () => checkNewTask(input, this.limits, "followUps"), "followUps"));
    return this.store.complete(id, lease, options);
  }

  /** A bad item (or a repeated id) is refused on its own, as its outcome; the others are written. */
  async completeMany(items: Completion[], options?: BatchOptions): Promise<BatchOutcome[]> {
    return this.batch(items, (item) => {
      validate(CompletionSchema, item, "completion");
      checkStored(this.limits, "result", item.result ?? null);
    }, (valid) => this.store.completeMany(valid, options));
  }

  async failMany(items: Failure[], options?: BatchOptions): Promise<BatchOutcome[]> {
    return this.batch(items, (item) => validate(FailureSchema, item, "failure"), (valid) => this.store.failMany(valid.map(cutFailure), options));
  }

  async fail(id: number, lease: Lease, options: FailOptions): Promise<Task> {
    checkLease(id, lease);
    validate(FailOptionsSchema, options, "failure");
    return this.store.fail(id, lease, cutFailure(options));
  }

  async release(id: number, lease: Lease, options: ReleaseOptions = {}): Promise<Task> {
    checkLease(id, lease);
    validate(ReleaseOptionsSchema, options, "release");
    if (options.checkpoint !== undefined) checkStored(this.limits, "checkpoint", options.checkpoint);
    return this.store.release(id, lease, options);
  }

  async cancel(id: number, options: CancelOptions = {}): Promise<Task> {
    checkId(id);
    validate(CancelOptionsSchema, options, "cancel options");
    return this.store.cancel(id, options);
  }

  async retry(id: number, options: RetryOptions = {}): Promise<Task> {
    checkId(id);
    validate(RetryOptionsSchema, options, "retry options");
    return this.store.retry(id, options);
  }

  async reserve(id: number, workerId: string, seconds: number): Promise<Task> {
    checkId(id);
    validate(WorkerId, workerId, "worker_id");
    validate(Seconds, seconds, "seconds");
    return this.store.reserve(id, workerId, seconds);
  }

  async get(id: number): Promise<Task | null> {
    checkId(id);
    return this.store.get(id);
  }

  async list(filter: TaskFilter = {}, page: Page = {}): Promise<TaskPage> {
    validate(TaskFilterSchema, filter, "task filter");
    validate(PageSchema, page, "page");
    // A cursor that is none, or another listing's, is refused before the store is asked.
    resolveList(filter, page);
    return this.store.list(filter, page);
  }

  counts(): Promise<TaskCounts> {
    return this.store.counts();
  }

  async recount(options: RecountOptions = {}): Promise<RecountResult> {
    validate(RecountOptionsSchema, options, "recount options");
    return this.store.recount(options);
  }

  async events(taskId: number, query: EventsQuery = {}): Promise<TaskEvent[]> {
    checkId(taskId);
    validate(EventsQuerySchema, query, "events query");
    return this.store.events(taskId, query);
  }

  async registerTaskType(definition: TaskTypeDefinition): Promise<RegisterTaskTypeResult> {
    checkTaskTypeDefinition(definition, this.limits);
    return this.store.registerTaskType(definition);
  }

  async getTaskType(name: string): Promise<TaskTypeRecord | null> {
    validate(TaskTypeName, name, "task type name");
    return this.store.getTaskType(name);
  }

  listTaskTypes(): Promise<TaskTypeRecord[]> {
    return this.store.listTaskTypes();
  }

  async taskTypeVersions(name: string): Promise<TaskTypeRecord[]> {
    validate(TaskTypeName, name, "task type name");
    return this.store.taskTypeVersions(name);
  }

  async workerHeartbeat(beat: WorkerBeat): Promise<WorkerBeatResult> {
    this.checkBeat(beat);
    return this.store.workerHeartbeat(distinctRoles(beat));
  }

  /** All or nothing, like claimMany: a bad beat or a worker beating twice refuses the lot, naming the index. */
  async workerHeartbeatMany(beats: WorkerBeat[]): Promise<WorkerBeatResult[]> {
    const seen = new Set<string>();
    beats.forEach((beat, index) => atItem(index, () => this.checkBeat(beat, seen)));
    return beats.length === 0 ? [] : this.store.workerHeartbeatMany(beats.map(distinctRoles));
  }

  /** workerHeartbeatMany for independent callers, as claimEach: a bad beat is refused alone. */
  workerHeartbeatEach(beats: WorkerBeat[]): Promise<Outcome<WorkerBeatResult>[]> {
    const seen = new Set<string>();
    return this.each(beats, (beat) => this.checkBeat(beat, seen), (valid) => this.store.workerHeartbeatMany(valid.map(distinctRoles)));
  }

  async shutdownWorker(workerId: string, runId?: string): Promise<number[]> {
    validate(WorkerId, workerId, "workerId");
    if (runId !== undefined) validate(WorkerShutdownSchema, { runId }, "worker shutdown");
    return this.store.shutdownWorker(workerId, runId);
  }

  async listWorkers(query: WorkerQuery = {}): Promise<WorkerList> {
    validate(WorkerQuerySchema, query, "worker query");
    // A cursor that is none, or another listing's, is refused before the store is asked.
    resolveWorkerList(query);
    return this.store.listWorkers(query);
  }

  async sweep(options: SweepOptions): Promise<SweepResult> {
    validate(SweepOptionsSchema, options, "sweep options");
    return this.store.sweep(options);
  }

  async nextRecoveryIn(options: SweepOptions): Promise<number | null> {
    validate(SweepOptionsSchema, options, "sweep options");
    return this.store.nextRecoveryIn(options);
  }

  /** Also refuses a failed-task age shorter than the completed one (see core/retention.ts). */
  async prune(options: PruneOptions): Promise<PruneResult> {
    validate(PruneOptionsSchema, options, "prune options");
    if (options.failedAfterSeconds !== null && options.failedAfterSeconds < options.completedAfterSeconds) {
      throw new ValidationError(
        `Invalid prune options: failedAfterSeconds (${options.failedAfterSeconds}) is shorter than completedAfterSeconds (${options.completedAfterSeconds}); keep failed tasks at least as long, or pass null to keep them until retried`,
        [{ path: "failedAfterSeconds", message: "below completedAfterSeconds" }],
      );
    }
    return this.store.prune(options);
  }

  async tryLead(name: string, holder: string, ttlSeconds: number): Promise<boolean> {
    validate(LeadershipSchema, { name, holder, ttlSeconds }, "leadership");
    return this.store.tryLead(name, holder, ttlSeconds);
  }

  async resign(name: string, holder: string): Promise<void> {
    validate(LeadershipSchema, { name, holder, ttlSeconds: 1 }, "leadership");
    return this.store.resign(name, holder);
  }

  async reassignments(options: ReassignmentQuery = {}): Promise<ReassignmentEvent[]> {
    validate(ReassignmentQuerySchema, options, "reassignment query");
    return this.store.reassignments(options);
  }

  reassignmentStats(): Promise<ReassignmentStats> {
    return this.store.reassignmentStats();
  }

  reassignmentRate(): Promise<ReassignmentStats["last24Hours"]> {
    return this.store.reassignmentRate();
  }

  capacity(): Promise<CapacityRow[]> {
    return this.store.capacity();
  }

  async throughput(query: ThroughputQuery = {}): Promise<Throughput> {
    validate(ThroughputQuerySchema, query, "throughput query");
    return this.store.throughput(query);
  }

  async failures(query: FailuresQuery = {}): Promise<Failures> {
    validate(FailuresQuerySchema, query, "failures query");
    return this.store.failures(query);
  }

  subscribe(listener: (taskTypes: string[]) => void): Promise<() => Promise<void>> {
    return this.store.subscribe(listener);
  }

  async recordSweep(name: string, holder: string, intervalSeconds: number): Promise<void> {
    validate(LeadershipSchema, { name, holder, ttlSeconds: intervalSeconds }, "leadership");
    return this.store.recordSweep(name, holder, intervalSeconds);
  }

  async leadershipStatus(name: string): Promise<LeadershipStatus> {
    validate(LeadershipSchema.properties.name, name, "leadership name");
    return this.store.leadershipStatus(name);
  }

  async createApiKey(key: NewApiKey): Promise<ApiKeyRecord> {
    validate(NewApiKeySchema, key, "API key");
    return this.store.createApiKey(key);
  }

  listApiKeys(): Promise<ApiKeyRecord[]> {
    return this.store.listApiKeys();
  }

  async findApiKey(keyHash: string): Promise<ApiKeyRecord | null> {
    validate(ApiKeyHash, keyHash, "key hash");
    return this.store.findApiKey(keyHash);
  }

  async revokeApiKey(id: number): Promise<ApiKeyRecord> {
    validate(ApiKeyId, id, "API key id");
    return this.store.revokeApiKey(id);
  }

  async saveSchedule(definition: ScheduleDefinition): Promise<SaveScheduleResult> {
    checkScheduleInput(definition, this.limits);
    // A fan-out reading the results of no schedule is refused by the store, in the save's transaction
    // (a delete of that schedule cannot come between the check and the save); over HTTP, by the server's.
    return this.store.saveSchedule(definition);
  }

  async getSchedule(name: string): Promise<ScheduleRecord | null> {
    validate(ScheduleName, name, "schedule name");
    return this.store.getSchedule(name);
  }

  listSchedules(): Promise<ScheduleRecord[]> {
    return this.store.listSchedules();
  }

  async setScheduleEnabled(name: string, enabled: boolean): Promise<ScheduleRecord> {
    validate(ScheduleName, name, "schedule name");
    validate(Enabled, enabled, "enabled");
    return this.store.setScheduleEnabled(name, enabled);
  }

  async cancelScheduleTasks(name: string): Promise<number[]> {
    validate(ScheduleName, name, "schedule name");
    return this.store.cancelScheduleTasks(name);
  }

  async removeSchedule(name: string): Promise<ScheduleRecord> {
    validate(ScheduleName, name, "schedule name");
    return this.store.removeSchedule(name);
  }

  async fireDueSchedules(options: FireOptions): Promise<FiredSchedule[]> {
    validate(FireOptionsSchema, options, "fire options");
    return this.store.fireDueSchedules(options);
  }

  async generateTasks(input: GenerateInput): Promise<GenerateResult> {
    validate(GenerateInputSchema, input, "generation");
    checkStored(this.limits, "params", input.params ?? {});
    checkFanOut(input);
    return this.store.generateTasks(input);
  }

  private async batch<T extends { id: number }>(items: T[], check: (item: T) => void, write: (valid: T[]) => Promise<BatchOutcome[]>): Promise<BatchOutcome[]> {
    validate(BatchSchema, items, "batch");
    const seen = new Set<number>();
    const outcomes = await this.each(items, (item, index) => {
      check(item);
      if (seen.has(item.id)) throw new ValidationError(`Invalid batch: task ${item.id} appears more than once`, [{ path: `${index}.id`, message: "repeated" }]);
      seen.add(item.id);
    }, write);
    return outcomes.map((o, index) => (o.ok ? o.value : { id: items[index]?.id, ok: false, error: o.error }));
  }

  /** Checks each item; a refused one answers its ValidationError as its outcome, and the rest go to `write` together. */
  private async each<I, O>(items: I[], check: (item: I, index: number) => void, write: (valid: I[]) => Promise<O[]>): Promise<Outcome<O>[]> {
    const refused = new Map<number, ValidationError>();
    items.forEach((item, index) => {
      try {
        check(item, index);
      } catch (error) {
        if (!(error instanceof ValidationError)) throw error;
        refused.set(index, error);
      }
    });
    const valid = items.filter((_, index) => !refused.has(index));
    const written = valid.length > 0 ? await write(valid) : [];
    let next = 0;
    return items.map((_, index) => {
      const error = refused.get(index);
      return error ? { ok: false, error } : { ok: true, value: written[next++] };
    });
  }

  /** A worker's beat; `seen` refuses a worker beating twice in one batch (its upsert would meet itself). */
  private checkBeat(beat: WorkerBeat, seen?: Set<string>): void {
    validate(WorkerBeatSchema, beat, "worker heartbeat");
    if (beat.metadata !== undefined) checkStored(this.limits, "metadata", beat.metadata);
    if (seen?.has(beat.workerId)) throw new ValidationError(`Invalid worker heartbeat: worker ${beat.workerId} beats more than once in this batch`, [{ path: "workerId", message: "repeated" }]);
    seen?.add(beat.workerId);
  }


  /** A single enqueue call: its options, then its task. */
  private checkEnqueueCall(input: EnqueueInput, options: EnqueueCallOptions): void {
    validate(EnqueueCallOptionsSchema, options, "enqueue options");
    checkNewTask(input, this.limits);
  }
}

const Enabled = Type.Boolean();

/** What a per-item call answers for each item: its value, or why it was refused (nothing of it was written). */
export type Outcome<T> = { ok: true; value: T } | { ok: false; error: ValidationError };

/**
 * A beat with each of its roles once: a role listed twice made the worker count twice among its role's
 * active workers (capacity's figures, the Capacity page). Kept rather than refused: a worker beating
 * so was accepted before, and refusing its beats would fence it.
 */
function distinctRoles(beat: WorkerBeat): WorkerBeat {
  return beat.roles && new Set(beat.roles).size !== beat.roles.length ? { ...beat, roles: [...new Set(beat.roles)] } : beat;
}

function checkClaim(options: ClaimOptions): void {
  validate(ClaimOptionsSchema, options, "claim options");
}

function checkId(id: number): void {
  validate(TaskId, id, "task id");
}

/** Other fields of the lease object are ignored: callers may pass the claimed task itself. */
function checkLease(id: number, lease: Lease): void {
  checkId(id);
  validate(LeaseSchema, lease, "lease");
}

/** `store` after its close(): its properties as they were, every call refused with PoolClosedError but close(), which does nothing. */
function closedStore(store: Store): Store {
  return new Proxy(store, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== "function") return value;
      if (name === "close") return async () => {};
      return () => Promise.reject(new PoolClosedError(`${String(name)}()`));
    },
  });
}

/** A checked failure's message and stack as stored: cut to MAX_MESSAGE_LENGTH (see truncatedMessage). */
function cutFailure<F extends { error: string; stack?: string }>(failure: F): F {
  return { ...failure, error: truncatedMessage(failure.error), ...(failure.stack === undefined ? {} : { stack: truncatedMessage(failure.stack) }) };
}
