import type { CapacityRow, Failures, ReassignmentStats, Throughput } from "../core/monitoring.js";
import { FAILURE_MESSAGE_SHOWN, FAILURES_READ, type FailuresQuery, MAX_THROUGHPUT_MINUTES } from "../core/schemas.js";

/**
 * The monitoring views (migration 003 of each dialect) have the same columns on both databases, so
 * they are read with the same statements and decoded here. They use the database's clock: they
 * describe the present, for operators reading them with plain SQL as much as for the API.
 */
export const VIEW_READS = {
  // Its columns named: a prepared `SELECT *` fails ("cached plan must not change result type") on a
  // connection that prepared it before a migration added a column to the view.
  capacity: `SELECT task_type, pending_tasks, ready_tasks, running_tasks, active_workers, completed_last_hour, max_running,
                    tasks_per_worker_hour, estimated_hours_to_drain, workers_needed_1h, workers_needed_4h, workers_needed_8h,
                    oldest_ready_seconds
             FROM v_worker_capacity ORDER BY task_type`,
  reassignmentRate: "SELECT * FROM v_reassignment_stats",
  failingWorkers: "SELECT * FROM v_failing_workers ORDER BY failure_count DESC, from_worker_id LIMIT 20",
  repeatedReassignments: "SELECT * FROM v_repeated_reassignments ORDER BY reassignment_count DESC, task_id LIMIT 100",
};

export interface CapacityViewRow {
  task_type: string;
  pending_tasks: number;
  ready_tasks: number;
  running_tasks: number;
  active_workers: number;
  completed_last_hour: number;
  max_running: number | null;
  tasks_per_worker_hour: number | null;
  estimated_hours_to_drain: number | null;
  workers_needed_1h: number | null;
  workers_needed_4h: number | null;
  workers_needed_8h: number | null;
  oldest_ready_seconds: number | null;
}

export function toCapacity(r: CapacityViewRow): CapacityRow {
  return {
    taskType: r.task_type,
    pendingTasks: Number(r.pending_tasks),
    readyTasks: Number(r.ready_tasks),
    runningTasks: Number(r.running_tasks),
    activeWorkers: Number(r.active_workers),
    completedLastHour: Number(r.completed_last_hour),
    maxRunning: r.max_running,
    tasksPerWorkerHour: r.tasks_per_worker_hour,
    estimatedHoursToDrain: r.estimated_hours_to_drain,
    workersNeeded: { for1Hour: r.workers_needed_1h, for4Hours: r.workers_needed_4h, for8Hours: r.workers_needed_8h },
    oldestReadySeconds: r.oldest_ready_seconds === null ? null : Number(r.oldest_ready_seconds),
  };
}

export interface ReassignmentViewRows {
  rate: { total: number; successful: number; success_rate_percent: number | null };
  failing: { from_worker_id: string | null; failure_count: number; last_failure_at: Date | string }[];
  repeated: { task_id: number; reassignment_count: number; last_reassignment_at: Date | string }[];
}

export function toReassignmentStats(v: ReassignmentViewRows): ReassignmentStats {
  return {
    last24Hours: toReassignmentRate(v.rate),
    failingWorkers: v.failing.map((r) => ({ workerId: r.from_worker_id, failureCount: Number(r.failure_count), lastFailureAt: new Date(r.last_failure_at) })),
    repeatedTasks: v.repeated.map((r) => ({ taskId: Number(r.task_id), reassignmentCount: Number(r.reassignment_count), lastReassignmentAt: new Date(r.last_reassignment_at) })),
  };
}

export function toReassignmentRate(rate: ReassignmentViewRows["rate"]): ReassignmentStats["last24Hours"] {
  return { total: Number(rate.total), successful: Number(rate.successful), successRatePercent: rate.success_rate_percent };
}

