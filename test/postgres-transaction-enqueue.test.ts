import { randomBytes } from "node:crypto";
import pg from "pg";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type Taskpool } from "../src/api/taskpool.js";
import { ValidationError } from "../src/core/errors.js";
import { eventually } from "./helpers/logs.js";
import { dropSchema, PG_URL } from "./helpers/stores.js";

/**
 * pool.inTransaction(client): tasks written inside the caller's own transaction, on the caller's
 * connection, which has its own search_path and pg's default type parsers (int8 as text).
 */
describe("enqueue inside the caller's PostgreSQL transaction", () => {
  const schema = `tp_test_${randomBytes(6).toString("hex")}`;
  const appSchema = `app_test_${randomBytes(6).toString("hex")}`;
  let pool: Taskpool;
  let app: pg.Pool;

  beforeAll(async () => {
    pool = await connect(PG_URL, { schema });
    // The application's own connections: its own schema first on the search_path, with a table
    // called tasks of its own that taskpool must not write to.
    app = new pg.Pool({ connectionString: PG_URL, max: 3, options: `-c search_path=${appSchema},public` });
    await app.query(`CREATE SCHEMA ${appSchema}`);
    await app.query(`CREATE TABLE ${appSchema}.orders (id serial PRIMARY KEY, item text NOT NULL)`);
    await app.query(`CREATE TABLE ${appSchema}.tasks (id serial PRIMARY KEY, note text)`);
  });

  afterAll(async () => {
    await pool?.close();
    await app?.query(`DROP SCHEMA IF EXISTS ${appSchema} CASCADE`).catch(() => {});
    await app?.end();
    await dropSchema(schema);
  });

  /** Runs `body` in a transaction on one of the application's connections; rolls back if it throws or `rollback`. */
  async function inAppTransaction<T>(body: (client: pg.PoolClient) => Promise<T>, rollback = false): Promise<T> {
    const client = await app.connect();
    try {
      await client.query("BEGIN");
      const result = await body(client);
      await client.query(rollback ? "ROLLBACK" : "COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK");
      throw error;
    } finally {
      client.release();
    }
  }

  it("commits with the caller's writes: invisible until COMMIT, then whole, with its created event", async () => {
    const client = await app.connect();
    try {
      await client.query("BEGIN");
      await client.query("INSERT INTO orders (item) VALUES ('book')");
      const task = await pool.inTransaction(client).enqueue("send_receipt", { order: "book" }, { priority: 3 });
      expect(task).toMatchObject({ taskType: "send_receipt", params: { order: "book" }, priority: 3, status: "pending" });
      expect(typeof task.id).toBe("number");
      expect(task.createdAt).toBeInstanceOf(Date);
      expect(task.scheduledFor).toBeInstanceOf(Date);
      expect(await pool.get(task.id)).toBeNull();
      await client.query("COMMIT");
      expect(await pool.get(task.id)).toEqual(task);
      expect((await pool.events(task.id)).map((e) => e.event)).toEqual(["created"]);
      // Not a row of the application's own table called tasks.
      expect((await client.query("SELECT count(*)::int AS n FROM tasks")).rows[0].n).toBe(0);
    } finally {
      client.release();
    }
  });

  it("vanishes with a ROLLBACK: no task, no event, nothing to claim", async () => {
    const before = (await pool.counts()).byStatus.pending;
    const [a, b] = await inAppTransaction(async (client) => {
      await client.query("INSERT INTO orders (item) VALUES ('lamp')");
      return pool.inTransaction(client).enqueueMany([
        { taskType: "send_receipt", params: { order: "lamp" } },
        { taskType: "send_receipt", params: { order: "lamp", copy: true } },
      ]);
    }, true);
    expect(a.created && b.created).toBe(true);
    expect(await pool.get(a.task.id)).toBeNull();
    expect(await pool.events(b.task.id)).toEqual([]);
    expect((await pool.counts()).byStatus.pending).toBe(before);
  });

  it("wakes a listening worker at COMMIT, not before", async () => {
    const ran: number[] = [];
    const worker = pool.worker({
      roles: ["notify_shop"],
      pollIntervalMs: 60_000,
      logger: pino({ level: "silent" }),
      handlers: { notify_shop: async (_params, ctx) => void ran.push(ctx.task.id) },
    });
    await worker.start();
    try {
      const client = await app.connect();
      try {
        await client.query("BEGIN");
        const task = await pool.inTransaction(client).enqueue("notify_shop", {});
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(ran).toEqual([]);
        await client.query("COMMIT");
        // Far sooner than the worker's 60 s poll: the NOTIFY sent at COMMIT woke it.
        await eventually(async () => ran.includes(task.id), 10_000, "the worker to run the committed task");
      } finally {
        client.release();
      }
    } finally {
      await worker.stop();
    }
  });

  it("answers a pending unique key's holder, also when the holder was written earlier in the same transaction", async () => {
    const committed = await pool.enqueue("sync_stock", {}, { uniqueKey: "stock:1" });
    const [first, again, mine, mineAgain] = await inAppTransaction(async (client) => {
      const tx = pool.inTransaction(client);
      return [
        await tx.enqueueMany([{ taskType: "sync_stock", params: {}, uniqueKey: "stock:1" }]),
        await tx.enqueueMany([{ taskType: "sync_stock", params: {}, uniqueKey: "stock:1" }]),
        await tx.enqueueMany([{ taskType: "sync_stock", params: {}, uniqueKey: "stock:2" }]),
        await tx.enqueueMany([{ taskType: "sync_stock", params: {}, uniqueKey: "stock:2" }]),
      ].map(([r]) => r);
    });
    expect(first).toEqual({ task: committed, created: false });
    expect(again).toEqual({ task: committed, created: false });
    expect(mine.created).toBe(true);
    expect(mineAgain).toEqual({ task: mine.task, created: false });
    expect(await pool.get(mine.task.id)).toEqual(mine.task);
  });

  it("a unique key held by an open transaction makes only its own enqueue wait, not the pool's other enqueues beside it", async () => {
    let commit = () => {};
    const committed = new Promise<void>((resolve) => (commit = resolve));
    let written = () => {};
    const held = new Promise<void>((resolve) => (written = resolve));
    const holder = inAppTransaction(async (client) => {
      const [result] = await pool.inTransaction(client).enqueueMany([{ taskType: "sync_price", params: {}, uniqueKey: "price:1" }]);
      written();
      await committed;
      return result;
    });
    await held;
    // Made together, these shared one statement, which waited on the holder's key with the one call that
    // asked for it: all of them, up to the statement timeout, and then all failed.
    const sameKey = pool.enqueue("sync_price", {}, { uniqueKey: "price:1" });
    const startedAt = performance.now();
    const others = await Promise.all(Array.from({ length: 10 }, (_, i) => pool.enqueue("unrelated", { i })));
    expect(performance.now() - startedAt).toBeLessThan(2000);
    expect(others.map((t) => t.params.i)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    commit();
    const mine = await holder;
    expect(await sameKey).toEqual(mine.task);
  });

  it("writes into a schema named as an SQL keyword, and refuses a name too long for its notification channel", async () => {
    // "order": the statements for a caller's connection named it unquoted, a syntax error.
    const keyword = await connect(PG_URL, { schema: "order" });
    try {
      const [{ task }] = await inAppTransaction((client) => keyword.inTransaction(client).enqueueMany([{ taskType: "ship", params: {} }]));
      expect(await keyword.get(task.id)).toMatchObject({ taskType: "ship", status: "pending" });
    } finally {
      await keyword.close();
      await dropSchema("order");
    }
    // taskpool_<schema> must fit PostgreSQL's 63 bytes: 55 characters were migrated, and then every enqueue failed.
    await expect(connect(PG_URL, { schema: "s".repeat(55) })).rejects.toThrow(/^Invalid schema name "s{55}": use lower-case letters, digits and _, 54 at most/);
    const longest = `tp_${"s".repeat(51)}`;
    const atLimit = await connect(PG_URL, { schema: longest });
    try {
      expect((await atLimit.enqueue("ship", {})).status).toBe("pending");
    } finally {
      await atLimit.close();
      await dropSchema(longest);
    }
  });

  it("checks tasks against their registered type before writing, and a refusal leaves the transaction usable", async () => {
    await pool.registerTaskType({ name: "charge", paramsSchema: { type: "object", properties: { cents: { type: "integer" } }, required: ["cents"] }, maxAttempts: 7 });
    const [refused, task] = await inAppTransaction(async (client) => {
      const tx = pool.inTransaction(client);
      const error = await tx.enqueue("charge", { cents: "12" }).catch((e: unknown) => e);
      await client.query("INSERT INTO orders (item) VALUES ('after the refusal')");
      return [error, await tx.enqueue("charge", { cents: 12 })] as const;
    });
    expect(refused).toBeInstanceOf(ValidationError);
    expect((refused as Error).message).toBe("Invalid params for charge v1: params.cents: must be integer");
    expect(task).toMatchObject({ taskTypeVersion: 1, maxAttempts: 7 });
    // A version registered meanwhile applies at once, as it does to every enqueue.
    await pool.registerTaskType({ name: "charge", paramsSchema: { type: "object" }, maxAttempts: 2 });
    const later = await inAppTransaction((client) => pool.inTransaction(client).enqueue("charge", { cents: "free" }));
    expect(later).toMatchObject({ taskTypeVersion: 2, maxAttempts: 2 });
  });

  it("refuses what is not a connection, and pools that are not on PostgreSQL, before writing anything", async () => {
    const notAConnection = await pool
      .inTransaction({} as pg.PoolClient)
      .enqueue("x", {})
      .catch((e: unknown) => e);
    expect(notAConnection).toBeInstanceOf(ValidationError);
    expect((notAConnection as Error).message).toMatch(/^connection: expected your open PostgreSQL connection/);
    const sqlite = await connect("sqlite::memory:");
    try {
      const client = await app.connect();
      try {
        await expect(sqlite.inTransaction(client).enqueue("x", {})).rejects.toThrow(
          "Enqueueing inside your own transaction needs a PostgreSQL database; this pool is on sqlite. Its enqueue and enqueueMany commit on their own, not with your writes: to tie tasks to your rows, enqueue them once your transaction has committed (with an idempotency key, so a retry after a crash creates them once)",
        );
      } finally {
        client.release();
      }
    } finally {
      await sqlite.close();
    }
  });
});
