import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import type { Clock } from "../../src/core/clock.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import type { Store } from "../../src/store/store.js";

export const PG_URL = process.env.TASKPOOL_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
/** The prefix of each test's schema: runs sharing one database (parallel worktrees) can keep to their own. */
export const PG_SCHEMA_PREFIX = process.env.TASKPOOL_TEST_SCHEMA_PREFIX ?? "tp_test_";

export interface StoreOptions {
  clock?: Clock;
  random?: () => number;
}

/** A fresh, migrated, isolated store (its own schema or file) and a way to throw it away. */
export interface TestStore<S extends Store = Store> {
  store: S;
  /** Where another thread or process opens the same database. */
  url: string;
  schema?: string;
  /** Opens another store on the same database (another process would do the same). */
  another(options?: StoreOptions & { poolSize?: number }): Promise<S>;
  /**
   * Runs SQL on the database around the store, as another program would (an older taskpool, an
   * operator's psql): for a test that needs a state the store's own calls never make.
   */
  execute(statement: string): Promise<void>;
  cleanup(): Promise<void>;
}

export interface StoreKind {
  name: "postgres" | "sqlite";
  create(options?: StoreOptions): Promise<TestStore>;
}

const suffix = () => randomBytes(6).toString("hex");

export async function createPostgres(options: StoreOptions = {}): Promise<TestStore<PostgresStore>> {
  const schema = `${PG_SCHEMA_PREFIX}${suffix()}`;
  const opened: PostgresStore[] = [];
  const open = async (o: StoreOptions & { poolSize?: number }) => {
    const store = new PostgresStore({ url: PG_URL, schema, ...o });
    opened.push(store);
    return store;
  };
  const store = await open(options);
  await store.migrate();
  return {
    store,
    url: PG_URL,
    schema,
    another: (o = {}) => open({ clock: options.clock, random: options.random, ...o }),
    async execute(statement) {
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      try {
        await client.query(`SET search_path TO "${schema}"`);
        await client.query(statement);
      } finally {
        await client.end();
      }
    },
    async cleanup() {
      await Promise.all(opened.map((s) => s.close().catch(() => {})));
      await dropSchema(schema);
    },
  };
}

/** Drops a test schema from a session of its own (the stores on it are closed first). */
export async function dropSchema(schema: string): Promise<void> {
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await admin.end();
  }
}

/** A SQLite database is up to three files. */
export function removeSqliteFiles(path: string): void {
  for (const ext of ["", "-wal", "-shm"]) rmSync(path + ext, { force: true });
}

export function sqlitePath(): string {
  return join(tmpdir(), `taskpool-test-${suffix()}.db`);
}

export async function createSqlite(options: StoreOptions = {}): Promise<TestStore<SqliteStore>> {
  const path = sqlitePath();
  const opened: SqliteStore[] = [];
  const open = async (o: StoreOptions) => {
    const store = new SqliteStore({ path, ...o });
    opened.push(store);
    return store;
  };
  const store = await open(options);
  await store.migrate();
  return {
    store,
    url: `sqlite:${path}`,
    another: (o = {}) => open({ clock: options.clock, random: options.random, ...o }),
    async execute(statement) {
      const db = new Database(path);
      try {
        db.exec(statement);
      } finally {
        db.close();
      }
    },
    async cleanup() {
      await Promise.all(opened.map((s) => s.close().catch(() => {})));
      removeSqliteFiles(path);
    },
  };
}

export const postgresKind: StoreKind = { name: "postgres", create: createPostgres };
export const sqliteKind: StoreKind = { name: "sqlite", create: createSqlite };

/** `store` with some of its calls replaced (a fault injected, a call recorded); the others go to it as they are. */
export function withOverrides(store: Store, overrides: Partial<Store>): Store {
  return new Proxy(store, {
    get(target, name, receiver) {
      if (Object.hasOwn(overrides, name)) return overrides[name as keyof Store];
      const value = Reflect.get(target, name, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
