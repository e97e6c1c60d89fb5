/**
 * The Store interface over a taskpool server's HTTP API, so `connect("http://host:port", { apiKey })`
 * gives the same Taskpool as a database URL: the same worker runtime (claims, fenced lease writes,
 * batched completions, wake-ups), producers' and operators' calls.
 *
 * Each call is made through the server's own route definition (server/routes/): its schemas turn
 * the library's values into the wire's snake_case JSON and the answer back, so the client and the
 * server cannot disagree about a field. What belongs next to the database is not offered over HTTP
 * and says so (NotOverHttpError): leading and sweeping (run the coordinator where the database is:
 * `taskpool serve` runs one, or `taskpool coordinator`), reservations (the coordinator's), and
 * API keys (`taskpool keys` on the database).
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { COORDINATOR_LEADERSHIP } from "../coordinator/coordinator.js";
import type { ApiKeyRecord } from "../core/api-key.js";
import type { TaskEvent } from "../core/event.js";
import type { CapacityRow, Failures, ReassignmentStats, Throughput } from "../core/monitoring.js";
import type { FiredSchedule, GenerateResult, SaveScheduleResult, ScheduleDefinition, ScheduleRecord } from "../core/schedule.js";
import type { CancelOptions, RetryOptions, ClaimByIdOptions, Completion, EnqueueCallOptions, EventsQuery, Failure, HeartbeatOptions, FailuresQuery, ReassignmentQuery, ReleaseOptions, ThroughputQuery } from "../core/schemas.js";
import type { ClaimedTask, ClaimOptions, CompleteOptions, EnqueueInput, FailOptions, Json, Lease, Page, Task, TaskCounts, TaskFilter, TaskPage } from "../core/task.js";
import type { TaskTypeDefinition, TaskTypeRecord } from "../core/task-type.js";
import type { PruneResult } from "../core/retention.js";
import type { RecountResult } from "../core/recount.js";
import type { TSchema } from "../core/typebox.js";
import { fromWire, toWire } from "../core/wire.js";
import type { ReassignmentEvent, SweepResult, WorkerBeat, WorkerBeatResult, WorkerList, WorkerQuery } from "../core/worker.js";
import { type RouteDefinition, successEnvelope } from "../server/route.js";
import { healthRoutes } from "../server/routes/health.js";
import { reassignmentRoutes } from "../server/routes/reassignments.js";
import { scheduleRoutes } from "../server/routes/schedules.js";
import { taskLeaseRoutes } from "../server/routes/task-leases.js";
import { taskTypeRoutes } from "../server/routes/task-types.js";
import { taskRoutes } from "../server/routes/tasks.js";
import { workerTransportRoutes } from "../server/routes/worker-transport.js";
import { workerRoutes } from "../server/routes/workers.js";
import type { BatchOptions, BatchOutcome, CompleteResult, EnqueueResult, LeadershipStatus, RegisterTaskTypeResult, Store } from "../store/store.js";
import { InvalidTransitionError, retryAfterMs, ValidationError } from "../core/errors.js";
import { errorFromReply, keysNotOverHttp, NotOverHttpError, recountNotOverHttp } from "./errors.js";
import { HttpTransport, type RequestOptions, type TransportOptions } from "./http-transport.js";

/** Each route by "METHOD url", with its success envelope built once (the wire conversion keeps its work per schema). */
const ROUTES = new Map<string, { route: RouteDefinition; reply: TSchema }>(
  [...taskRoutes, ...taskLeaseRoutes, ...workerTransportRoutes, ...workerRoutes, ...reassignmentRoutes, ...taskTypeRoutes, ...scheduleRoutes, ...healthRoutes].map((r) => [
    `${r.method} ${r.url}`,
    { route: r, reply: successEnvelope(r.reply) },
  ]),
);

/** How long one wake-up wait lasts before it is asked again (the server allows 30 s). */
const WAKE_WAIT_MS = 25_000;

interface CallInput {
  params?: Record<string, string | number>;
  query?: object;
  body?: object;
  /** Request headers the route reads (its `headers` schema), by wire name. */
  headers?: Record<string, string>;
}

