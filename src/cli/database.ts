import { Option } from "commander";
import { openStore } from "../store/open-store.js";
import type { Store } from "../store/store.js";

/** The --db option every command shares: a flag, else $TASKPOOL_DATABASE_URL, else the embedded file. */
export const dbOption = () =>
  new Option("--db <url>", "database: sqlite:./file.db, sqlite::memory: or postgres://…")
    .env("TASKPOOL_DATABASE_URL")
    .default("sqlite:./taskpool.db");

export const schemaOption = () => new Option("--schema <name>", "PostgreSQL schema").env("TASKPOOL_SCHEMA");

/** Opens the store the options name, runs `fn`, and closes it whatever happens. */
export async function withStore(opts: { db: string; schema?: string }, fn: (store: Store) => Promise<void>): Promise<void> {
  const store = await openStore(opts.db, { schema: opts.schema });
  try {
    await fn(store);
  } finally {
    await store.close();
  }
}
