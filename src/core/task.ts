export type { ClaimOptions, CompleteOptions, EnqueueInput, EnqueueOptions, FailOptions, Lease, Page, TaskFilter } from "./schemas.js";

/**
 * JSON values as stored in params, checkpoints and results. An object's property may be undefined
 * (left out, as JSON.stringify leaves it), and an array readonly (`as const`): what a handler returns
 * or a producer builds in ordinary code, without a cast.
 */
export type Json = null | boolean | number | string | readonly Json[] | { [key: string]: Json | undefined };
export type JsonObject = { [key: string]: Json | undefined };

/** Every status a task can be in; `completed`, `failed` and `cancelled` are terminal. */
export const TASK_STATUSES = ["pending", "claimed", "running", "completed", "failed", "cancelled"] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** How the delay before a retry grows: min(cap, base * factor^(attempt-1)), then jittered. */
export interface BackoffPolicy {
  baseSeconds: number;
  factor: number;
  maxSeconds: number;
  /** 0 = exact delays; 1 = "full jitter" (uniform between 0 and the delay). */
  jitter: number;
}

/** One unit of work in the pool, as every store returns it. */
export interface Task {
  id: number;
  taskType: string;
  /** The registered version of its type it was created under (defaults, schema, recovery policy); null if unregistered. */
  taskTypeVersion: number | null;
  params: JsonObject;
  status: TaskStatus;
  priority: number;
  scheduledFor: Date;
  concurrencyKey: string | null;
  uniqueKey: string | null;
  attempts: number;
  maxAttempts: number;
  backoff: BackoffPolicy;
  timeoutSeconds: number | null;
  workerId: string | null;
  leaseToken: string | null;
  leaseExpiresAt: Date | null;
  reservedFor: string | null;
  reservedUntil: Date | null;
  claimedAt: Date | null;
  startedAt: Date | null;
  completedAt: Date | null;
  lastHeartbeatAt: Date | null;
  progress: number | null;
  checkpoint: Json | null;
  result: Json | null;
  errorMessage: string | null;
  parentId: number | null;
  createdAt: Date;
  updatedAt: Date;
}

/** A claimed task: the lease token is what every later call must present. */
export type ClaimedTask = Task & { workerId: string; leaseToken: string };

/**
 * Whether `task`, as a read answers it, is in `status` under `lease`: what a call refused as an invalid
 * transition finds when an earlier try of it, whose answer was lost, was applied. The token is compared
 * where the read answers one; over HTTP it does not (null), and the server that answered compared it.
 */
export const inStateUnder = (task: Task | null, status: TaskStatus, lease: { workerId: string; leaseToken: string }): task is Task =>
  task?.status === status && task.workerId === lease.workerId && (task.leaseToken === null || task.leaseToken === lease.leaseToken);

export const SORT_BY = ["priority", "created_at", "random"] as const;
export type SortBy = (typeof SORT_BY)[number];
export type SortOrder = "asc" | "desc";

export interface TaskPage {
  tasks: Task[];
  nextCursor: string | null;
}

export interface TaskCounts {
  byStatus: Record<TaskStatus, number>;
  byType: Record<string, Partial<Record<TaskStatus, number>>>;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { baseSeconds: 5, factor: 2, maxSeconds: 3600, jitter: 0.2 };
export const DEFAULT_MAX_ATTEMPTS = 3;
export const DEFAULT_LEASE_SECONDS = 120;
/** The latest time both stores can hold: PostgreSQL's timestamptz and ISO-8601 text with a 4-digit year. */
export const LATEST_STORABLE_TIME = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
/** The longest concurrency or unique key. */
export const MAX_KEY_LENGTH = 255;