/**
 * Attempts of an enqueue: about 8 to 15 s of backoff in all, enough for `taskpool serve` to be
 * restarted (other calls: the transport's 6, about 2 to 3 s; a `retryForMs` given on connect sets
 * both). Safe, as every enqueue has a key.
 */
const CREATE_ATTEMPTS = 12;

/** An enqueue's Idempotency-Key (the caller's, or one made for the call) and how it is sent: again, for CREATE_ATTEMPTS. */
function keyedCreate(options: EnqueueCallOptions): { headers: Record<string, string>; request: RequestOptions } {
  const idempotencyKey = options.idempotencyKey ?? randomUUID();
  return { headers: { "idempotency-key": idempotencyKey }, request: { repeatable: "yes", subject: { idempotencyKey }, minAttempts: CREATE_ATTEMPTS } };
}

/** A task the server answered 404 for: null where the store answers null. */
const orNull = <T>(promise: Promise<T>): Promise<T | null> => promise.catch((error) => (error?.code === "not_found" ? null : Promise.reject(error)));

export class HttpStore implements Store {
  /** The database behind the server, learned from /readyz when connecting. */
  dialect: Store["dialect"] = "postgres";
  readonly remote = true;
  private readonly transport: HttpTransport;
  private readonly subscriptions = new Set<AbortController>();

  constructor(url: string, options: TransportOptions = {}) {
    this.transport = new HttpTransport(new URL(url), options);
  }

  /** The server migrates its database (none here); connecting checks it answers and which database it runs on. */
  async migrate(): Promise<number[]> {
    const { database } = await this.call<{ database: Store["dialect"] }>("GET /readyz", {}, { repeatable: "yes" });
    this.dialect = database;
    return [];
  }

  async close(): Promise<void> {
    for (const s of this.subscriptions) s.abort();
    this.transport.close();
  }

  /**
   * Every enqueue carries an idempotency key, the caller's or one made for the call, so the transport
   * may send it again when its answer was lost (a reset connection, a server killed mid-request): the
   * server creates the tasks once and answers a repeat with them (replayed: true). So it is also sent
   * for longer than other calls (CREATE_ATTEMPTS), through a server's restart: a producer's task is
   * not lost to a deploy.
   */
  async enqueue(input: EnqueueInput, options: EnqueueCallOptions = {}): Promise<EnqueueResult> {
    const { headers, request } = keyedCreate(options);
    const result = await this.call<EnqueueResult>("POST /api/tasks", { body: input, headers }, request);
    return { ...result, task: unleased(result.task) };
  }

  async enqueueMany(inputs: EnqueueInput[], options: EnqueueCallOptions = {}): Promise<EnqueueResult[]> {
    const { headers, request } = keyedCreate(options);
    const { results } = await this.call<{ results: EnqueueResult[] }>("POST /api/tasks/batch", { body: { tasks: inputs }, headers }, request).catch((error) => {
      // The server names an item inside its body's `tasks`; the library, inside the list it was given.
      if (error instanceof ValidationError) error.issues.forEach((i) => (i.path = i.path.replace(/^tasks\./, "")));
      throw error;
    });
    return results.map((result) => ({ ...result, task: unleased(result.task) }));
  }

  async claim(options: ClaimOptions): Promise<ClaimedTask[]> {
    try {
      return (await this.call<{ tasks: ClaimedTask[] }>("POST /api/tasks/claim", { body: options }, { repeatable: "only-if-unsent" })).tasks;
    } catch (error) {
      if ((error as { code?: string }).code === "no_tasks") return [];
      throw error;
    }
  }

  /** One request per claim, sent together: the server shares them out in one statement. */
  async claimMany(claims: ClaimOptions[]): Promise<ClaimedTask[][]> {
    return Promise.all(claims.map((options) => this.claim(options)));
  }

  async claimById(id: number, options: ClaimByIdOptions): Promise<ClaimedTask> {
    return (await this.call<{ task: ClaimedTask }>("POST /api/tasks/:id/claim", { params: { id }, body: options }, { repeatable: "only-if-unsent", subject: { taskId: id } })).task;
  }

