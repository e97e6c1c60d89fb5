import { Option } from "commander";
import { type ConnectOptions, connect, type Taskpool } from "../api/taskpool.js";
import { explainConnectError } from "./errors.js";

/** The --db option every command shares: a flag, else $TASKPOOL_DATABASE_URL, else the embedded file. */
export const dbOption = () =>
  new Option("--db <url>", "database: sqlite:./file.db, sqlite::memory: or postgres://…")
    .env("TASKPOOL_DATABASE_URL")
    .default("sqlite:./taskpool.db");

export const schemaOption = () => new Option("--schema <name>", "PostgreSQL schema (default taskpool)").env("TASKPOOL_SCHEMA");

/** Connects to the database the options name; a failure becomes one line saying what to fix. */
export async function openPool(opts: { db: string; schema?: string }, options: ConnectOptions = {}): Promise<Taskpool> {
  try {
    return await connect(opts.db, { schema: opts.schema, ...options });
  } catch (error) {
    throw explainConnectError(error, opts.db);
  }
}

/** Connects, runs `fn`, and closes the pool whatever happens. */
export async function withPool(opts: { db: string; schema?: string }, fn: (pool: Taskpool) => Promise<void>, options: ConnectOptions = {}): Promise<void> {
  const pool = await openPool(opts, options);
  try {
    await fn(pool);
  } finally {
    await pool.close();
  }
}
