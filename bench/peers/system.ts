/**
 * What bench/peers.ts needs from each system it compares, and what they share.
 *
 * A system has two sides. The producer runs in the bench's own process: it creates the run's fresh
 * namespace (a PostgreSQL schema, a SQLite file or a Redis queue), enqueues, counts what is left and
 * deletes everything at the end. The consumer runs in a child process (worker-process.ts), alone, so
 * its CPU time is the worker runtime's and nothing else's. Each adapter is a few lines of the
 * system's own public API; its `settings` string is printed with the results, so a reader sees what
 * each system was told beyond connection and namespace.
 */
import { readFileSync } from "node:fs";

export const SYSTEM_NAMES = ["taskpool-postgres", "taskpool-sqlite", "graphile-worker-batched", "graphile-worker", "pg-boss", "bullmq"] as const;
export type SystemName = (typeof SYSTEM_NAMES)[number];

/** Task type, queue or task identifier, the same name on every system. */
export const QUEUE = "noop";
/** Handlers running at once in the one worker runtime, on every system. */
export const CONCURRENCY = 10;
export const PAYLOAD_BYTES = 100;

/** A task's payload: its sequence number, padded so its JSON is PAYLOAD_BYTES long. */
export interface Payload {
  [key: string]: string | number;
  n: number;
  pad: string;
}

export function payload(n: number): Payload {
  const bare = JSON.stringify({ n, pad: "" }).length;
  return { n, pad: "x".repeat(Math.max(0, PAYLOAD_BYTES - bare)) };
}

/** The bench's side of a system, for one run in one fresh namespace. */
export interface Producer {
  /** Connects and creates the namespace (schema, file or queue); not timed. */
  open(): Promise<void>;
  /** Enqueues all of `payloads` with the system's batch call. */
  enqueueMany(payloads: Payload[]): Promise<void>;
  /** Enqueues one task; resolves when the system reports it stored (committed). */
  enqueue(payload: Payload): Promise<void>;
  /** Tasks not completed successfully yet, read from the store. */
  remaining(): Promise<number>;
  /** Closes every connection and deletes the namespace; safe after a failed or partial open(). */
  close(): Promise<void>;
}

/** The worker runtime, in the child process. */
export interface Consumer {
  /** What can be done before the timed start (connecting, building the runtime); not timed. */
  prepare(): Promise<void>;
  /** Starts the runtime; resolves when the system's own start call does. */
  start(): Promise<void>;
  /** Stops the runtime and closes its connections. */
  stop(): Promise<void>;
}

/** Called first thing in every handler. */
export type OnStart = (payload: Payload) => void;

export interface System {
  name: SystemName;
  /** The version under test, e.g. installedVersion("bullmq"). */
  version(): string;
  /** Everything it is told beyond connection and namespace, and what was left at its default. */
  settings: string;
  /** `namespace` is a fresh lower-case identifier, unique to the run. */
  producer(namespace: string): Producer;
  consumer(namespace: string, onStart: OnStart): Consumer;
}

/** Installed version, read from the package itself (the lock file may be ahead of node_modules). */
export function installedVersion(packageName: string): string {
  const file = new URL(`../../node_modules/${packageName}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
}

/** The Redis every BullMQ run uses, as host/port/db for ioredis. */
export function redisConnection(): { host: string; port: number; db: number } {
  const url = new URL(process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379");
  return { host: url.hostname, port: Number(url.port || 6379), db: Number(url.pathname.slice(1) || 0) };
}
