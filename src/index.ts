// The public API of taskpool. Everything not exported here is private and may change; the stores
// behind the API are internal (connect() picks one from the URL).
export { connect, type ConnectOptions, Taskpool, type TransactionProducer } from "./api/taskpool.js";
export { type CheckedStore, DEFAULT_LIMITS, type Limits } from "./api/checked-store.js";
export { Worker, NonRetryableError, WorkerStoppingError } from "./worker/worker.js";
export type { WorkerOptions, Handler } from "./worker/options.js";
export type { TaskContext, AbortReason } from "./worker/task-context.js";
export { Coordinator, type CoordinatorOptions } from "./coordinator/coordinator.js";
export type { RecoveryPolicy, ReassignmentEvent, SweepOptions, SweepResult, WorkerBeat, WorkerBeatResult, WorkerList, WorkerQuery, WorkerRecord, WorkerStatus } from "./core/worker.js";
export type { CapacityRow, FailureGroup, Failures, ReassignmentStats, Throughput, ThroughputMinute } from "./core/monitoring.js";
export type { RecountChange, RecountOptions, RecountResult } from "./core/recount.js";
export type { EnqueueResult, CompleteResult, RegisterTaskTypeResult, SqlConnection } from "./store/store.js";
export type {
  CancelOptions,
  ClaimByIdOptions,
  ClaimOptions,
  CompleteOptions,
  EnqueueCallOptions,
  EnqueueInput,
  EnqueueOptions,
  EventsQuery,
  FailOptions,
  FailuresQuery,
  HeartbeatOptions,
  Lease,
  Page,
  ReassignmentQuery,
  ReleaseOptions,
  RetryOptions,
  TaskFilter,
  ThroughputQuery,
} from "./core/schemas.js";
export type { BackoffPolicy, ClaimedTask, Json, JsonObject, SortBy, SortOrder, Task, TaskCounts, TaskPage, TaskStatus } from "./core/task.js";
export type { EventType, TaskEvent } from "./core/event.js";
export type { TaskTypeDefinition, TaskTypeRecord } from "./core/task-type.js";
export type { FanOut, GeneratedBatch, GenerateInput, GenerateResult, MissedTickPolicy, ScheduleDefinition, ScheduleRecord, ScheduleRunResult } from "./core/schedule.js";
export type { ScheduleOperations } from "./api/schedules.js";
export type { ApiKeyRecord, ApiKeyScope } from "./core/api-key.js";
export type { ApiKeyOptions } from "./core/schemas.js";
export { type Clock, ManualClock, systemClock } from "./core/clock.js";
export {
  AlreadyClaimedError,
  ApiKeyNotFoundError,
  ConcurrencyKeyBusyError,
  DatabaseNotFoundError,
  type FieldIssue,
  IdempotencyKeyReusedError,
  InvalidTransitionError,
  isRefusal,
  LeaseLostError,
  PoolClosedError,
  RateLimitedError,
  ScheduleNotFoundError,
  SchemaTooNewError,
  TaskNotFoundError,
  TaskpoolError,
  TaskTypeAtCapacityError,
  UnavailableError,
  UniqueKeyTakenError,
  UnsupportedUrlError,
  ValidationError,
  WorkerNotFoundError,
} from "./core/errors.js";
export { HttpApiError, NotOverHttpError, ServerTimeoutError, ServerUnreachableError } from "./client/errors.js";
