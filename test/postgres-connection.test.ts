import type pg from "pg";
import { afterEach, beforeEach, expect, it } from "vitest";
import { createPostgres, type TestStore } from "./helpers/stores.js";

let handle: TestStore;
beforeEach(async () => {
  handle = await createPostgres();
});
afterEach(async () => {
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
