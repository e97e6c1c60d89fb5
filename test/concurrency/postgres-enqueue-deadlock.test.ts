import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type Taskpool } from "../../src/api/taskpool.js";
import { eventually } from "../helpers/logs.js";
import { dropSchema, PG_URL } from "../helpers/stores.js";

/**
 * Two writers inserting pending tasks of the same unique keys in opposite orders wait on each other in
 * tasks_pending_unique_key, and PostgreSQL ends one with "deadlock detected". Nothing of the victim's
 * statement or transaction was written, so the store writes it again instead of failing the call: a soak
 * of concurrent batches saw POST /api/tasks/batch answer 500 "deadlock detected".
 *
 * Made certain here: the other writer is a transaction of the application's (pool.inTransaction) holding
 * `b`; the store's call inserts `a`, then waits on `b`; the application then inserts `a`. Its session
 * waits 10 s before it looks for a deadlock, so the store's, which looks after 1 s, is always the victim.
 */
describe("an enqueue that loses a deadlock on unique keys (PostgreSQL)", () => {
  const schema = `tp_test_${randomBytes(6).toString("hex")}`;
  let pool: Taskpool;
  let app: pg.Pool;

  beforeAll(async () => {
    pool = await connect(PG_URL, { schema });
    app = new pg.Pool({ connectionString: PG_URL, max: 2, options: `-c search_path=${schema} -c deadlock_timeout=10s` });
  });

  afterAll(async () => {
    await pool?.close();
    await app?.end();
    await dropSchema(schema);
  });

  it.each([
    ["without an idempotency key (one statement)", {}],
    ["with an idempotency key (a transaction)", { idempotencyKey: "batch-1" }],
  ])("%s is written again and answered with the winner's tasks", async (_, options) => {
    const [a, b] = [`a-${randomBytes(4).toString("hex")}`, `b-${randomBytes(4).toString("hex")}`];
    const client = await app.connect();
    try {
      await client.query("BEGIN");
      const producer = pool.inTransaction(client);
      const [holdsB] = await producer.enqueueMany([{ taskType: "sync", params: { n: 2 }, uniqueKey: b }]);
      const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
      const call = pool.enqueueMany(
        [
          { taskType: "sync", params: { n: 1 }, uniqueKey: a },
          { taskType: "sync", params: { n: 2 }, uniqueKey: b },
        ],
        options,
      );
      const outcome = call.then(
        (value) => ({ value }),
        (error: Error) => ({ error }),
      );
      // The store's insert has written `a` and waits on the application's `b`.
      const waiting = async () =>
        (await app.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))", [rows[0].pid])).rows[0].n > 0;
      await eventually(waiting, 10_000, "the store's insert waiting on the application's transaction");
      // Waits on the store's `a` until PostgreSQL ends the store's side of the cycle.
      const [holdsA] = await producer.enqueueMany([{ taskType: "sync", params: { n: 1 }, uniqueKey: a }]);
      await client.query("COMMIT");
      const result = await outcome;
      expect("error" in result ? result.error.message : null).toBeNull();
      const written = "value" in result ? result.value : [];
      // The call was made again after the commit: both keys were held by then, so it answers with their holders.
      expect(written.map((r) => r.task.id)).toEqual([holdsA.task.id, holdsB.task.id]);
      expect(written.map((r) => r.created)).toEqual([false, false]);
      const counts = await pool.counts();
      expect(counts.byStatus.pending).toBeGreaterThanOrEqual(2);
    } finally {
      await client.query("ROLLBACK").catch(() => {});
      client.release();
    }
  });
});
