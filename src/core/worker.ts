import type { Json, JsonObject } from "./task.js";

/** `stale`: missed heartbeats, gets no new targeted work. `dead`: its tasks were recovered. `inactive`: shut down. */
export const WORKER_STATUSES = ["active", "stale", "dead", "inactive"] as const;

/** How long a worker's silence lasts before a coordinator calls it stale, then dead, unless told otherwise (the SPEC's figures). */
export const DEFAULT_STALE_AFTER_MS = 60_000;
export const DEFAULT_DEAD_AFTER_MS = 120_000;
/**
 * How many runs replaced under one worker id the registry remembers, newest first: their late beats and
 * shutdowns change nothing. One was not enough: a process frozen (a paused VM) while its replacement
 * crashed and a third started would have come back as a restart, and taken the third's tasks back.
 * A bound keeps a worker id that restarts forever (a crash loop under a fixed name) to one small row.
 */
export const GONE_RUNS_KEPT = 16;
export type WorkerStatus = (typeof WORKER_STATUSES)[number];
/** Workers that may still hold tasks and beat: the registry lists them in full. */
export const LIVE_WORKER_STATUSES = ["active", "stale"] as const satisfies readonly WorkerStatus[];
/** Workers gone for good until a run under the id beats again: they pile up (one per run with a generated id), so the registry folds them. */
export const GONE_WORKER_STATUSES = ["dead", "inactive"] as const satisfies readonly WorkerStatus[];
/**
 * Live workers a registry page lists at most; past it the page ends and its cursor goes on with the
 * rest. A bound on the answer, not on the pool: no deployment we know of runs near it.
 */
export const MAX_LIVE_LISTED = 1000;
/** Gone workers a registry page lists unless its `limit` says otherwise: the most recently heard from. */
export const DEFAULT_GONE_LISTED = 100;

export type { SweepOptions, WorkerBeat, WorkerQuery } from "./schemas.js";

export interface WorkerBeatResult {
  /** Tasks among `leases` the worker no longer holds (taken back, re-claimed or cancelled): stop them. */
  lost: number[];
  /** Over HTTP: how often the server asks its workers to beat, in seconds (`next_heartbeat_in`). */
  nextHeartbeatInSeconds?: number;
}

/** A row of the worker registry, with the figures an operator looks at. */
export interface WorkerRecord {
  workerId: string;
  roles: string[];
  hostname: string | null;
  pid: number | null;
  version: string | null;
  capacity: number;
  currentLoad: number;
  tasksProcessed: number;
  metadata: JsonObject;
  status: WorkerStatus;
  lastSeenAt: Date;
  startedAt: Date;
  /** Claimed or running tasks held right now. */
  activeTasks: number;
  secondsSinceHeartbeat: number;
  /** current_load / capacity × 100. */
  loadPercent: number;
}

/**
 * A page of the worker registry (see Store.listWorkers): live workers by id, then gone ones most
 * recently heard from first. `counts` is the whole registry's, whatever the query, so a page says how
 * many it left out; `nextCursor` pages on, null when nothing is left.
 */
export interface WorkerList {
  workers: WorkerRecord[];
  counts: Record<WorkerStatus, number>;
  nextCursor: string | null;
}

/** What the coordinator does with the tasks of a dead worker (per task type). */
export const RECOVERY_POLICIES = ["retry", "fail"] as const;
export type RecoveryPolicy = (typeof RECOVERY_POLICIES)[number];

export interface SweepResult {
  staleWorkers: string[];
  deadWorkers: string[];
  /** Tasks put back in the pool (some then reserved, see `reassigned`). */
  requeued: number[];
  /** Tasks failed by policy or out of attempts. */
  failed: number[];
  reassigned: { taskId: number; workerId: string }[];
  /** Requeued tasks no healthy worker of their role had room for (why: the reassignment event's errorMessage). */
  unassigned: number[];
}

/**
 * Seconds from `now` until a sweep with `deadAfterSeconds` would next take something back, from the
 * longest-silent live worker's last beat and the soonest lease end (either null when there is none),
 * and whether a worker shut down holds a lease: 0 when one is due already, null when none exists.
 */
export function secondsToRecovery(lastSeenAt: Date | null, leaseExpiresAt: Date | null, abandoned: boolean, now: Date, deadAfterSeconds: number): number | null {
  if (abandoned) return 0;
  const due = [lastSeenAt && lastSeenAt.getTime() + deadAfterSeconds * 1000, leaseExpiresAt?.getTime()].filter((t): t is number => typeof t === "number");
  return due.length === 0 ? null : Math.max(0, (Math.min(...due) - now.getTime()) / 1000);
}

/** One reassignment attempt (seed 003). */
export interface ReassignmentEvent {
  id: number;
  taskId: number;
  fromWorkerId: string | null;
  toWorkerId: string | null;
  reason: string;
  checkpoint: Json | null;
  success: boolean;
  errorMessage: string | null;
  createdAt: Date;
}

export const WORKER_DIED = "Worker died unexpectedly";
export const LEASE_EXPIRED = "Lease expired: the worker stopped renewing it";
export const CLAIMED_AFTER_SHUTDOWN = "Claimed after its worker shut down: given back, no attempt charged";
/**
 * Why the sweep took back a task whose lease ran out past its `timeout_seconds`: the workers (the
 * TypeScript and the Python ones) stop renewing a lease there, so a hung handler lets its task go.
 */
export const timedOut = (seconds: number | "{seconds}") => `Timed out after ${seconds} s: its lease ran out, not renewed past the task's timeout_seconds`;
/**
 * Why a worker's beat put a task back in the pool: the beat said it lists every lease its worker holds
 * (`allLeases`), and it left out this one, leased over half its lease ago. The worker does not know it
 * holds it: the answer to its claim was lost, or the process restarted under the same id. The task
 * is taken back as a recovery takes it (attempt counted: it may have run, in the process before a
 * restart; failed on its last attempt), without waiting for the lease to run out and a sweep.
 */
export const UNKNOWN_TO_ITS_WORKER = "Not among the leases its worker's heartbeat listed: the worker did not know it held it (its claim's answer was lost, or the worker restarted)";
