import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COUNTS } from "../../src/store/sqlite/queries.js";
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
});