  start(id: number, lease: Lease): Promise<Task> {
    return this.leaseCall("start", id, leaseOf(lease));
  }

  heartbeat(id: number, lease: Lease, options: HeartbeatOptions = {}): Promise<Task> {
    return this.leaseCall("heartbeat", id, { ...leaseOf(lease), ...options });
  }

  checkpoint(id: number, lease: Lease, data: Json): Promise<Task> {
    return this.leaseCall("checkpoint", id, { ...leaseOf(lease), checkpoint: data });
  }

  progress(id: number, lease: Lease, progress: number): Promise<Task> {
    return this.leaseCall("progress", id, { ...leaseOf(lease), progress });
  }

  complete(id: number, lease: Lease, options: CompleteOptions = {}): Promise<CompleteResult> {
    return this.call("POST /api/tasks/:id/complete", { params: { id }, body: { ...leaseOf(lease), ...options } }, { repeatable: "yes", subject: { taskId: id } });
  }

  completeMany(items: Completion[], options: BatchOptions = {}): Promise<BatchOutcome[]> {
    return this.batch("POST /api/tasks/complete", { completions: items.map((i) => ({ ...i, lease: leaseOf(i.lease) })), returnTasks: options.returnTasks });
  }

  fail(id: number, lease: Lease, options: FailOptions): Promise<Task> {
    return this.leaseCall("fail", id, { ...leaseOf(lease), ...options });
  }

  failMany(items: Failure[], options: BatchOptions = {}): Promise<BatchOutcome[]> {
    return this.batch("POST /api/tasks/fail", { failures: items.map((i) => ({ ...i, lease: leaseOf(i.lease) })), returnTasks: options.returnTasks });
  }

  release(id: number, lease: Lease, options: ReleaseOptions = {}): Promise<Task> {
    return this.leaseCall("release", id, { ...leaseOf(lease), ...options });
  }

  async cancel(id: number, options: CancelOptions = {}): Promise<Task> {
    const call = this.call<{ task: Task }>("POST /api/tasks/:id/cancel", { params: { id }, body: options }, { repeatable: "yes", subject: { taskId: id } });
    return unleased((await this.appliedEarlier(call, id, "cancelled")).task);
  }

  async retry(id: number, options: RetryOptions = {}): Promise<Task> {
    const call = this.call<{ task: Task }>("POST /api/tasks/:id/retry", { params: { id }, body: options }, { repeatable: "yes", subject: { taskId: id } });
    return unleased((await this.appliedEarlier(call, id, "pending")).task);
  }

  /**
   * An operator's change sent again after its answer was lost, and refused as an invalid transition:
   * the try whose answer was lost made it, if the task is now where the change puts it. Answered as
   * that change; it was reported refused ("not cancelled: it is cancelled", exit 1) though applied.
   */
  private async appliedEarlier(call: Promise<{ task: Task }>, id: number, status: Task["status"]): Promise<{ task: Task }> {
    try {
      return await call;
    } catch (error) {
      if (!(error instanceof InvalidTransitionError) || (error as { afterLostAnswer?: boolean }).afterLostAnswer !== true) throw error;
      const now = await this.get(id).catch(() => null);
      if (now?.status !== status) throw error;
      return { task: now };
    }
  }

  reserve(): Promise<Task> {
    throw new NotOverHttpError("Reserving a task", "reservations are the coordinator's; run it where the database is (taskpool serve runs one)");
  }

  async get(id: number): Promise<Task | null> {
    const found = await orNull(this.taskWithEvents(id, 0));
    return found ? unleased(found.task) : null;
  }

  async list(filter: TaskFilter = {}, page: Page = {}): Promise<TaskPage> {
    const { tasks, nextCursor } = await this.call<TaskPage>("GET /api/tasks", { query: { ...filter, ...page } }, { repeatable: "yes" });
    return { tasks: tasks.map(unleased), nextCursor };
  }

  counts(): Promise<TaskCounts> {
    return this.call("GET /api/tasks/counts", {}, { repeatable: "yes" });
  }

