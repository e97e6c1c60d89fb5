import pg from "pg";
import { afterEach, beforeEach, describe, expect, it, onTestFinished, vi } from "vitest";
import { ValidationError } from "../src/core/errors.js";
import { errorReply } from "../src/server/errors.js";
import { PostgresStore } from "../src/store/postgres/postgres-store.js";
import { connectTimeoutMs } from "../src/store/postgres/timeouts.js";
import { createPostgres, PG_URL, type TestStore } from "./helpers/stores.js";

const { Client } = pg;

let handle: TestStore;
beforeEach(async () => {
  handle = await createPostgres();
});
afterEach(async () => {
  vi.unstubAllEnvs();
  await handle.cleanup();
});

it("a connection dropped while a transaction holds it fails that transaction, not the process", async () => {
  // What a sweep or a schedule run does: a client checked out of the pool, between two statements.
  const pool = (handle.store as unknown as { pool: pg.Pool }).pool;
  const client = await pool.connect();
  await client.query("BEGIN");
  const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
  const killed = new Promise((resolve) => client.once("end", resolve));
  // A database restart or failover looks like this to the client: its backend goes away.
  await pool.query("SELECT pg_terminate_backend($1)", [rows[0].pid]);
  await killed;
  // Without a listener of its own, the client's 'error' event would have been unheard and thrown
  // (vitest fails the run on it; a coordinator process exits).
  await expect(client.query("SELECT 1")).rejects.toThrow();
  client.release(true);
  // The pool dropped the dead client: the store goes on with a fresh connection.
  await handle.store.enqueue({ taskType: "after_the_drop" });
  expect((await handle.store.counts()).byStatus.pending).toBe(1);
});

it("a statement past its timeout is cancelled by the database, rolled back, and answered 503 by the HTTP layer, not left running", { timeout: 30_000 }, async () => {
  const { task } = await handle.store.enqueue({ taskType: "locked" });
  // The default limit is 10 s; the store's option sets another, here 1.5 s.
  const store = new PostgresStore({ url: PG_URL, schema: handle.schema, statementTimeoutMs: 1500 });
  onTestFinished(() => store.close());
  // Another session holds the task's row: the cancel waits for it, past the statement timeout.
  const holder = new Client({ connectionString: PG_URL });
  await holder.connect();
  try {
    await holder.query("BEGIN");
    await holder.query(`SELECT 1 FROM "${handle.schema}".tasks WHERE id = $1 FOR UPDATE`, [task.id]);
    const cancellingAt = performance.now();
    const error = await store.cancel(task.id).catch((e) => e);
    const seconds = (performance.now() - cancellingAt) / 1000;
    expect(seconds).toBeGreaterThanOrEqual(1.4);
    expect(seconds).toBeLessThan(2.4);
    // The database's cancel (57014), not pg's client-side read timeout, whose outcome is unknown.
    expect(error).toMatchObject({ code: "57014" });
    expect(errorReply(error)).toMatchObject({ status: 503, body: { error: "database_unavailable", message: expect.stringMatching(/^The database cancelled the statement .*nothing was written/) } });
    // Nothing still waits on the holder's lock. Counting every lock wait of the database counted other
    // test files' waits too (the enqueue deadlock test makes one on purpose).
    const { rows } = await holder.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid))");
    expect(rows[0].n).toBe(0);
  } finally {
    await holder.query("ROLLBACK");
    await holder.end();
  }
  expect((await handle.store.get(task.id))?.status).toBe("pending");
});

it("refuses a statement timeout out of range, saying the range", () => {
  for (const statementTimeoutMs of [50, 1500.5, 4_000_000]) {
    expect(() => new PostgresStore({ url: PG_URL, schema: handle.schema, statementTimeoutMs })).toThrow(
      `Invalid statementTimeoutMs ${statementTimeoutMs}: a whole number of milliseconds from 100 to 3600000`,
    );
  }
});

