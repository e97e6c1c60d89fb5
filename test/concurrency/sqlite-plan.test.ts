import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COUNTS, listStatement, PENDING_UP_TO_FEW } from "../../src/store/sqlite/queries.js";
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

  const ANY = { statuses: null, taskType: null, workerId: null, search: null, afterCursor: null };
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
    const params = { taskType: null, workerId: "w1", search: null, cursor: null, limit: 100 };
    for (const order of ["newest", "oldest"] as const) {
      const steps = plan(listStatement({ ...ANY, workerId: "w1", statuses: ["claimed", "running"] }, order), params);
      expect(steps).toContain("SEARCH tasks USING INDEX tasks_leased_by_worker (worker_id=?)");
      // The index's entries for one worker are in id order: nothing to sort.
      expect(steps.join(" | ")).not.toMatch(/^SCAN tasks$|ORDER BY/m);
    }
    const held = await handle.store.list({ workerId: "w1", status: ["claimed", "running"] });
    expect(held.tasks.map((t) => t.status)).toEqual(["claimed", "claimed", "claimed"]);
  });

  it("lists failed or cancelled tasks through tasks_finished_by_status in id order, the page ending the walk", () => {
    for (const status of ["failed", "cancelled"] as const) {
      for (const order of ["newest", "oldest"] as const) {
        for (const more of [{}, { taskType: "odd" }, { afterCursor: 500 }]) {
          const steps = plan(listStatement({ ...ANY, ...more, statuses: [status] }, order), { taskType: "odd", cursor: 500, limit: 100 }).join(" | ");
          expect(steps).toMatch(/^SEARCH tasks USING INDEX tasks_finished_by_status \(status=\?/);
          expect(steps).not.toMatch(/ORDER BY/);
        }
      }
    }
  });

  it("lists a few pending tasks through their index, and walks for a large backlog", async () => {
    expect(plan(listStatement({ ...ANY, statuses: ["pending"] }, "newest", true), { limit: 100 }).join(" | ")).toMatch(/^SCAN tasks USING INDEX tasks_pending_by_type \| USE TEMP B-TREE FOR ORDER BY$/);
    expect(plan(listStatement({ ...ANY, statuses: ["pending"] }, "newest", false), { limit: 100 }).join(" | ")).toMatch(/^SCAN tasks$/);
    // The store counts the backlog, up to FEW_PENDING, to choose.
    expect((handle.store.db.prepare(PENDING_UP_TO_FEW).get() as { n: number }).n).toBe((await handle.store.counts()).byStatus.pending);
  });

  it("lists leased tasks through a leased-task index, not a walk of the history", () => {
    for (const statuses of [["claimed"], ["running"], ["claimed", "running"]] as const) {
      expect(plan(listStatement({ ...ANY, statuses }, "newest"), { limit: 100 }).join(" | ")).toMatch(/USING INDEX tasks_leased_by_/);
    }
  });

  it("answers the same tasks whichever statement lists them", async () => {
    const all = (await handle.store.list({}, { limit: 1000 })).tasks;
    const walk = (await handle.store.list({}, { limit: 1000 })).nextCursor;
    expect(walk).not.toBeNull();
    for (const status of ["pending", "claimed", "failed", "cancelled"] as const) {
      const listed = [];
      let cursor: string | undefined;
      do {
        const page = await handle.store.list({ status }, { limit: 7, cursor });
        listed.push(...page.tasks.map((t) => t.id));
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      const expected = (handle.store.db.prepare("SELECT id FROM tasks WHERE status = ? ORDER BY id DESC").all(status) as { id: number }[]).map((r) => r.id);
      expect(listed).toEqual(expected);
      expect(expected.length).toBeGreaterThan(0);
    }
    expect(all.length).toBe(1000);
  });
});
