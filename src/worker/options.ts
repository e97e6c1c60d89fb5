import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { ValidationError } from "../core/errors.js";
import { checkJson, refuseUnknownOptions } from "../core/validation.js";
import { MAX_TIMER_MS } from "../core/milliseconds.js";
import type { Json, JsonObject, Task } from "../core/task.js";
import { isStorableText, TASK_TYPE_PATTERN, WORKER_ID_PATTERN } from "../core/schemas.js";
import { VERSION } from "../version.js";
import type { TaskContext } from "./task-context.js";

/** A handler runs one task; what it returns is stored as the task's result. */
export type Handler = (params: Task["params"], ctx: TaskContext) => Promise<Json | void> | Json | void;

export interface WorkerOptions {
  /** Task types this worker claims (its roles). */
  roles: string[];
  /** One handler per role. */
  handlers: Record<string, Handler>;
  /** Default: worker-<first role>-<random>. */
  workerId?: string;
  /** Max tasks at once (1 to 10,000); also the capacity the coordinator sees. Default 1. */
  concurrency?: number;
  /**
   * Most claimed tasks held ready beyond those running, so a finished slot is refilled without a
   * round trip. The worker holds only what its handlers get through in about 50 ms at their recent
   * pace (none until one has finished), so long tasks are never hoarded. Default 100 × concurrency, 50 × on SQLite
   * (the cap matters only for tasks under a millisecond, which a smaller buffer runs dry during a claim); 0 turns it off.
   */
  prefetch?: number;
  /** How often an idle worker looks for work when no notification wakes it. Default 5000. */
  pollIntervalMs?: number;
  /** Default 30000; at most 12 h, so that two beats fit in the longest lease. */
  heartbeatIntervalMs?: number;
  /** Lease length without a heartbeat; at least 2 heartbeat intervals. Default 4 heartbeat intervals (at least 10 s, at most 24 h). */
  leaseSeconds?: number;
  /** On shutdown, how long in-flight tasks may finish before they are released. Default 25000. */
  shutdownGraceMs?: number;
  /**
   * Once the grace period is over, how long the stop's last calls may take in all (releases, the
   * outcomes' last try, the last beat, marking the worker inactive) against a store that does not
   * answer; a claim under way at the stop waits no longer either. Default 10000, at least 100. A stop takes at most
   * shutdownGraceMs + lastCallsMs + 5 s (the LISTEN connection's goodbye).
   */
  lastCallsMs?: number;
  /**
   * Install SIGTERM/SIGINT handlers that stop the worker gracefully and then exit the process (a
   * second signal exits at once). Default false: an application embedding a worker owns its process
   * and calls stop() itself; `taskpool worker` turns this on.
   */
  handleSignals?: boolean;
  /**
   * Send heartbeats from a separate thread with its own connection, so a handler that blocks the
   * event loop does not look dead. Default true when the pool can give the thread a connection (not
   * for `sqlite::memory:` or a pool on a custom clock, which beat from the event loop).
   */
  heartbeatThread?: boolean;
  logger?: Logger;
  version?: string;
  metadata?: JsonObject;
}

export interface ResolvedWorkerOptions extends Required<Omit<WorkerOptions, "logger" | "version" | "metadata" | "heartbeatThread">> {
  heartbeatThread: boolean | undefined;
  version: string;
  metadata: JsonObject;
}

/**
 * Under Kubernetes' default termination grace period (30 s): the tasks still running are released
 * before the SIGKILL that ends it, not left leased until the coordinator finds the worker dead.
 */
const DEFAULT_SHUTDOWN_GRACE_MS = 25_000;
/**
 * A store that does not answer (over HTTP a server gone silent, each call retried for three minutes,
 * one after another) held a SIGTERM for 9 minutes; what is left undone is said (stoppedCleanly false).
 */