it("opens connections, and waits for a free one, within the statement's limit and a second, at most 11 s", () => {
  expect([100, 2000, 10_000, 30_000, 3_600_000].map(connectTimeoutMs)).toEqual([1100, 3000, 11_000, 11_000, 11_000]);
});

// A frozen process's transaction is ended after the statement timeout's length, at least 10 s (a busy
// process's stall) and at most 30 s: a statement timeout raised to an hour for slow reads left a frozen
// coordinator's sweep holding its locks, and recovery halted, for an hour.
it("ends a transaction left idle after the statement timeout's length, between 10 and 30 s", async () => {
  for (const [statementTimeoutMs, idle] of [
    [1500, "10s"],
    [20_000, "20s"],
    [3_600_000, "30s"],
  ] as const) {
    const store = new PostgresStore({ url: PG_URL, schema: handle.schema, statementTimeoutMs });
    try {
      const { rows } = await store.pool.query<{ idle_in_transaction_session_timeout: string }>("SHOW idle_in_transaction_session_timeout");
      expect([statementTimeoutMs, rows[0].idle_in_transaction_session_timeout]).toEqual([statementTimeoutMs, idle]);
    } finally {
      await store.close();
    }
  }
});

describe("the user's own connection settings", () => {
  const show = async (store: PostgresStore, setting: string) =>
    (await store.pool.query<Record<string, string>>(`SHOW ${setting}`)).rows[0][setting];

  it("keeps a URL's options beside the store's own: its schema, timeouts and plans stay as the store sets them", async () => {
    // pg reads a URL's options in place of the ones it is given: this URL put the store in `public`.
    const url = `${PG_URL}?options=${encodeURIComponent("-c lock_timeout=4321 --work-mem=5MB")}&application_name=tp-options-test`;
    const store = new PostgresStore({ url, schema: handle.schema, statementTimeoutMs: 2500 });
    onTestFinished(() => store.close());
    expect(await show(store, "lock_timeout")).toBe("4321ms");
    expect(await show(store, "work_mem")).toBe("5MB");
    expect(await show(store, "application_name")).toBe("tp-options-test");
    expect(await show(store, "search_path")).toBe(handle.schema);
    expect(await show(store, "statement_timeout")).toBe("2500ms");
    expect(await show(store, "plan_cache_mode")).toBe("force_generic_plan");
    const { task } = await store.enqueue({ taskType: "through_the_options_url" });
    expect((await handle.store.get(task.id))?.taskType).toBe("through_the_options_url");
  });

  it("reads PGOPTIONS when the URL has no options, as libpq does", async () => {
    vi.stubEnv("PGOPTIONS", "-c lock_timeout=1234");
    const store = new PostgresStore({ url: PG_URL, schema: handle.schema });
    onTestFinished(() => store.close());
    expect(await show(store, "lock_timeout")).toBe("1234ms");
    expect(await show(store, "search_path")).toBe(handle.schema);
  });

  it("refuses options that set one of the store's own settings, saying what sets it instead, before connecting", () => {
    const refused = (url: string) => {
      try {
        new PostgresStore({ url, schema: handle.schema });
      } catch (error) {
        return error as ValidationError;
      }
      throw new Error(`${url} was accepted`);
    };
    const schema = refused(`${PG_URL}?options=${encodeURIComponent("-c search_path=public")}`);
    expect(schema).toBeInstanceOf(ValidationError);
    expect(schema.message).toBe(
      "The connection URL's options set search_path, which taskpool sets on its connections: for search_path, choose the schema with the schema option (--schema, TASKPOOL_SCHEMA)",
    );
    const two = refused(`${PG_URL}?options=${encodeURIComponent("--statement-timeout=0 -c jit=on")}`);
    expect(two.message).toMatch(/^The connection URL's options set statement_timeout, jit, .*statementTimeoutMs option.*; for jit, /);
    vi.stubEnv("PGOPTIONS", "-cplan_cache_mode=auto");
    expect(refused(PG_URL).message).toMatch(/^PGOPTIONS sets plan_cache_mode, which taskpool sets/);
  });
});
