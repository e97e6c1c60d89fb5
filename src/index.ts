// The public API of taskpool. Everything not exported here is private and may change.
export { connect, type ConnectOptions, Taskpool } from "./taskpool.js";
export { Worker, NonRetryableError } from "./worker/worker.js";
export type { WorkerOptions, Handler } from "./worker/options.js";
export type { TaskContext, AbortReason } from "./worker/task-context.js";
export { Coordinator, type CoordinatorOptions } from "./coordinator/coordinator.js";
export type { RecoveryPolicy, ReassignmentEvent, SweepOptions, SweepResult, WorkerRecord, WorkerStatus } from "./core/worker.js";
export { openStore, type OpenStoreOptions } from "./store/open-store.js";
export type { Store, EnqueueResult, CompleteResult, RegisterTaskTypeResult } from "./store/store.js";
export { PostgresStore, type PostgresStoreOptions } from "./store/postgres/postgres-store.js";
export { SqliteStore, type SqliteStoreOptions } from "./store/sqlite/sqlite-store.js";
export type {
  BackoffPolicy,
  ClaimedTask,
  ClaimOptions,
  CompleteOptions,
  EnqueueInput,
  FailOptions,
  Json,
  JsonObject,
  Lease,
  Page,
  SortBy,
  SortOrder,
  Task,
  TaskCounts,
  TaskFilter,
  TaskPage,
  TaskStatus,
} from "./core/task.js";
export type { EventType, TaskEvent } from "./core/event.js";
export type { TaskTypeDefinition, TaskTypeRecord } from "./core/task-type.js";
export { type Clock, ManualClock, systemClock } from "./core/clock.js";
export {
  AlreadyClaimedError,
  ConcurrencyKeyBusyError,
  InvalidTransitionError,
  LeaseLostError,
  TaskNotFoundError,
  TaskpoolError,
  TaskTypeAtCapacityError,
  UniqueKeyTakenError,
  UnsupportedUrlError,
  ValidationError,
} from "./core/errors.js";
