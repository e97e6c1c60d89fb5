import pg from "pg";
import { afterEach, beforeEach, expect, it } from "vitest";
import { eventually } from "../helpers/logs.js";
import { createPostgres, PG_URL, type TestStore } from "../helpers/stores.js";
import type { PostgresStore } from "../../src/store/postgres/postgres-store.js";

/**
 * A claim taking tasks of several concurrency keys inserts an entry per key into
 * tasks_active_concurrency_key; another writer taking the same keys in the other order waits on it while
 * it waits on the other, and PostgreSQL ends one with "deadlock detected". The claim wrote nothing, so
 * it is made again, as a claim that lost a key's race is, instead of failing (500 over HTTP).
 *
 * Made certain here: an application transaction holds key b (a running task it inserted); the claim
 * takes a's task, then waits on b; the application then inserts a running task of key a. Its session
 * waits 10 s before it looks for a deadlock, so the claim, which looks after 1 s, is the victim.
 */
let handle: TestStore<PostgresStore>;
beforeEach(async () => {
  handle = await createPostgres();
});
afterEach(async () => {
  await handle.cleanup();
});

it("a claim ended by a deadlock on concurrency keys is made again, not failed", { timeout: 30_000 }, async () => {
  const store = handle.store;
  await store.enqueue({ taskType: "sync", concurrencyKey: "a", priority: 2 });
  await store.enqueue({ taskType: "sync", concurrencyKey: "b", priority: 1 });
  const app = new pg.Client({ connectionString: PG_URL, options: `-c search_path=${handle.schema} -c deadlock_timeout=10s` });
  await app.connect();
  const running = (key: string) =>
    app.query(
      `INSERT INTO tasks (task_type, status, concurrency_key, scheduled_for, backoff, worker_id, lease_token, created_at, updated_at)
       VALUES ('other', 'running', $1, now(), '{}', 'app', 'app', now(), now())`,
      [key],
    );
  try {
    await app.query("BEGIN");
    await running("b");
    const pid = (await app.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0].pid;
    const outcome = store.claim({ workerId: "w1", limit: 2 }).then(
      (tasks) => ({ tasks }),
      (error: Error) => ({ error }),
    );
    const observer = new pg.Client({ connectionString: PG_URL });
    await observer.connect();
    try {
      await eventually(async () => (await observer.query("SELECT 1 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))", [pid])).rows.length > 0, 10_000, "the claim waiting on key b");
    } finally {
      await observer.end();
    }
    await running("a");
    await app.query("COMMIT");
    const result = await outcome;
    expect("error" in result ? result.error.message : null).toBeNull();
    // Both keys are held by the application's running tasks: the claim made again takes neither.
    expect("tasks" in result ? result.tasks : null).toEqual([]);
  } finally {
    await app.query("ROLLBACK").catch(() => {});
    await app.end();
  }
});