  async events(taskId: number, query: EventsQuery = {}): Promise<TaskEvent[]> {
    return (await orNull(this.taskWithEvents(taskId, query.limit)))?.events ?? [];
  }

  registerTaskType(definition: TaskTypeDefinition): Promise<RegisterTaskTypeResult> {
    return this.call("POST /api/task-types", { body: definition }, { repeatable: "yes" });
  }

  async getTaskType(name: string): Promise<TaskTypeRecord | null> {
    return (await orNull(this.taskTypeWithVersions(name)))?.taskType ?? null;
  }

  async listTaskTypes(): Promise<TaskTypeRecord[]> {
    return (await this.call<{ taskTypes: TaskTypeRecord[] }>("GET /api/task-types", {}, { repeatable: "yes" })).taskTypes;
  }

  async taskTypeVersions(name: string): Promise<TaskTypeRecord[]> {
    return (await orNull(this.taskTypeWithVersions(name)))?.versions ?? [];
  }

  async workerHeartbeat(beat: WorkerBeat): Promise<WorkerBeatResult> {
    const { lost, nextHeartbeatIn } = await this.call<{ lost: number[]; nextHeartbeatIn: number }>("POST /api/workers/heartbeat", { body: beat }, { repeatable: "yes" });
    return { lost, nextHeartbeatInSeconds: nextHeartbeatIn };
  }

  /** One request per beat, sent together: the server writes them in one statement. */
  async workerHeartbeatMany(beats: WorkerBeat[]): Promise<WorkerBeatResult[]> {
    return Promise.all(beats.map((beat) => this.workerHeartbeat(beat)));
  }

  /** Sent again, a shutdown naming its run changes nothing once another run registered (see Store.shutdownWorker). */
  async shutdownWorker(workerId: string, runId?: string): Promise<number[]> {
    const body = runId === undefined ? undefined : { runId };
    return (await this.call<{ released: number[] }>("POST /api/workers/:id/shutdown", { params: { id: workerId }, body }, { repeatable: "yes", subject: { workerId } })).released;
  }

  listWorkers(query: WorkerQuery = {}): Promise<WorkerList> {
    return this.call("GET /api/workers", { query }, { repeatable: "yes" });
  }

  sweep(): Promise<SweepResult> {
    throw coordinatorOnly("Sweeping");
  }

  nextRecoveryIn(): Promise<number | null> {
    throw coordinatorOnly("Sweeping");
  }

  prune(): Promise<PruneResult> {
    throw coordinatorOnly("Pruning finished tasks");
  }

  recount(): Promise<RecountResult> {
    throw recountNotOverHttp();
  }

  tryLead(): Promise<boolean> {
    throw coordinatorOnly("Leading the coordinators");
  }

  resign(): Promise<void> {
    throw coordinatorOnly("Leading the coordinators");
  }

  recordSweep(): Promise<void> {
    throw coordinatorOnly("Recording a sweep");
  }

  /** The coordinators' leadership, as the server's /readyz reports it (`taskpool status` over HTTP). */
  async leadershipStatus(name: string): Promise<LeadershipStatus> {
    if (name !== COORDINATOR_LEADERSHIP) throw coordinatorOnly(`Leadership "${name}"`);
    return (await this.call<{ coordinator: LeadershipStatus }>("GET /readyz", {}, { repeatable: "yes" })).coordinator;
  }

  async reassignments(query: ReassignmentQuery = {}): Promise<ReassignmentEvent[]> {
    return (await this.call<{ reassignments: ReassignmentEvent[] }>("GET /api/reassignments", { query }, { repeatable: "yes" })).reassignments;
  }

  reassignmentStats(): Promise<ReassignmentStats> {
    return this.call("GET /api/reassignments/stats", {}, { repeatable: "yes" });
  }

  /** The API has no call for the rate alone: the statistics' first figure. */
  async reassignmentRate(): Promise<ReassignmentStats["last24Hours"]> {
    return (await this.reassignmentStats()).last24Hours;
  }

