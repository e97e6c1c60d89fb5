import { Option } from "commander";
import { type ConnectOptions, connect, type Taskpool } from "../api/taskpool.js";
import { CliError, explainConnectError, redactUrl } from "./errors.js";

/** The --db option every command shares: a flag, else $TASKPOOL_DATABASE_URL, else the embedded file. */
export const dbOption = () =>
  new Option("--db <url>", "database: sqlite:./file.db, sqlite::memory: or postgres://…")
    .env("TASKPOOL_DATABASE_URL")
    .default("sqlite:./taskpool.db");

/** A taskpool server instead of a database: the same commands over its HTTP API. */
export const urlOption = () => new Option("--url <url>", "a taskpool server (http://host:port) instead of --db; with --api-key").env("TASKPOOL_URL");
export const apiKeyOption = () => new Option("--api-key <key>", "the server's API key (taskpool keys create)").env("TASKPOOL_API_KEY");

export const schemaOption = () => new Option("--schema <name>", "PostgreSQL schema (default taskpool)").env("TASKPOOL_SCHEMA");

/** Where a command connects: a database (--db), or a taskpool server (--url, or an http:// --db) with its key. */
export interface ConnectionOptions {
  db: string;
  schema?: string;
  url?: string;
  apiKey?: string;
}

/** Connects to the database or server the options name; a failure becomes one line saying what to fix. */
export async function openPool(opts: ConnectionOptions, options: ConnectOptions = {}): Promise<Taskpool> {
  const target = opts.url ?? opts.db;
  const remote = /^https?:\/\//.test(target);
  if (opts.url !== undefined && !remote) throw new CliError(`--url takes a taskpool server's address (http://host:port), not "${redactUrl(opts.url)}"; a database goes in --db`);
  if (remote && options.requireRegistered) throw new CliError("--require-registered is the server's setting, not a client's: enqueue over --url follows what the server was started with");
  try {
    return await connect(target, remote ? { ...options, requireRegistered: undefined, apiKey: opts.apiKey } : { schema: opts.schema, ...options });
  } catch (error) {
    throw explainConnectError(error, target);
  }
}

/** Connects, runs `fn`, and closes the pool whatever happens. */
export async function withPool(opts: ConnectionOptions, fn: (pool: Taskpool) => Promise<void>, options: ConnectOptions = {}): Promise<void> {
  const pool = await openPool(opts, options);
  try {
    await fn(pool);
  } finally {
    await pool.close();
  }
}
