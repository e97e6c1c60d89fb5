/**
 * Schemas of what taskpool returns (tasks, events, workers, capacity…), in the library's camelCase.
 * The HTTP server derives its response schemas from them (core/wire.ts) for the OpenAPI document and
 * converts values with them; a type test (test/server/wire.test.ts) fails when one of them and the
 * TypeScript type it describes drift apart.
 */
import { EVENT_TYPES } from "./event.js";
import { type Json, type JsonObject, TASK_STATUSES } from "./task.js";
import { type TSchema, Type } from "./typebox.js";
import { RECOVERY_POLICIES, WORKER_STATUSES } from "./worker.js";
import { MISSED_TICK_POLICIES } from "./schedule.js";
import { FanOutSchema } from "./schemas.js";

const OneOf = <T extends string>(values: readonly T[]) => Type.Union(values.map((v) => Type.Literal(v)), { description: `one of ${values.join(", ")}` });
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const JsonValue = Type.Unsafe<Json>(Type.Unknown({ description: "any JSON value" }));
const JsonObjectValue = Type.Unsafe<JsonObject>(Type.Record(Type.String(), Type.Unknown(), { description: "a JSON object" }));
const Count = Type.Integer({ minimum: 0 });

export const BackoffRecord = Type.Object({ baseSeconds: Type.Number(), factor: Type.Number(), maxSeconds: Type.Number(), jitter: Type.Number() });

export const TaskRecord = Type.Object(
  {
    id: Type.Integer(),
    taskType: Type.String(),
    taskTypeVersion: Nullable(Type.Integer()),
    params: JsonObjectValue,
    status: OneOf(TASK_STATUSES),
    priority: Type.Integer(),
    scheduledFor: Type.Date(),
    concurrencyKey: Nullable(Type.String()),
    uniqueKey: Nullable(Type.String()),
    attempts: Count,
    maxAttempts: Type.Integer(),
    backoff: BackoffRecord,
    timeoutSeconds: Nullable(Type.Integer()),
    workerId: Nullable(Type.String()),
    /** What start, heartbeat, checkpoint, complete, fail and release must present. */
    leaseToken: Nullable(Type.String()),
    leaseExpiresAt: Nullable(Type.Date()),
    reservedFor: Nullable(Type.String()),
    reservedUntil: Nullable(Type.Date()),
    claimedAt: Nullable(Type.Date()),
    startedAt: Nullable(Type.Date()),
    completedAt: Nullable(Type.Date()),
    lastHeartbeatAt: Nullable(Type.Date()),
    progress: Nullable(Type.Number()),
    checkpoint: JsonValue,
    result: JsonValue,
    errorMessage: Nullable(Type.String()),
    parentId: Nullable(Type.Integer()),
    createdAt: Type.Date(),
    updatedAt: Type.Date(),
  },
  { description: "a task" },
);

/**
 * A task as every answer but the lease holder's shows it: without its lease token. The token is the
 * only proof a lease call asks of a worker besides its id, which anyone can read; answered to every
 * reader, a producer's key could read a running task's token and, with any worker key, complete or
 * fail another worker's task. The claim answers it to the claiming worker, and a lease call to the
 * worker that just presented it (task-leases.ts); nobody else needs it, an admin included (cancel and
 * retry take no lease, and worker_id with lease_expires_at say who holds a task and until when).
 */
export const TaskReadRecord = Type.Omit(TaskRecord, ["leaseToken"], { description: "a task (its lease_token is only answered to the worker holding the lease)" });

export const TaskEventRecord = Type.Object({
  id: Type.Integer(),
  taskId: Nullable(Type.Integer()),
  event: OneOf(EVENT_TYPES),
  fromWorkerId: Nullable(Type.String()),
  toWorkerId: Nullable(Type.String()),
  message: Nullable(Type.String()),
  data: JsonValue,
  createdAt: Type.Date(),
});

// Spelled out (a Record over OneOf would not type as Record<TaskStatus, number>); the type test catches a new status.
const StatusCounts = Type.Object({ pending: Count, claimed: Count, running: Count, completed: Count, failed: Count, cancelled: Count });
export const TaskCountsRecord = Type.Object({
  byStatus: StatusCounts,
  /** Keyed by task type; a status without tasks is left out. */
  byType: Type.Record(Type.String(), Type.Partial(StatusCounts)),
});

export const CapacityRecord = Type.Object({
  taskType: Type.String(),
  pendingTasks: Count,
  readyTasks: Count,
  runningTasks: Count,
  activeWorkers: Count,
  completedLastHour: Count,
  maxRunning: Nullable(Type.Integer()),
  tasksPerWorkerHour: Nullable(Type.Number()),
  estimatedHoursToDrain: Nullable(Type.Number()),
  workersNeeded: Type.Object({ for1Hour: Nullable(Count), for4Hours: Nullable(Count), for8Hours: Nullable(Count) }),
  oldestReadySeconds: Nullable(Type.Number({ minimum: 0 })),
});

