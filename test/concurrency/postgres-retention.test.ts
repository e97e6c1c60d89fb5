import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { ManualClock } from "../../src/core/clock.js";
import { createPostgres, PG_URL, type TestStore } from "../helpers/stores.js";

const WEEK = 7 * 86_400;
const PRUNE = { completedAfterSeconds: WEEK, cancelledAfterSeconds: WEEK, failedAfterSeconds: null, batchSize: 500 };

/**
 * Retention next to live work on PostgreSQL: a pass neither waits for a finished task someone holds
 * locked (it skips it, and takes it on a later pass) nor holds up a claim running beside it.
 */
describe("PostgreSQL retention beside concurrent transactions", () => {
  let handle: TestStore;
  let other: pg.Client | null = null;
  afterEach(async () => {
    await other?.query("ROLLBACK").catch(() => {});
    await other?.end();
    other = null;
    await handle?.cleanup();
  });

  it("skips a finished task another transaction has locked instead of waiting, and claims go on during a pass", async () => {
    const clock = new ManualClock();
    handle = await createPostgres({ clock });
    const store = new CheckedStore(handle.store);
    await store.enqueueMany([{ taskType: "a" }, { taskType: "a" }]);
    const [locked, free] = await store.claim({ workerId: "w1", limit: 2 });
    await store.complete(locked.id, locked);
    await store.complete(free.id, free);
    clock.advance(8 * 86_400_000);
    const held = (await store.enqueue({ taskType: "a" })).task;
    const ready = (await store.enqueue({ taskType: "a" })).task;

    other = new pg.Client({ connectionString: PG_URL, options: `-c search_path=${handle.schema}` });
    await other.connect();
    await other.query("BEGIN");
    await other.query("SELECT id FROM tasks WHERE id = $1 FOR UPDATE", [locked.id]);
    // And a pending task, as a claim in progress would: neither the pass nor the next claim waits on it.
    await other.query("SELECT id FROM tasks WHERE id = $1 FOR UPDATE", [held.id]);

    const started = Date.now();
    const [result, claimed] = await Promise.all([store.prune(PRUNE), store.claim({ workerId: "w2" })]);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(result.tasks).toBe(1);
    expect(await store.get(free.id)).toBeNull();
    expect(await store.get(locked.id)).not.toBeNull();
    expect(claimed.map((t) => t.id)).toEqual([ready.id]);

    await other.query("ROLLBACK");
    expect((await store.prune(PRUNE)).tasks).toBe(1);
    expect(await store.get(locked.id)).toBeNull();
  });
});
