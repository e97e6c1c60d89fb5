import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { createPostgres, type TestStore } from "../helpers/stores.js";

/**
 * A claim's lease is counted from when it is written, not from before the statement waited: a claim
 * held by a lock on the table (a migration, VACUUM FULL, an index built without CONCURRENTLY) for
 * longer than a heartbeat interval reached its worker with its lease nearly over, and the coordinator
 * took the task back before the worker's first renewal, while the worker ran it.
 */
describe("PostgreSQL claim lease after a wait", () => {
  let db: TestStore<PostgresStore>;
  beforeAll(async () => {
    db = await createPostgres();
  });
  afterAll(async () => {
    await db.cleanup();
  });

  it("runs its full length from the claim's write, a lock waited out included", async () => {
    await db.store.enqueue({ taskType: "locked" });
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query(`LOCK TABLE "${db.schema}".tasks IN EXCLUSIVE MODE`);
      const claiming = db.store.claimMany([{ workerId: "w1", taskTypes: ["locked"], leaseSeconds: 3, start: true }]);
      await new Promise((resolve) => setTimeout(resolve, 2500));
      await locker.query("COMMIT");
      const [[task]] = await claiming;
      const { rows } = await locker.query(`SELECT extract(epoch FROM lease_expires_at - clock_timestamp())::float8 AS left FROM "${db.schema}".tasks WHERE id = $1`, [task.id]);
      // Counted from before the wait, 0.5 s would be left.
      expect(rows[0].left).toBeGreaterThan(2.5);
      expect(rows[0].left).toBeLessThanOrEqual(3);
    } finally {
      await locker.end();
    }
  });
});