export const WorkerRecordSchema = Type.Object({
  workerId: Type.String(),
  roles: Type.Array(Type.String()),
  hostname: Nullable(Type.String()),
  pid: Nullable(Type.Integer()),
  version: Nullable(Type.String()),
  capacity: Type.Integer(),
  currentLoad: Count,
  tasksProcessed: Count,
  metadata: JsonObjectValue,
  status: OneOf(WORKER_STATUSES),
  lastSeenAt: Type.Date(),
  startedAt: Type.Date(),
  activeTasks: Count,
  secondsSinceHeartbeat: Type.Number(),
  loadPercent: Type.Number(),
});

/** A page of the registry (WorkerList): `counts` is the whole registry's, by status, what the page left out included. */
export const WorkerListRecord = Type.Object({
  workers: Type.Array(WorkerRecordSchema),
  counts: Type.Object({ active: Count, stale: Count, dead: Count, inactive: Count }),
  nextCursor: Nullable(Type.String()),
});

export const ReassignmentRecord = Type.Object({
  id: Type.Integer(),
  taskId: Type.Integer(),
  fromWorkerId: Nullable(Type.String()),
  toWorkerId: Nullable(Type.String()),
  reason: Type.String(),
  checkpoint: JsonValue,
  success: Type.Boolean(),
  errorMessage: Nullable(Type.String()),
  createdAt: Type.Date(),
});

export const ReassignmentStatsRecord = Type.Object({
  last24Hours: Type.Object({ total: Count, successful: Count, successRatePercent: Nullable(Type.Number()) }),
  failingWorkers: Type.Array(Type.Object({ workerId: Nullable(Type.String()), failureCount: Count, lastFailureAt: Type.Date() })),
  repeatedTasks: Type.Array(Type.Object({ taskId: Type.Integer(), reassignmentCount: Count, lastReassignmentAt: Type.Date() })),
});

export const FailuresRecord = Type.Object({
  groups: Type.Array(Type.Object({ taskType: Type.String(), errorMessage: Nullable(Type.String()), taskIds: Type.Array(Type.Integer()), latestAt: Type.Date() })),
  read: Count,
  more: Type.Boolean(),
});

export const ThroughputRecord = Type.Object({
  minutes: Type.Array(Type.Object({ minute: Type.Date(), completed: Count, failed: Count, pickupSeconds: Nullable(Type.Number()) })),
  completed: Count,
  failed: Count,
  pickupSeconds: Type.Object({ mean: Nullable(Type.Number()), max: Nullable(Type.Number()) }),
});

export const TaskTypeRecordSchema = Type.Object({
  name: Type.String(),
  description: Nullable(Type.String()),
  paramsSchema: Type.Union([JsonObjectValue, Type.Null()]),
  priority: Type.Integer(),
  maxAttempts: Type.Integer(),
  backoff: BackoffRecord,
  timeoutSeconds: Nullable(Type.Integer()),
  recoveryPolicy: OneOf(RECOVERY_POLICIES),
  maxRunning: Nullable(Type.Integer()),
  version: Type.Integer(),
  createdAt: Type.Date(),
});

export const SweepResultRecord = Type.Object({
  staleWorkers: Type.Array(Type.String()),
  deadWorkers: Type.Array(Type.String()),
  requeued: Type.Array(Type.Integer()),
  failed: Type.Array(Type.Integer()),
  reassigned: Type.Array(Type.Object({ taskId: Type.Integer(), workerId: Type.String() })),
  unassigned: Type.Array(Type.Integer()),
});

export const ScheduleRunRecord = Type.Object({
  tickAt: Type.Date(),
  firedAt: Type.Date(),
  tasksCreated: Count,
  skippedTicks: Count,
  message: Type.String(),
  error: Nullable(Type.String()),
});

export const ScheduleRecordSchema = Type.Object(
  {
    name: Type.String(),
    taskType: Type.String(),
    params: JsonObjectValue,
    cron: Type.String(),
    timezone: Type.String(),
    enabled: Type.Boolean(),
    fanOut: Type.Union([FanOutSchema, Type.Null()]),
    concurrencyKey: Nullable(Type.String()),
    uniqueKey: Nullable(Type.String()),
    priority: Nullable(Type.Integer()),
    missedTicks: OneOf(MISSED_TICK_POLICIES),
    nextRunAt: Nullable(Type.Date()),
    lastRunAt: Nullable(Type.Date()),
    lastResult: Type.Union([ScheduleRunRecord, Type.Null()]),
    createdAt: Type.Date(),
    updatedAt: Type.Date(),
  },
  { description: "a recurring schedule" },
);

export const GenerateResultRecord = Type.Object({
  created: Count,
  batches: Type.Array(Type.Object({ batch: Type.Integer(), scheduledFor: Type.Date(), taskIds: Type.Array(Type.Integer()) })),
  message: Type.String(),
});