/** One group of `throughput()`'s statement: the tasks of one status that finished in one minute of the window (migration 014, 010 on SQLite). */
export interface ThroughputGroupRow {
  /** Whole minutes from the window's start. */
  minute: number;
  status: "completed" | "failed";
  tasks: number;
  /** How many of them were ever claimed (a task failed by a sweep may not have been), and their pickup seconds' sum and max. */
  picked: number;
  pickup_sum: number | null;
  pickup_max: number | null;
}

const DEFAULT_THROUGHPUT_MINUTES = 60;

/** The window of `throughput()`: whole minutes, the current one last, so each bar of a chart covers a full minute but the last. */
export function throughputWindow(now: Date, minutes = DEFAULT_THROUGHPUT_MINUTES): { since: Date; until: Date; minutes: number } {
  const currentMinute = startOfMinute(now);
  return { since: new Date(currentMinute - (minutes - 1) * 60_000), until: new Date(currentMinute + 60_000), minutes };
}

/**
 * The oldest minute of throughput figures the sweep keeps: the longest window's, and an hour more for
 * readers whose clocks run behind the sweeper's.
 */
export function throughputKeptSince(now: Date): Date {
  return new Date(startOfMinute(now) - (MAX_THROUGHPUT_MINUTES + 60) * 60_000);
}

/** The start of `now`'s minute, in epoch milliseconds. */
function startOfMinute(now: Date): number {
  return Math.floor(now.getTime() / 60_000) * 60_000;
}

const round3 = (n: number) => Math.round(n * 1000) / 1000;

/** Spreads the statement's groups over every minute of the window (minutes without tasks are zeros). */
export function toThroughput(groups: ThroughputGroupRow[], window: { since: Date; minutes: number }): Throughput {
  const rows = Array.from({ length: window.minutes }, () => ({ completed: 0, failed: 0, picked: 0, sum: 0, max: null as number | null }));
  for (const g of groups) {
    const row = rows[Number(g.minute)];
    if (!row) continue;
    row[g.status] += Number(g.tasks);
    row.picked += Number(g.picked);
    row.sum += Number(g.pickup_sum ?? 0);
    if (g.pickup_max !== null) row.max = Math.max(row.max ?? 0, Number(g.pickup_max));
  }
  const picked = rows.reduce((n, r) => n + r.picked, 0);
  const maxes = rows.flatMap((r) => (r.max === null ? [] : [r.max]));
  return {
    minutes: rows.map((r, i) => ({
      minute: new Date(window.since.getTime() + i * 60_000),
      completed: r.completed,
      failed: r.failed,
      pickupSeconds: r.picked === 0 ? null : round3(r.sum / r.picked),
    })),
    completed: rows.reduce((n, r) => n + r.completed, 0),
    failed: rows.reduce((n, r) => n + r.failed, 0),
    pickupSeconds: {
      mean: picked === 0 ? null : round3(rows.reduce((n, r) => n + r.sum, 0) / picked),
      max: maxes.length === 0 ? null : round3(Math.max(...maxes)),
    },
  };
}

/** One group of `failures()`'s statement; `read`, how many failed tasks it read (up to limit + 1), is on every row. */
export interface FailureGroupRow {
  task_type: string;
  error_message: string | null;
  /** Newest failure first: a PostgreSQL array, a JSON array on SQLite. */
  task_ids: (number | string)[] | string;
  latest_at: Date | string;
  read: number | string;
}

/** The statement's parameters: it reads one row more than asked for, to say whether older failures are left out. */
export function failuresParams(query: FailuresQuery = {}): { limit: number; shown: number } {
  return { limit: query.limit ?? FAILURES_READ.default, shown: FAILURE_MESSAGE_SHOWN };
}

export function toFailures(rows: FailureGroupRow[], limit: number): Failures {
  const read = rows.length === 0 ? 0 : Number(rows[0].read);
  return {
    groups: rows.map((r) => ({
      taskType: r.task_type,
      errorMessage: r.error_message,
      taskIds: (typeof r.task_ids === "string" ? (JSON.parse(r.task_ids) as number[]) : r.task_ids).map(Number),
      latestAt: new Date(r.latest_at),
    })),
    read: Math.min(read, limit),
    more: read > limit,
  };
}
