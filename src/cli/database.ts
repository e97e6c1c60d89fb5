import { Option } from "commander";

/** The --db option every command shares: a flag, else $TASKPOOL_DATABASE_URL, else the embedded file. */
export const dbOption = () =>
  new Option("--db <url>", "database: sqlite:./file.db, sqlite::memory: or postgres://…")
    .env("TASKPOOL_DATABASE_URL")
    .default("sqlite:./taskpool.db");

export const schemaOption = () => new Option("--schema <name>", "PostgreSQL schema").env("TASKPOOL_SCHEMA");
