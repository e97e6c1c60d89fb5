import { existsSync } from "node:fs";
import type { Clock } from "../core/clock.js";
import { DatabaseNotFoundError, UnsupportedUrlError } from "../core/errors.js";
import type { Store } from "./store.js";

/** The PostgreSQL schema taskpool's tables are in when none is named. */
export const DEFAULT_SCHEMA = "taskpool";

/** What another thread needs to open the same database with the same settings (plain data: it is posted to the thread). */
export interface DatabaseConfig {
  url: string;
  /** PostgreSQL schema (default "taskpool"). */
  schema?: string;
  /** A taskpool server's API key (http:// and https:// URLs). */
  apiKey?: string;
  /** How long a call to a taskpool server is retried (ConnectOptions.retryForMs). */
  retryForMs?: number;
  /** The longest a call to a taskpool server may take, retries included (ConnectOptions.callTimeoutMs). */
  callTimeoutMs?: number;
  /** PostgreSQL's limit on one statement (ConnectOptions.statementTimeoutMs). */
  statementTimeoutMs?: number;
}

export interface OpenStoreOptions {
  /** PostgreSQL schema (default "taskpool"). */
  schema?: string;
  /** A taskpool server's API key (http:// and https:// URLs). */
  apiKey?: string;
  /** How long a call to a taskpool server is retried (ConnectOptions.retryForMs). */
  retryForMs?: number;
  /** The longest a call to a taskpool server may take, retries included (ConnectOptions.callTimeoutMs). */
  callTimeoutMs?: number;
  /** Refuse tasks of unregistered types. */
  requireRegistered?: boolean;
  clock?: Clock;
  random?: () => number;
  /** Apply pending migrations before returning, refusing a database a newer taskpool migrated (default true). */
  migrate?: boolean;
  /** Set up a database taskpool never set up (default true); false refuses it (ConnectOptions.create). */
  create?: boolean;
  /** PostgreSQL's limit on one statement (ConnectOptions.statementTimeoutMs). */
  statementTimeoutMs?: number;
}

/** The file a `sqlite:` URL names (`:memory:` for the in-memory database), or null for any other URL. */
export const sqlitePathOf = (url: string): string | null => (url.startsWith("sqlite:") ? url.slice("sqlite:".length) : null);

/** Whether a URL names a taskpool server (its HTTP API) rather than a database. */
export const isServerUrl = (url: string) => /^https?:\/\//.test(url);

/**
 * Opens the store a connection string names: `sqlite:./path.db`, `sqlite::memory:`,
 * `postgres://…` or `postgresql://…`, or a taskpool server, `http(s)://host:port` (migrating there
 * is the server's business: it checks the server answers).
 */
export async function openStore(url: string, options: OpenStoreOptions = {}): Promise<Store> {
  const store = await createStore(url, options);
  if (options.migrate !== false) {
    try {
      await store.migrate();
    } catch (error) {
      await store.close();
      throw error;
    }
  }
  return store;
}

/**
 * Each store is loaded when a URL names it: a program on SQLite never loads pg, nor one on PostgreSQL
 * better-sqlite3's native addon, and a short-lived CLI command loads only the one it uses.
 */
async function createStore(url: string, options: OpenStoreOptions): Promise<Store> {
  const path = sqlitePathOf(url);
  if (path !== null) {
    // sqlite://./x.db is no file name: SQLite read //./x.db as /x.db and created it at the root.
    if (path === "" || path.startsWith("//")) throw new UnsupportedUrlError(url);
    if (options.create === false && path !== ":memory:" && !existsSync(path)) throw new DatabaseNotFoundError(`SQLite file ${path}`);
    const { SqliteStore } = await import("./sqlite/sqlite-store.js");
    return new SqliteStore({ path, clock: options.clock, random: options.random, requireRegistered: options.requireRegistered });
  }
  if (/^postgres(ql)?:\/\//.test(url)) {
    const { PostgresStore } = await import("./postgres/postgres-store.js");
    return new PostgresStore({
      url,
      schema: options.schema,
      clock: options.clock,
      random: options.random,
      requireRegistered: options.requireRegistered,
      create: options.create,
      statementTimeoutMs: options.statementTimeoutMs,
    });
  }
  if (isServerUrl(url)) {
    const { HttpStore } = await import("../client/http-store.js");
    return new HttpStore(url, { apiKey: options.apiKey, retryForMs: options.retryForMs, callTimeoutMs: options.callTimeoutMs });
  }
  throw new UnsupportedUrlError(url);
}