const DEFAULT_LAST_CALLS_MS = 10_000;
/** Below it even a healthy store's answers come too late, and every stop would be unclean. */
const MIN_LAST_CALLS_MS = 100;
/** The longest lease a claim takes (24 h); heartbeats come at least twice per lease. */
const MAX_LEASE_SECONDS = 86_400;
/** The most tasks a worker's heartbeat may report as its capacity. */
const MAX_CONCURRENCY = 10_000;
/**
 * The default prefetch per slot, by where the worker's claims run. The buffer holds 50 ms of work
 * (see Prefetch), so this binds only for tasks under 0.5 ms (1 ms at 50), where it sets the claims' size.
 * On PostgreSQL and over HTTP a claim runs beside the handlers: at 100, a worker of 10 slots claims
 * about 500 at a time rather than 250, and drained 6 % faster (bench:peers, docs/benchmarks.md). On
 * SQLite a claim runs on the worker's own thread while the handlers wait, and the larger claims
 * drained no faster (they lost six pairs of eight), so it stays at 50 there.
 */
const PREFETCH_PER_SLOT = { beside: 100, onThread: 50 };

/** Every option's name; the type makes an option added to WorkerOptions but not here a compile error. */
const KNOWN: Record<keyof WorkerOptions, true> = {
  roles: true,
  handlers: true,
  workerId: true,
  concurrency: true,
  prefetch: true,
  pollIntervalMs: true,
  heartbeatIntervalMs: true,
  leaseSeconds: true,
  shutdownGraceMs: true,
  lastCallsMs: true,
  handleSignals: true,
  heartbeatThread: true,
  logger: true,
  version: true,
  metadata: true,
};

const refuse = (path: string, message: string) => new ValidationError(`Invalid worker option ${path}: ${message}`, [{ path, message }]);

/** A whole number in range: a fraction or a value past the store's bounds was refused by every claim or heartbeat, later, in a log. */
const whole = (name: string, value: unknown, min: number, max: number) => {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw refuse(name, `${typeof value === "string" ? JSON.stringify(value) : String(value)} (must be a whole number from ${min} to ${max})`);
  }
  return value;
};

const flag = (name: string, value: unknown) => {
  if (value !== undefined && typeof value !== "boolean") throw refuse(name, `${JSON.stringify(value)} (must be true or false)`);
  return value;
};

/**
 * Applies defaults and refuses options that cannot work. `claimsOnThread`: the store runs claims on
 * this thread (SQLite), which sets the default prefetch.
 */
