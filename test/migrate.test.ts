import { execFile, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { SchemaTooNewError, UnsupportedUrlError } from "../src/core/errors.js";
import { loadMigrations } from "../src/store/migrations.js";
import { openStore } from "../src/store/open-store.js";
import { PostgresStore } from "../src/store/postgres/postgres-store.js";
import { ManualClock } from "../src/core/clock.js";
import { SqliteStore } from "../src/store/sqlite/sqlite-store.js";
import type { Store } from "../src/store/store.js";
import type { ClaimOptions } from "../src/core/task.js";
import { createPostgres, createSqlite, dropSchema, PG_URL, removeSqliteFiles, sqlitePath, type TestStore } from "./helpers/stores.js";
import { script } from "./helpers/processes.js";
import { taskpool } from "./helpers/cli.js";

const run = promisify(execFile);

/** The claim indexes as PostgreSQL's migration 027 and SQLite's 024 left them (PostgreSQL has one more, by created_at). */
const CLAIM_INDEXES_BEFORE = `
  CREATE INDEX tasks_claim_by_priority ON tasks (priority DESC, created_at, id, scheduled_for) WHERE status = 'pending';
  CREATE INDEX tasks_claim_by_type_priority ON tasks (task_type, priority DESC, created_at, id, scheduled_for) WHERE status = 'pending';
  CREATE INDEX tasks_claim_by_type_created ON tasks (task_type, created_at, id, scheduled_for) WHERE status = 'pending';`;

/** SQLite back to before migration 025: the flag, its triggers and indexes gone, the claim indexes as 024 left them. */
/** SQLite's migration 026 undone: a file of before it. */
const UNDO_SQLITE_LISTING = "DROP INDEX tasks_finished_by_status;";
const UNDO_SQLITE_WAITING = `
  DROP TRIGGER tasks_waiting_on_insert; DROP TRIGGER tasks_waiting_on_update;
  DROP INDEX tasks_waiting_by_due; DROP INDEX tasks_pending_by_type;
  DROP INDEX tasks_claim_by_priority; DROP INDEX tasks_claim_by_type_priority; DROP INDEX tasks_claim_by_type_created;
  ALTER TABLE tasks DROP COLUMN waiting;
  ${CLAIM_INDEXES_BEFORE}`;
/** The sort and types of a claim. */
type ClaimShape = Pick<ClaimOptions, "taskTypes" | "sortBy" | "sortOrder">;

const MIGRATOR = fileURLToPath(new URL("./helpers/migrate-sqlite.ts", import.meta.url));

describe("migrations", () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });

  it("PostgreSQL: four processes' worth of stores migrating one schema at once all succeed, once", async () => {
    const schema = `tp_migrate_${Date.now()}`;
    const stores = Array.from({ length: 4 }, () => new PostgresStore({ url: PG_URL, schema, poolSize: 1 }));
    cleanups.push(async () => {
      await Promise.all(stores.map((s) => s.close()));
      await dropSchema(schema);
    });
    const applied = await Promise.all(stores.map((s) => s.migrate()));
    expect(await stores[0].migrate()).toEqual([]); // and again later: nothing to do
    const { rows } = await stores[0].pool.query("SELECT version, name FROM taskpool_migrations ORDER BY version");
    // One of them applied them all, in order; the others found them done.
    expect(applied.filter((versions) => versions.length > 0)).toEqual([rows.map((r) => r.version)]);
    expect(rows[0]).toEqual({ version: 1, name: "tasks" });
    expect(new Set(rows.map((r) => r.version)).size).toBe(rows.length);
    expect((await stores[3].enqueue({ taskType: "a" })).created).toBe(true);
  });

  // A deployment where the owner runs `taskpool migrate` and the processes connect as a user with
  // rights on the tables only: opening ran CREATE SCHEMA IF NOT EXISTS, which needs CREATE on the
  // database even for a schema that exists, and every process failed with "permission denied".
  it("PostgreSQL: a user without CREATE on the database opens a schema its owner migrated", async () => {
    const handle = await createPostgres();
    const role = `${handle.schema}_app`;
    const { pool } = handle.store;
    await pool.query(`CREATE ROLE ${role} LOGIN`);
    cleanups.push(
      () => handle.cleanup(),
      async () => {
        const admin = new pg.Client({ connectionString: PG_URL });
        await admin.connect();
        await admin.query(`DROP ROLE IF EXISTS ${role}`).finally(() => admin.end());
      },
    );
    await pool.query(`GRANT USAGE ON SCHEMA ${handle.schema} TO ${role}; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${handle.schema} TO ${role}`);
    const url = new URL(PG_URL);
    url.username = role;
    const store = await openStore(url.toString(), { schema: handle.schema });
    cleanups.unshift(() => store.close());
    expect((await store.enqueue({ taskType: "a" })).created).toBe(true);
    // Migrating still needs the right.
    await expect(openStore(url.toString(), { schema: `${handle.schema}_new` })).rejects.toThrow(/permission denied for database/);
    // The CLI names the right that is missing: CREATE to set up a schema (migrate sets one up; a reading
    // command refuses a schema taskpool never set up), rights on the tables to use one.
    const refusal = (command: string, schema: string) => taskpool(command, "--db", url.toString(), "--schema", schema).then(() => "", (e: { stderr: string }) => e.stderr);
    expect(await refusal("migrate", `${handle.schema}_new`)).toMatch(/^taskpool: cannot set up taskpool in .*: permission denied for database \w+; the user needs CREATE on the database \(or run `taskpool migrate` once as its owner\)\n$/);
    await pool.query(`REVOKE SELECT ON ALL TABLES IN SCHEMA ${handle.schema} FROM ${role}`);
    expect(await refusal("status", handle.schema as string)).toMatch(
      /^taskpool: cannot use taskpool in .*: permission denied for table taskpool_migrations; grant the user USAGE on the schema and SELECT, INSERT, UPDATE, DELETE on its tables \(docs\/upgrading\.md\)\n$/,
    );
    // Without USAGE, PostgreSQL leaves the schema out of the search_path without a word: it was said to be
    // "no taskpool schema" (while listed among them), or to need CREATE on the database.
    await pool.query(`REVOKE USAGE ON SCHEMA ${handle.schema} FROM ${role}`);
    await expect(openStore(url.toString(), { schema: handle.schema })).rejects.toMatchObject({ code: "42501", message: `permission denied for schema ${handle.schema}` });
    for (const command of [["status"], ["enqueue", "plain"]]) {
      const stderr = await taskpool(...command, "--db", url.toString(), "--schema", handle.schema as string).then(() => "", (e: { stderr: string }) => e.stderr);
      expect(stderr).toMatch(new RegExp(`^taskpool: cannot use taskpool in .*: permission denied for schema ${handle.schema}; grant the user USAGE on the schema`));
    }
  });

  it("SQLite: four processes migrating one new file at once all succeed", async () => {
    const path = sqlitePath();
    cleanups.push(() => removeSqliteFiles(path));
    const outputs = await Promise.all(Array.from({ length: 4 }, () => run(process.execPath, [script(MIGRATOR), path])));
    const latest = String(loadMigrations(new URL("../src/store/sqlite/migrations/", import.meta.url)).at(-1)?.version);
    expect(outputs.map((o) => o.stdout.trim())).toEqual([latest, latest, latest, latest]);
    const store = await openStore(`sqlite:${path}`);
    cleanups.push(() => store.close());
    expect((await store.enqueue({ taskType: "a" })).created).toBe(true);
  });

  /** A new file whose write lock another process takes, after `setup` (JavaScript on its `db`), and holds `ms`. */
  const holdWriteLock = async (setup: string, ms: number) => {
    const path = sqlitePath();
    cleanups.push(() => removeSqliteFiles(path));
    const holder = spawn(
      process.execPath,
      ["-e", `const db = new (require("better-sqlite3"))(${JSON.stringify(path)}); ${setup}; db.exec("BEGIN IMMEDIATE"); console.log("locked"); setTimeout(() => db.exec("COMMIT"), ${ms});`],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    cleanups.push(() => void holder.kill());
    await new Promise((resolve) => holder.stdout.once("data", resolve));
    return path;
  };

  // The race behind the test above failing now and then ("database is locked"): switching a new file to
  // WAL takes the exclusive lock, and SQLite refuses at once, without waiting, while another connection
  // holds the write lock of a rollback-mode file (as one does for an instant while it switches).
  // Here another process holds that lock 300 ms.
  it("SQLite: opening a new file waits while another process holds its write lock before WAL", async () => {
    const path = await holdWriteLock(`db.exec("CREATE TABLE t (x)")`, 300);
    const store = new SqliteStore({ path });
    cleanups.push(() => store.close());
    expect(store.db.pragma("journal_mode", { simple: true })).toBe("wal");
  });

  // The migrations of a large file hold the write lock for seconds, past the busy timeout ordinary
  // writes wait on a busy machine: a process opening the file meanwhile must wait for them, not fail
  // with "stayed locked". Here another process holds the lock 2 s against a 100 ms busy timeout.
  it("SQLite: opening waits for another process's migration past the busy timeout", async () => {
    const path = await holdWriteLock(`db.pragma("journal_mode = WAL")`, 2000);
    const store = new SqliteStore({ path, busyTimeoutMs: 100 });
    cleanups.push(() => store.close());
    await store.migrate();
    const latest = loadMigrations(new URL("../src/store/sqlite/migrations/", import.meta.url)).at(-1)?.version;
    expect(store.db.pragma("user_version", { simple: true })).toBe(latest);
  });

  /**
   * Migration 014 (010 on SQLite) counts the history it finds into the minutes. Undone by hand on a
   * store with a history, and run again, it must give the figures the store kept as the tasks ended.
   */
  const undoThroughputMinutes = {
    postgres: async (handle: TestStore) => {
      const { pool } = handle.store as PostgresStore;
      // The capacity view goes with the tables (CASCADE): the later migrations that redefine it run again too.
      await pool.query("DROP TABLE throughput_minutes, throughput_tallies CASCADE");
      await pool.query("DELETE FROM taskpool_migrations WHERE version IN (14, 15, 16, 19)");
    },
    sqlite: async (handle: TestStore) => {
      const { db } = handle.store as SqliteStore;
      // Back to version 9: what the later migrations made goes too, as they make it again.
      db.exec(UNDO_SQLITE_WAITING);
      db.exec(`${UNDO_SQLITE_LISTING} DROP TRIGGER workers_gone_run_id_joins_gone_run_ids; ALTER TABLE workers DROP COLUMN gone_run_ids; ALTER TABLE workers DROP COLUMN gone_run_id; ALTER TABLE workers DROP COLUMN run_id; ALTER TABLE workers DROP COLUMN gone_at; ALTER TABLE schedules DROP COLUMN unique_key; ALTER TABLE last_sweeps DROP COLUMN interval_seconds; DROP TRIGGER tasks_finished_per_minute; DROP TABLE throughput_minutes; DROP TABLE idempotency_keys; PRAGMA user_version = 9`);
    },
  };
  for (const [name, create] of [["postgres", createPostgres], ["sqlite", createSqlite]] as const) {
    it(`${name}: the throughput minutes' migration counts the last day's finished tasks`, async () => {
      const clock = new ManualClock(new Date(Math.floor(Date.now() / 60_000) * 60_000 - 26 * 3_600_000));
      const handle = await create({ clock });
      cleanups.push(() => handle.cleanup());
      const store: Store = handle.store;
      const finish = async (ok: boolean) => {
        await store.enqueue({ taskType: "crawl", maxAttempts: 1 });
        clock.advance(3_000);
        const [task] = await store.claim({ workerId: "w1" });
        if (ok) await store.complete(task.id, task);
        else await store.fail(task.id, task, { error: "boom" });
      };
      await finish(true); // 26 hours ago: past the longest window
      clock.set(new Date(Date.now() - 10 * 60_000));
      await finish(true);
      await finish(false);
      clock.set(new Date());
      await finish(true);
      const kept = await store.throughput({ minutes: 1440 });
      const capacity = await store.capacity();
      expect(kept).toMatchObject({ completed: 2, failed: 1, pickupSeconds: { mean: 3, max: 3 } });
      expect(capacity).toMatchObject([{ taskType: "crawl", completedLastHour: 2 }]);

      await undoThroughputMinutes[name](handle);
      await handle.store.migrate();
      expect(await store.throughput({ minutes: 1440 })).toEqual(kept);
      expect(await store.capacity()).toEqual(capacity);
    });
  }

  /** Back to before migration 026 (023 on SQLite), with `run` as the one gone run it remembered. */
  const undoGoneRunIds = {
    postgres: async (handle: TestStore, run: string) => {
      const { pool } = handle.store as PostgresStore;
      await pool.query("ALTER TABLE workers DROP COLUMN gone_run_ids; DROP FUNCTION taskpool_gone_run_id_joins_gone_run_ids CASCADE");
      await pool.query("UPDATE workers SET gone_run_id = $1", [run]);
      await pool.query("DELETE FROM taskpool_migrations WHERE version = 26");
    },
    sqlite: async (handle: TestStore, run: string) => {
      const { db } = handle.store as SqliteStore;
      db.exec(UNDO_SQLITE_WAITING);
      db.exec(`${UNDO_SQLITE_LISTING} DROP TRIGGER workers_gone_run_id_joins_gone_run_ids; ALTER TABLE workers DROP COLUMN gone_run_ids; PRAGMA user_version = 22`);
      db.prepare("UPDATE workers SET gone_run_id = ?").run(run);
    },
  };
  for (const [name, create] of [["postgres", createPostgres], ["sqlite", createSqlite]] as const) {
    it(`${name}: the gone runs' migration keeps the one gone run it finds: its late beat is still refused`, async () => {
      const handle = await create();
      cleanups.push(() => handle.cleanup());
      const store: Store = handle.store;
      await store.workerHeartbeat({ workerId: "w1", runId: "run-2", currentLoad: 1 });
      await undoGoneRunIds[name](handle, "run-1");
      await store.migrate();
      await store.workerHeartbeat({ workerId: "w1", runId: "run-1", currentLoad: 5 });
      expect((await store.listWorkers()).workers).toMatchObject([{ workerId: "w1", currentLoad: 1 }]);
      await store.workerHeartbeat({ workerId: "w1", runId: "run-3", currentLoad: 3 });
      expect((await store.listWorkers()).workers).toMatchObject([{ workerId: "w1", currentLoad: 3 }]);
      // A worker of the version before, still running (a rolling upgrade), records the run it replaced
      // in gone_run_id alone, as its statements do: that run's late beat is refused too.
      await handle.execute("UPDATE workers SET run_id = 'run-4', gone_run_id = 'run-3'");
      await store.workerHeartbeat({ workerId: "w1", runId: "run-3", currentLoad: 9 });
      expect((await store.listWorkers()).workers).toMatchObject([{ workerId: "w1", currentLoad: 3 }]);
    });
  }

  /** Back to before migration 028 (025 on SQLite): no waiting flag, the claim indexes as 027 left them. */
  const undoWaiting = {
    postgres: async (handle: TestStore) => {
      const { pool } = handle.store as PostgresStore;
      // The column takes its indexes and its trigger with it.
      await pool.query(`ALTER TABLE tasks DROP COLUMN waiting CASCADE; DROP FUNCTION taskpool_task_waiting; DROP INDEX tasks_pending_by_type;
        ${CLAIM_INDEXES_BEFORE} CREATE INDEX tasks_claim_by_created ON tasks (created_at, id, scheduled_for) WHERE status = 'pending';
        DELETE FROM taskpool_migrations WHERE version >= 28`);
    },
    sqlite: async (handle: TestStore) => {
      (handle.store as SqliteStore).db.exec(`${UNDO_SQLITE_LISTING} ${UNDO_SQLITE_WAITING} PRAGMA user_version = 24`);
    },
  };
  const waitingIds = {
    postgres: async (handle: TestStore) =>
      (await (handle.store as PostgresStore).pool.query("SELECT id FROM tasks WHERE waiting ORDER BY id")).rows.map((r) => Number(r.id)),
    sqlite: async (handle: TestStore) => ((handle.store as SqliteStore).db.prepare("SELECT id FROM tasks WHERE waiting = 1 ORDER BY id").all() as { id: number }[]).map((r) => r.id),
  };
  for (const [name, create] of [["postgres", createPostgres], ["sqlite", createSqlite]] as const) {
    it(`${name}: the waiting tasks' migration sets the flag of the pending tasks not yet due, and a write that makes a task pending without naming it sets it too`, async () => {
      const handle = await create();
      cleanups.push(() => handle.cleanup());
      const store: Store = handle.store;
      const [later, ready, retried] = (await store.enqueueMany([{ taskType: "a", delaySeconds: 3600 }, { taskType: "a" }, { taskType: "a" }])).map((r) => r.task);
      const [claimed] = await store.claim({ workerId: "w1", limit: 1, taskTypes: ["a"] });
      expect(claimed.id).toBe(ready.id);
      await undoWaiting[name](handle);
      await store.migrate();
      expect(await waitingIds[name](handle)).toEqual([later.id]);
      // A write that knows no flag (an operator's SQL, a statement that forgets it) puts the task back
      // with a retry's backoff: the trigger sets it.
      const inAnHour = new Date(Date.now() + 3_600_000).toISOString();
      const now = new Date().toISOString();
      await handle.execute(`UPDATE tasks SET status = 'pending', worker_id = NULL, lease_token = NULL, scheduled_for = '${inAnHour}', updated_at = '${now}' WHERE id = ${ready.id}`);
      expect(await waitingIds[name](handle)).toEqual([later.id, ready.id]);
      expect((await store.claim({ workerId: "w1", limit: 5 })).map((t) => t.id)).toEqual([retried.id]);
    });
  }

  /**
   * A rolling upgrade past this build: a later build's migration adds a column to tasks while this
   * one runs. Statements prepared with `*` would fail from then on ("cached plan must not change
   * result type"), as those of builds before migration 028 do across it.
   */
  it("postgres: a column a later build adds to tasks leaves this build's prepared statements running", async () => {
    const handle = await createPostgres();
    cleanups.push(() => handle.cleanup());
    // One connection, so each call after the change runs the statement prepared on it before.
    const store = await handle.another({ poolSize: 1 });
    const lifecycle = async (round: number) => {
      const { task } = await store.enqueue({ taskType: "a" });
      await store.enqueueMany([{ taskType: "a" }, { taskType: "b" }]);
      const [first, second, third] = await store.claim({ workerId: "w1", limit: 3 });
      await store.start(first.id, first);
      await store.heartbeat(first.id, first);
      await store.progress(first.id, first, 0.5);
      await store.checkpoint(first.id, first, { at: 1 });
      await store.complete(first.id, first, { result: { ok: true } });
      await store.completeMany([{ id: second.id, lease: second }]);
      await store.fail(third.id, third, { error: "boom", retryable: false });
      await store.retry(third.id);
      const [again] = await store.claim({ workerId: "w1" });
      await store.release(again.id, again);
      await store.cancel(again.id);
      expect(await store.get(task.id)).toMatchObject({ status: "completed" });
      expect((await store.list({ status: "cancelled" })).tasks).toHaveLength(round);
    };
    await lifecycle(1);
    await handle.execute("ALTER TABLE tasks ADD COLUMN from_a_later_build integer");
    await lifecycle(2);
  });

  it("sqlite: claim indexes a later build changes leave this build's claims running, in their order", async () => {
    const handle = await createSqlite();
    cleanups.push(() => handle.cleanup());
    const [a, b] = [handle.store, await handle.another()];
    // The claim shapes that name a claim index: by priority, untyped or typed, and by creation, typed.
    const untyped = [{}];
    const typed = [{ taskTypes: ["a"] }, { taskTypes: ["a"], sortBy: "created_at" as const, sortOrder: "asc" as const }];
    const claimEach = async (store: typeof a, shapes: ClaimShape[]) => {
      for (const shape of shapes) {
        const { task: low } = await store.enqueue({ taskType: "a", priority: 1 });
        const { task: high } = await store.enqueue({ taskType: "a", priority: 9 });
        const claimed = await store.claim({ workerId: "w1", limit: 2, ...shape });
        expect(claimed.map((t) => t.id)).toEqual(shape.sortBy === "created_at" ? [low.id, high.id] : [high.id, low.id]);
      }
    };
    // Both stores' connections hold the claims' statements, prepared against the indexes as they were.
    for (const store of [a, b]) await claimEach(store, [...untyped, ...typed]);
    // What a later build's migration may do. Rebuilt with another predicate, the index no longer fits the
    // statement that names it ("no query solution")...
    await handle.execute(`
      DROP INDEX tasks_claim_by_type_priority;
      CREATE INDEX tasks_claim_by_type_priority ON tasks (task_type, priority DESC, created_at, id) WHERE status = 'pending' AND waiting = 0 AND reserved_for IS NULL;
      DROP INDEX tasks_claim_by_type_created;
      CREATE INDEX tasks_claim_by_type_created ON tasks (task_type, created_at, id) WHERE status = 'pending' AND waiting = 0 AND reserved_for IS NULL;`);
    await claimEach(a, typed);
    // ... and dropped, it is not there ("no such index").
    await handle.execute("DROP INDEX tasks_claim_by_priority");
    await claimEach(b, untyped);
    for (const store of [a, b]) await claimEach(store, [...untyped, ...typed]);
    expect(await a.counts()).toMatchObject({ byStatus: { pending: 0, claimed: 30 } });
  });

  /**
   * A rollback: a database migrated by a newer taskpool, opened by this build. Its statements may no
   * longer fit the schema, so opening refuses, naming both versions, and writes nothing.
   */
  const markNewer = {
    postgres: async (handle: TestStore, version: number) => {
      await (handle.store as PostgresStore).pool.query("INSERT INTO taskpool_migrations (version, name) VALUES ($1, 'from_a_newer_taskpool')", [version]);
    },
    sqlite: async (handle: TestStore, version: number) => {
      (handle.store as SqliteStore).db.pragma(`user_version = ${version}`);
    },
  };
  const schemaVersion = {
    postgres: async (handle: TestStore) =>
      (await (handle.store as PostgresStore).pool.query("SELECT count(*)::int AS n, max(version) AS newest FROM taskpool_migrations")).rows[0],
    sqlite: async (handle: TestStore) => (handle.store as SqliteStore).db.pragma("user_version", { simple: true }),
  };
  for (const [name, create] of [["postgres", createPostgres], ["sqlite", createSqlite]] as const) {
    it(`${name}: a database a newer taskpool migrated is refused at open, naming both versions; nothing is written`, async () => {
      const handle = await create();
      cleanups.push(() => handle.cleanup());
      const known = loadMigrations(new URL(`../src/store/${name}/migrations/`, import.meta.url)).at(-1)!.version;
      await markNewer[name](handle, known + 2);
      const before = await schemaVersion[name](handle);
      const refused = await openStore(handle.url, { schema: handle.schema }).catch((e) => e);
      expect(refused).toBeInstanceOf(SchemaTooNewError);
      expect(refused).toMatchObject({ code: "schema_too_new", schemaVersion: known + 2, knownVersion: known });
      expect(refused.message).toMatch(`was migrated by a newer taskpool (schema ${known + 2}, this build knows ${known}): upgrade taskpool`);
      expect(refused.message).toMatch(name === "postgres" ? `PostgreSQL schema ${handle.schema} ` : `SQLite file ${handle.url.slice("sqlite:".length)} `);
      await expect((await handle.another()).migrate()).rejects.toBeInstanceOf(SchemaTooNewError);
      expect(await schemaVersion[name](handle)).toEqual(before);
    });
  }

  it("opens stores from connection strings and explains the ones it cannot", async () => {
    const memory = await openStore("sqlite::memory:");
    expect(memory.dialect).toBe("sqlite");
    await memory.close();
    // sqlite://./x.db once made /x.db: SQLite reads //./x.db as a path from the root.
    for (const url of ["mysql://localhost/db", "sqlite:", "./file.db", "", "sqlite://./stray.db", "sqlite:///tmp/stray.db"]) {
      const error = await openStore(url).catch((e) => e);
      expect(error).toBeInstanceOf(UnsupportedUrlError);
      expect(error.message).toMatch(/use sqlite:\.\/path\.db, sqlite::memory:, postgres:\/\/user@host:port\/db, or a taskpool server.s http:\/\/host:port/);
    }
    await expect(openStore(PG_URL, { schema: "Robert'); DROP" })).rejects.toThrow(/Invalid schema name/);
  });
});