  async capacity(): Promise<CapacityRow[]> {
    return (await this.call<{ capacity: CapacityRow[] }>("GET /api/tasks/capacity", {}, { repeatable: "yes" })).capacity;
  }

  throughput(query: ThroughputQuery = {}): Promise<Throughput> {
    return this.call("GET /api/tasks/throughput", { query }, { repeatable: "yes" });
  }

  failures(query: FailuresQuery = {}): Promise<Failures> {
    return this.call("GET /api/tasks/failures", { query }, { repeatable: "yes" });
  }

  /**
   * Wake-ups over HTTP: a loop of waits (`POST /api/tasks/wait`) that calls `listener` with the task
   * types the server heard of each time it hears of work (`[]`: unknown, re-check). Each wait presents
   * the previous answer's cursor, so work announced between two waits wakes the next one at once, and
   * the subscription is in place once this resolves: its first wait, of 0 ms, has been answered. A
   * failed wait is retried after a pause; the worker's polling covers the gap. Once the server answers
   * again (it was restarted, say), `listener` hears `[]`: whatever happened meanwhile went unheard, and
   * a worker whose claims failed during the gap would otherwise sit out its backoff (up to 30 s) first.
   */
  async subscribe(listener: (taskTypes: string[]) => void): Promise<() => Promise<void>> {
    const stop = new AbortController();
    this.subscriptions.add(stop);
    let cursor: string | undefined;
    let unheard = false;
    /** One wait; how long to pause before the next (after a failure). */
    const wait = async (waitMs: number): Promise<number> => {
      try {
        const answer = await this.call<{ woken: boolean; heard: string[]; cursor: string }>(
          "POST /api/tasks/wait",
          { body: cursor === undefined ? { waitMs } : { waitMs, after: cursor } },
          { repeatable: "yes", waitMs, signal: stop.signal },
        );
        cursor = answer.cursor;
        if (unheard) listener([]);
        else if (answer.woken) listener(answer.heard);
        unheard = false;
        return 0;
      } catch (error) {
        unheard = true;
        // A rate-limited key waits as long as the server says.
        return retryAfterMs(error) || 1000;
      }
    };
    let pause = await wait(0);
    const running = (async () => {
      while (!stop.signal.aborted) {
        // Stopping ends the pause at once.
        if (pause > 0) await sleep(pause, undefined, { signal: stop.signal }).catch(() => {});
        // Back from a failure: a wait of 0 ms, answered at once, says the server can be reached.
        if (!stop.signal.aborted) pause = await wait(unheard ? 0 : WAKE_WAIT_MS);
      }
    })();
    return async () => {
      stop.abort();
      this.subscriptions.delete(stop);
      await running;
    };
  }

  saveSchedule(definition: ScheduleDefinition): Promise<SaveScheduleResult> {
    return this.call("POST /api/schedules", { body: definition }, { repeatable: "yes" });
  }

  async getSchedule(name: string): Promise<ScheduleRecord | null> {
    return (await orNull(this.call<{ schedule: ScheduleRecord }>("GET /api/schedules/:name", { params: { name } }, { repeatable: "yes", subject: { scheduleName: name } })))?.schedule ?? null;
  }

  async listSchedules(): Promise<ScheduleRecord[]> {
    return (await this.call<{ schedules: ScheduleRecord[] }>("GET /api/schedules", {}, { repeatable: "yes" })).schedules;
  }

  async setScheduleEnabled(name: string, enabled: boolean): Promise<ScheduleRecord> {
    return (await this.call<{ schedule: ScheduleRecord }>(`POST /api/schedules/:name/${enabled ? "resume" : "pause"}`, { params: { name } }, { repeatable: "yes", subject: { scheduleName: name } })).schedule;
  }

  async cancelScheduleTasks(name: string): Promise<number[]> {
    // Sent again after a lost answer, it would answer [] and the ids cancelled would be lost.
    return (await this.call<{ cancelled: number[] }>("POST /api/schedules/:name/cancel-pending", { params: { name } }, { repeatable: "only-if-unsent", subject: { scheduleName: name } })).cancelled;
  }

