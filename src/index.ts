// The public API of taskpool. Everything not exported here is private and may change.
export { openStore, type OpenStoreOptions } from "./store/open-store.js";
export type { Store, EnqueueResult, CompleteResult } from "./store/store.js";
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
export { type Clock, ManualClock, systemClock } from "./core/clock.js";
export {
  AlreadyClaimedError,
  ConcurrencyKeyBusyError,
  InvalidTransitionError,
  LeaseLostError,
  TaskNotFoundError,
  TaskpoolError,
  UniqueKeyTakenError,
  UnsupportedUrlError,
  ValidationError,
} from "./core/errors.js";
