import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COUNTS, listStatement } from "../../src/store/sqlite/queries.js";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { createSqlite, type TestStore } from "../helpers/stores.js";

/**
 * What the dashboard and /metrics read on every refresh must not read the history: SQLite runs in the
 * server's one thread, so a statement that walks the table stalls every other request while it runs.
 * Plans are read with EXPLAIN QUERY PLAN on a table that is mostly history, analyzed.
 */
describe("SQLite plans over a long history", () => {
  let handle: TestStore<SqliteStore>;
  beforeAll(async () => {
    handle = await createSqlite();
    await handle.store.enqueueMany(Array.from({ length: 2000 }, (_, i) => ({ taskType: i % 2 ? "odd" : "even" })));
    const db = handle.store.db;
    db.exec("UPDATE tasks SET status = 'completed', completed_at = created_at WHERE id % 10 <> 0");
    db.exec("UPDATE tasks SET status = 'failed', completed_at = created_at WHERE id % 100 = 7");
    db.exec("UPDATE tasks SET status = 'cancelled', completed_at = created_at WHERE id % 100 = 9");
    await handle.store.claim({ workerId: "w1", limit: 3 });
    db.exec("ANALYZE");
  });
  afterAll(() => handle.cleanup());

  const plan = (sql: string, params: Record<string, unknown> = {}) =>
    (handle.store.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(params) as { detail: string }[]).map((r) => r.detail);

  it("counts failed and cancelled tasks from their indexes alone, not a row of the history each", () => {
    const steps = plan(COUNTS);
    expect(steps.filter((s) => /^SCAN tasks$/.test(s))).toEqual([]);
    // Kept until retried and scattered through the history, each failed task read from the table cost a lookup (migration 013).
    expect(steps).toContain("SCAN tasks USING COVERING INDEX tasks_failed_by_time");
    expect(steps).toContain("SCAN tasks USING COVERING INDEX tasks_cancelled_by_time");
  });

  it("lists what a worker holds through the leased tasks' index, not a walk of the history", async () => {
    // The dashboard's Workers page asks for one worker's claimed and running tasks every few seconds.
    const params = { statuses: JSON.stringify(["claimed", "running"]), taskType: null, workerId: "w1", search: null, cursor: null, limit: 100 };
    for (const order of ["newest", "oldest"] as const) {
      const steps = plan(listStatement({ workerId: "w1", statuses: ["claimed", "running"] }, order), params);
      expect(steps).toContain("SEARCH tasks USING INDEX tasks_leased_by_worker (worker_id=?)");
      // The index's entries for one worker are in id order: nothing to sort.
      expect(steps.join(" | ")).not.toMatch(/^SCAN tasks$|ORDER BY/m);
    }
    const held = await handle.store.list({ workerId: "w1", status: ["claimed", "running"] });
    expect(held.tasks.map((t) => t.status)).toEqual(["claimed", "claimed", "claimed"]);
  });
});