  async removeSchedule(name: string): Promise<ScheduleRecord> {
    return (await this.call<{ schedule: ScheduleRecord }>("DELETE /api/schedules/:name", { params: { name } }, { repeatable: "yes", subject: { scheduleName: name } })).schedule;
  }

  fireDueSchedules(): Promise<FiredSchedule[]> {
    throw coordinatorOnly("Firing schedules");
  }

  generateTasks(): Promise<GenerateResult> {
    throw new NotOverHttpError("A generic fan-out", "the server offers seed 004's POST /api/tasks/generate/resync and /discovery");
  }

  createApiKey(): Promise<ApiKeyRecord> {
    throw keysNotOverHttp();
  }

  listApiKeys(): Promise<ApiKeyRecord[]> {
    throw keysNotOverHttp();
  }

  findApiKey(): Promise<ApiKeyRecord | null> {
    throw keysNotOverHttp();
  }

  revokeApiKey(): Promise<ApiKeyRecord> {
    throw keysNotOverHttp();
  }

  private async leaseCall(action: string, id: number, body: object): Promise<Task> {
    return (await this.call<{ task: Task }>(`POST /api/tasks/:id/${action}`, { params: { id }, body }, { repeatable: "yes", subject: { taskId: id } })).task;
  }

  private async batch(route: string, body: object): Promise<BatchOutcome[]> {
    const { outcomes } = await this.call<{ outcomes: { id: number; ok: boolean; status?: Task["status"]; scheduledFor?: Date; task?: Task; error?: string; message?: string }[] }>(route, { body }, { repeatable: "yes" });
    return outcomes.map((o) =>
      o.ok ? { id: o.id, ok: true, status: o.status!, scheduledFor: o.scheduledFor!, ...(o.task ? { task: o.task } : {}) } : { id: o.id, ok: false, error: errorFromReply(409, { error: o.error, message: o.message }, { taskId: o.id }) },
    );
  }

  private taskWithEvents(id: number, eventsLimit?: number) {
    const query = eventsLimit === undefined ? {} : { eventsLimit };
    return this.call<{ task: Task; events: TaskEvent[] }>("GET /api/tasks/:id", { params: { id }, query }, { repeatable: "yes", subject: { taskId: id } });
  }

  private taskTypeWithVersions(name: string) {
    return this.call<{ taskType: TaskTypeRecord; versions: TaskTypeRecord[] }>("GET /api/task-types/:name", { params: { name } }, { repeatable: "yes" });
  }

  /** One call through the server's route definition: the library's values to the wire and back. */
  private async call<T>(key: string, input: CallInput, options: RequestOptions): Promise<T> {
    const known = ROUTES.get(key);
    if (!known) throw new Error(`HttpStore: no route ${key}`);
    const { route } = known;
    let path = route.url.replace(/:(\w+)/g, (_, name: string) => encodeURIComponent(String(input.params?.[name])));
    if (input.query && route.query) path += queryString(toWire(route.query, input.query) as Record<string, unknown>);
    const body = route.body ? toWire(route.body, input.body ?? {}) : undefined;
    const [method] = key.split(" ");
    const reply = await this.transport.send(method, path, body, input.headers ? { ...options, headers: input.headers } : options);
    const answer = fromWire<Record<string, unknown>>(known.reply, reply.body);
    delete answer.success;
    return answer as T;
  }
}

/**
 * A task as the server answers it to a reader: without its lease token, which only the worker holding
 * the lease is told (record-schemas.ts, TaskReadRecord); null here, as a task no one holds has.
 */
const unleased = (task: Task): Task => ({ ...task, leaseToken: null });

/** A lease as the wire wants it: the worker may pass the claimed task itself, whose other fields are not the lease's. */
const leaseOf = (lease: Lease): Lease => ({ workerId: lease.workerId, leaseToken: lease.leaseToken });

function queryString(query: Record<string, unknown>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) search.append(key, String(v));
  }
  const text = search.toString();
  return text === "" ? "" : `?${text}`;
}

const coordinatorOnly = (what: string) => new NotOverHttpError(what, "run the coordinator where the database is (taskpool serve runs one, or taskpool coordinator --db …)");