export function resolveWorkerOptions(options: WorkerOptions, claimsOnThread = false): ResolvedWorkerOptions {
  // Required: left out, the options were read from undefined, a TypeError.
  if (options === undefined) {
    throw new ValidationError('Invalid worker options: none given; pass at least { roles: ["crawl"], handlers: { crawl: async (params, ctx) => { … } } }', [{ path: "options", message: "missing" }]);
  }
  refuseUnknownOptions(options, KNOWN, "worker option");
  if (options.logger !== undefined && typeof (options.logger as Partial<Logger> | null)?.child !== "function") {
    throw refuse("logger", "not a logger (must be a pino logger, or one with pino's child(), info(), warn(), error() and debug())");
  }
  const roles = options.roles;
  if (!Array.isArray(roles)) {
    throw new ValidationError(`Invalid worker option roles: ${JSON.stringify(roles) ?? "undefined"} (must be an array of task types, such as ["crawl"])`, [{ path: "roles", message: "not an array" }]);
  }
  if (roles.length === 0) {
    throw new ValidationError("Invalid worker options: roles must list at least one task type", [{ path: "roles", message: "empty" }]);
  }
  for (const role of roles) {
    if (!new RegExp(TASK_TYPE_PATTERN).test(role)) throw new ValidationError(`Invalid role "${role}": a task type name such as product_resync`, [{ path: "roles", message: "bad name" }]);
    const handler: unknown = options.handlers?.[role];
    if (handler !== undefined && typeof handler !== "function") {
      const got = typeof handler === "object" ? JSON.stringify(handler) : String(handler);
      throw new ValidationError(`Invalid handler for role "${role}": ${got} is not a function; make it async (params, ctx) => { ... }`, [{ path: `handlers.${role}`, message: "not a function" }]);
    }
    if (typeof handler !== "function") {
      throw new ValidationError(`No handler for role "${role}": add handlers.${role} = async (params, ctx) => { ... }`, [{ path: `handlers.${role}`, message: "missing" }]);
    }
  }
  const workerId = options.workerId ?? `worker-${roles[0]}-${randomBytes(4).toString("hex")}`;
  if (typeof workerId !== "string" || !new RegExp(WORKER_ID_PATTERN).test(workerId)) {
    throw new ValidationError(`Invalid worker id "${workerId}": letters, digits, _ . - only, 1 to 128 characters`, [{ path: "workerId", message: "bad format" }]);
  }
  const concurrency = whole("concurrency", options.concurrency ?? 1, 1, MAX_CONCURRENCY);
  // Two beats must fit in the longest lease.
  const heartbeatIntervalMs = whole("heartbeatIntervalMs", options.heartbeatIntervalMs ?? 30_000, 10, (MAX_LEASE_SECONDS * 1000) / 2);
  const defaultLease = Math.min(MAX_LEASE_SECONDS, Math.max(10, Math.ceil((4 * heartbeatIntervalMs) / 1000)));
  const leaseSeconds = whole("leaseSeconds", options.leaseSeconds ?? defaultLease, 1, MAX_LEASE_SECONDS);
  // A lease shorter than two heartbeats would run out between them: every task would be taken back.
  if (leaseSeconds * 1000 < 2 * heartbeatIntervalMs) {
    throw new ValidationError(
      `Invalid worker options: leaseSeconds (${leaseSeconds}) must last at least two heartbeats (2 × heartbeatIntervalMs ${heartbeatIntervalMs} ms); raise leaseSeconds or beat more often`,
      [{ path: "leaseSeconds", message: "shorter than two heartbeat intervals" }],
    );
  }
  return {
    roles,
    handlers: options.handlers,
    workerId,
    concurrency,
    prefetch: whole("prefetch", options.prefetch ?? PREFETCH_PER_SLOT[claimsOnThread ? "onThread" : "beside"] * concurrency, 0, PREFETCH_PER_SLOT.beside * MAX_CONCURRENCY),
    pollIntervalMs: whole("pollIntervalMs", options.pollIntervalMs ?? 5000, 10, MAX_TIMER_MS),
    heartbeatIntervalMs,
    leaseSeconds,
    shutdownGraceMs: whole("shutdownGraceMs", options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS, 0, MAX_TIMER_MS),
    lastCallsMs: whole("lastCallsMs", options.lastCallsMs ?? DEFAULT_LAST_CALLS_MS, MIN_LAST_CALLS_MS, MAX_TIMER_MS),
    handleSignals: flag("handleSignals", options.handleSignals) ?? false,
    heartbeatThread: flag("heartbeatThread", options.heartbeatThread),
    version: checkedVersion(options.version),
    metadata: checkedMetadata(options.metadata),
  };
}

/**
 * What the worker's beats register it with, checked when it is made rather than refused by its first
 * beat, at start(). Their size limit is the pool's, checked then (a start refused leaves the worker stopped).
 */
function checkedVersion(version: unknown): string {
  if (version === undefined) return VERSION;
  if (typeof version !== "string" || version.length === 0 || version.length > 64 || !isStorableText(version)) {
    throw refuse("version", `${JSON.stringify(version) ?? String(version)} (must be a text of 1 to 64 characters, such as "1.4.2")`);
  }
  return version;
}

function checkedMetadata(metadata: unknown): JsonObject {
  if (metadata === undefined) return {};
  if (typeof metadata !== "object" || metadata === null || Array.isArray(metadata)) {
    throw refuse("metadata", `${Array.isArray(metadata) ? "a list" : (JSON.stringify(metadata) ?? String(metadata))} (must be an object, such as { "region": "eu" })`);
  }
  checkJson(metadata, "metadata", Number.POSITIVE_INFINITY, "limits.metadataBytes");
  return metadata as JsonObject;
}
