import pg from "pg";
import { afterEach, beforeEach, expect, it } from "vitest";
import { UnavailableError } from "../src/core/errors.js";
import { errorReply } from "../src/server/errors.js";
import { PostgresStore, type PostgresStoreOptions } from "../src/store/postgres/postgres-store.js";
import { createPostgres, PG_URL, type TestStore } from "./helpers/stores.js";

let handle: TestStore<PostgresStore>;
/** The test's lock holders and stores, ended before its schema is dropped (the drop would wait on a lock still held). */
let ending: (() => Promise<void>)[] = [];
beforeEach(async () => {
  handle = await createPostgres();
});
afterEach(async () => {
  for (const end of ending.reverse()) await end();
  ending = [];
  await handle.cleanup();
});

function openStore(options: Omit<PostgresStoreOptions, "url" | "schema">): PostgresStore {
  const store = new PostgresStore({ url: PG_URL, schema: handle.schema, ...options });
  ending.push(() => store.close());
  return store;
}

/**
 * A slow operator read made deterministic: another session holds reassignment_events locked, and every
 * read of it (reassignments()) waits on its connection until the lock goes. No claim, heartbeat or
 * completion reads that table; only the coordinator's sweep writes it.
 */
async function lockReassignments() {
  const holder = new pg.Client({ connectionString: PG_URL });
  await holder.connect();
  await holder.query("BEGIN");
  await holder.query(`LOCK TABLE "${handle.schema}".reassignment_events IN ACCESS EXCLUSIVE MODE`);
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await holder.query("ROLLBACK");
    await holder.end();
  };
  ending.push(release);
  return {
    /** The sessions waiting on the lock now: pg_locks, as pg_stat_activity stays as the holder's transaction first read it. */
    blocked: async () =>
      (await holder.query<{ n: number }>("SELECT count(DISTINCT pid)::int AS n FROM pg_locks WHERE NOT granted AND pg_backend_pid() = ANY (pg_blocking_pids(pid))")).rows[0].n,
    release,
  };
}

async function until(check: () => Promise<boolean>, withinMs = 5000): Promise<void> {
  const deadline = performance.now() + withinMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`not within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const settled = <T>(promise: Promise<T>) => promise.then((value) => ({ value }), (error: unknown) => ({ error }));

it("slow operator reads hold at most their share of the pool: a worker's claim, beat and completion get a connection at once, and reads past the bound wait, then are refused (503)", { timeout: 30_000 }, async () => {
  const store = openStore({ poolSize: 4, operatorReads: { concurrency: 2, waitMs: 1500 } });
  await store.enqueue({ taskType: "work" });
  const lock = await lockReassignments();
  const startedAt = performance.now();
  // Ungated, these four and the search would take every connection of the pool, and then the worker's calls waited for one.
  const reads = [1, 2, 3, 4].map(() => settled(store.reassignments()));
  const search = settled(store.list({ search: "anything" }));
  await until(async () => (await lock.blocked()) >= 2);

  const hotAt = performance.now();
  const [task] = await store.claim({ workerId: "w1", limit: 1 });
  const beat = await store.workerHeartbeat({ workerId: "w1", leases: [{ taskId: task.id, leaseToken: task.leaseToken }] });
  const done = await store.complete(task.id, task);
  expect(performance.now() - hotAt).toBeLessThan(1000);
  expect(beat.lost).toEqual([]);
  expect(done.task.status).toBe("completed");

  // Past the bound: the third and fourth reads and the search waited their 1.5 s, never on a connection, and were refused.
  for (const refused of [await reads[2], await reads[3], await search]) {
    const { error } = refused as { error: unknown };
    expect(error).toBeInstanceOf(UnavailableError);
    expect(errorReply(error)).toMatchObject({ status: 503, body: { error: "database_unavailable", retry_after: 1, message: expect.stringMatching(/^2 slow reads .* waited 1500 ms for its turn; nothing was read/) } });
  }
  expect(performance.now() - startedAt).toBeGreaterThanOrEqual(1400);
  expect(await lock.blocked()).toBe(2);

  await lock.release();
  expect(await reads[0]).toEqual({ value: [] });
  expect(await reads[1]).toEqual({ value: [] });
});

it("a read past the bound runs once a running one ends, within its wait", { timeout: 30_000 }, async () => {
  const store = openStore({ poolSize: 4, operatorReads: { concurrency: 1, waitMs: 10_000 } });
  const lock = await lockReassignments();
  const first = settled(store.reassignments());
  await until(async () => (await lock.blocked()) === 1);
  const ended: string[] = [];
  const second = settled(store.counts()).finally(() => ended.push("second"));
  const third = settled(store.reassignments()).finally(() => ended.push("third"));
  void first.finally(() => ended.push("first"));
  // A worker's call meanwhile: ungated, the counts (no lock in their way) would have ended by its answer.
  expect(await store.get(1)).toBeNull();
  expect(await lock.blocked()).toBe(1);
  await lock.release();
  expect(await first).toEqual({ value: [] });
  expect(await second).toMatchObject({ value: { byStatus: {} } });
  expect(await third).toEqual({ value: [] });
  // Each took its turn as the one before it ended.
  expect(ended).toEqual(["first", "second", "third"]);
});

it("lets a fifth of the pool's connections run operator reads unless told otherwise, and refuses a bound outside the pool", async () => {
  const limit = (store: PostgresStore) => (store as unknown as { reads: { limit: number } }).reads.limit;
  expect(limit(openStore({}))).toBe(2);
  expect(limit(openStore({ poolSize: 3 }))).toBe(1);
  expect(limit(openStore({ poolSize: 20 }))).toBe(4);
  for (const concurrency of [0, 1.5, 11]) {
    expect(() => new PostgresStore({ url: PG_URL, schema: handle.schema, operatorReads: { concurrency } })).toThrow(
      `Invalid operatorReads.concurrency ${concurrency}: a whole number from 1 to poolSize (10)`,
    );
  }
});
