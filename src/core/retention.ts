/**
 * Retention: how long finished tasks (and the history that only describes them) are kept before the
 * leading coordinator deletes them, so the tables stay bounded under steady load.
 *
 * Completed and cancelled tasks go after 7 days by default. Failed tasks are the dead-letter queue:
 * each one waits for an operator to read its error and retry it, so they are kept until retried
 * unless `failedAfterSeconds` is set, and it may not be shorter than the age of completed tasks (a
 * failure is never worth less history than a success).
 */
import { type Static, Type } from "./typebox.js";

const DAY = 86_400;
/** Ten years: anything longer is "keep forever", which `false` (no retention) says better. */
export const MAX_AGE_SECONDS = 10 * 365 * DAY;
/** Rows per statement at most: a batch must stay a short transaction. */
export const MAX_BATCH_SIZE = 10_000;
const Age = Type.Number({ minimum: 1, maximum: MAX_AGE_SECONDS, description: "seconds since the task finished, at least 1" });

/** One bounded pass of `Store.prune`: the ages, by the store's clock, and the most rows per statement. */
export const PruneOptionsSchema = Type.Object(
  {
    completedAfterSeconds: Age,
    cancelledAfterSeconds: Age,
    /** Null: failed tasks are kept until retried (or cancelled). */
    failedAfterSeconds: Type.Union([Age, Type.Null()]),
    /** At most this many tasks (or workers, or worker events) per statement. */
    batchSize: Type.Integer({ minimum: 1, maximum: MAX_BATCH_SIZE }),
  },
  { additionalProperties: false },
);
export type PruneOptions = Static<typeof PruneOptionsSchema>;

/** What one pass deleted. A count equal to batchSize means more may be due. */
export interface PruneResult {
  tasks: number;
  /** Audit events: of the deleted tasks, and worker-level ones (worker_dead) older than the completed age. */
  events: number;
  reassignments: number;
  /** Dead or shut-down workers last heard from before the completed age. */
  workers: number;
  /**
   * Schedule ticks (the record of each run, one per tick) before the completed age whose tasks are all
   * gone: a schedule firing every second records 86,400 a day. Each schedule's latest tick stays.
   */
  scheduleTicks: number;
  /** Enqueue calls' idempotency keys older than IDEMPOTENCY_KEY_SECONDS, whatever the task ages. */
  idempotencyKeys: number;
}

/**
 * How long an enqueue call's idempotency key is remembered at least, by the store's clock: a day, as
 * Stripe's keys and the IETF httpapi draft's examples. A producer retrying a lost answer does so
 * within seconds or minutes; the records of a busy producer must not pile up for ever.
 */
export const IDEMPOTENCY_KEY_SECONDS = DAY;

/** A finished status, and the time before which its tasks are due for deletion. */
export interface PruneCutoff {
  status: "completed" | "cancelled" | "failed";
  before: Date;
}

/**
 * What one pass deletes, on every store: the finished statuses that have an age (failed ones only
 * when failedAfterSeconds is set), each with its cutoff; the cutoff of the worker history (dead or
 * shut-down workers, worker-level events), which goes with the completed age; and that of the
 * idempotency keys, which have their own age.
 */
export function pruneCutoffs(now: Date, options: PruneOptions): { tasks: PruneCutoff[]; history: Date; idempotencyKeys: Date } {
  const before = (seconds: number) => new Date(now.getTime() - seconds * 1000);
  const ages = [
    ["completed", options.completedAfterSeconds],
    ["cancelled", options.cancelledAfterSeconds],
    ["failed", options.failedAfterSeconds],
  ] as const;
  return {
    tasks: ages.flatMap(([status, age]) => (age === null ? [] : [{ status, before: before(age) }])),
    history: before(options.completedAfterSeconds),
    idempotencyKeys: before(IDEMPOTENCY_KEY_SECONDS),
  };
}

/** The coordinator's retention settings (`Coordinator` option `retention`). */
export interface RetentionOptions {
  /** Default 7 days. */
  completedAfterMs?: number;
  /** Default 7 days. */
  cancelledAfterMs?: number;
  /** Default null: failed tasks are kept until retried. At least completedAfterMs. */
  failedAfterMs?: number | null;
  /** Rows per statement; default 500. */
  batchSize?: number;
  /** Statements per sweep at most, per kind of row; default 4 (so 2,000 tasks a sweep). */
  batchesPerSweep?: number;
}

export const DEFAULT_RETENTION = {
  completedAfterMs: 7 * DAY * 1000,
  cancelledAfterMs: 7 * DAY * 1000,
  failedAfterMs: null,
  batchSize: 500,
  batchesPerSweep: 4,
} as const satisfies Required<RetentionOptions>;
