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
  /** Where a PostgreSQL test leaves its schema, emptied, for the next one to take (see SpareSchemas). */
  spares?: SpareSchemas;
}

/**
 * Migrated schemas that finished tests emptied, for the next tests of one describe block: migrating a
 * new schema (22 migrations) and dropping it cost about 250 ms a test, emptying one a few. Only for
 * tests that change rows, never the schema itself (the store contract); dropped by `dropAll`.
 */
export class SpareSchemas {
  private readonly schemas: string[] = [];
  /** Each schema's statement that empties it, read from the catalog once. */
  private readonly emptying = new Map<string, string>();

  take(): string | undefined {
    return this.schemas.pop();
  }

  /** Deletes every row but the migrations' and restarts the ids, then keeps the schema for another test. */
  async giveBack(schema: string): Promise<void> {
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    try {
      const statement = this.emptying.get(schema) ?? (await emptyingStatement(client, schema));
      this.emptying.set(schema, statement);
      await client.query(statement);
      this.schemas.push(schema);
    } finally {
      await client.end();
    }
  }

  async dropAll(): Promise<void> {
    for (const schema of this.schemas.splice(0)) await dropSchema(schema);
  }
}

/** One transaction deleting the schema's rows (foreign keys not checked: all go) and restarting its sequences. */
async function emptyingStatement(client: pg.Client, schema: string): Promise<string> {
  const tables = await client.query<{ name: string }>(
    "SELECT quote_ident($1) || '.' || quote_ident(table_name) AS name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE' AND table_name <> 'taskpool_migrations'",
    [schema],
  );
  const sequences = await client.query<{ name: string }>("SELECT quote_ident(schemaname) || '.' || quote_ident(sequencename) AS name FROM pg_sequences WHERE schemaname = $1", [schema]);
  return [
    "BEGIN",
    "SET LOCAL session_replication_role = replica",
    ...tables.rows.map((t) => `DELETE FROM ${t.name}`),
    ...sequences.rows.map((q) => `SELECT setval('${q.name}', 1, false)`),
    "COMMIT",
  ].join(";\n");
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

export async function createPostgres({ spares, ...options }: StoreOptions = {}): Promise<TestStore<PostgresStore>> {
  const schema = spares?.take() ?? `${PG_SCHEMA_PREFIX}${suffix()}`;
  const opened: PostgresStore[] = [];
  const open = async (o: Omit<StoreOptions, "spares"> & { poolSize?: number }) => {
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
      // A schema that cannot be emptied is not given to another test.
      if (!spares || !(await spares.giveBack(schema).then(() => true, () => false))) await dropSchema(schema);
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

export async function createSqlite({ spares: _cheapEnough, ...options }: StoreOptions = {}): Promise<TestStore<SqliteStore>> {
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
