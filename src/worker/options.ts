import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { ValidationError } from "../core/errors.js";
import type { Json, JsonObject, Task } from "../core/task.js";
import { TASK_TYPE_PATTERN, WORKER_ID_PATTERN } from "../core/validation.js";
import { VERSION } from "../version.js";
import type { TaskContext } from "./task-context.js";

/** A handler runs one task; what it returns is stored as the task's result. */
export type Handler = (params: Task["params"], ctx: TaskContext) => Promise<Json | void> | Json | void;

export interface WorkerOptions {
  /** Task types this worker claims (its roles). */
  roles: string[];
  /** One handler per role. */
  handlers: Record<string, Handler>;
  /** Default: $WORKER_ID, else worker-<first role>-<random>. */
  workerId?: string;
  /** Max tasks at once; also the capacity the coordinator sees. Default 1. */
  concurrency?: number;
  /** How often an idle worker looks for work when no notification wakes it. Default $POLL_INTERVAL_MS or 5000. */
  pollIntervalMs?: number;
  /** Default $HEARTBEAT_INTERVAL_MS or 30000. */
  heartbeatIntervalMs?: number;
  /** Lease length without a heartbeat. Default 4 heartbeat intervals (at least 10 s). */
  leaseSeconds?: number;
  /** On shutdown, how long in-flight tasks may finish before they are released. Default 30000. */
  shutdownGraceMs?: number;
  /** Install SIGTERM/SIGINT handlers for graceful shutdown. Default true. */
  handleSignals?: boolean;
  /**
   * Send heartbeats from a separate thread, so a handler that blocks the event loop does not look
   * dead. Needs a database URL the thread can open; default true when there is one.
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

const positive = (name: string, value: number, min = 1) => {
  if (!Number.isFinite(value) || value < min) throw new ValidationError(`Invalid worker option ${name}: ${value} (must be a number ≥ ${min})`, [{ path: name, message: "out of range" }]);
  return value;
};

const envNumber = (name: string) => (process.env[name] === undefined ? undefined : Number(process.env[name]));

/** Applies defaults (and the environment of seed 004) and refuses options that cannot work. */
export function resolveWorkerOptions(options: WorkerOptions): ResolvedWorkerOptions {
  const roles = options.roles;
  if (!Array.isArray(roles) || roles.length === 0) {
    throw new ValidationError("Invalid worker options: roles must list at least one task type", [{ path: "roles", message: "empty" }]);
  }
  for (const role of roles) {
    if (!new RegExp(TASK_TYPE_PATTERN).test(role)) throw new ValidationError(`Invalid role "${role}": a task type name such as product_resync`, [{ path: "roles", message: "bad name" }]);
    if (typeof options.handlers?.[role] !== "function") {
      throw new ValidationError(`No handler for role "${role}": add handlers.${role} = async (params, ctx) => { ... }`, [{ path: `handlers.${role}`, message: "missing" }]);
    }
  }
  const workerId = options.workerId ?? process.env.WORKER_ID ?? `worker-${roles[0]}-${randomBytes(4).toString("hex")}`;
  if (!new RegExp(WORKER_ID_PATTERN).test(workerId)) {
    throw new ValidationError(`Invalid worker id "${workerId}": letters, digits, _ . - only, 1 to 128 characters`, [{ path: "workerId", message: "bad format" }]);
  }
  const heartbeatIntervalMs = positive("heartbeatIntervalMs", options.heartbeatIntervalMs ?? envNumber("HEARTBEAT_INTERVAL_MS") ?? 30_000, 10);
  return {
    roles,
    handlers: options.handlers,
    workerId,
    concurrency: positive("concurrency", options.concurrency ?? 1),
    pollIntervalMs: positive("pollIntervalMs", options.pollIntervalMs ?? envNumber("POLL_INTERVAL_MS") ?? 5000, 10),
    heartbeatIntervalMs,
    leaseSeconds: positive("leaseSeconds", options.leaseSeconds ?? Math.max(10, Math.ceil((4 * heartbeatIntervalMs) / 1000))),
    shutdownGraceMs: positive("shutdownGraceMs", options.shutdownGraceMs ?? 30_000, 0),
    handleSignals: options.handleSignals ?? true,
    heartbeatThread: options.heartbeatThread,
    version: options.version ?? VERSION,
    metadata: options.metadata ?? {},
  };
}
