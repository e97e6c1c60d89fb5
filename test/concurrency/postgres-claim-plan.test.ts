import pg from "pg";
import type { SortBy, SortOrder } from "../../src/core/task.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { claimStatement, COUNTS, leanClaimStatement, listStatement } from "../../src/store/postgres/queries.js";
import { THROUGHPUT } from "../../src/store/postgres/monitoring-queries.js";
import { PRUNE_WORKER_EVENTS } from "../../src/store/postgres/retention-queries.js";
import { NEXT_RECOVERY, RECOVER_TASKS } from "../../src/store/postgres/worker-queries.js";
import { createPostgres, PG_URL, type TestStore } from "../helpers/stores.js";

/**
 * A claim must walk a claim index and stop after its limit, whatever the backlog: a plan that reads
 * the whole table makes every claim cost as much as the backlog is long. PostgreSQL picks the plan
 * from the table's statistics, so this test gives it real ones (one task type, as a single-queue
 * deployment has, which once made the planner estimate that no row passes the capped-type filter and
 * pick a full scan) and reads the plans it chooses, custom and generic.
 */
describe("PostgreSQL claim plans", () => {
  const db = usePlanSchema(async (store, client) => {
    for (let i = 0; i < 2; i++) await store.enqueueMany(Array.from({ length: 5000 }, () => ({ taskType: "only", params: { payload: "x".repeat(100) } })));
    await client.query("ANALYZE tasks");
  });
  claimsReadNoMoreThanTheyTake(db);
});

/**
 * Tasks scheduled for later (a delay, a retry's backoff) sit among the ready ones in every claim order.
 * Claims walked past those ahead of the first ready task: behind 500,000 of them, 400-570 ms reading
 * their rows, 60 ms reading index entries (migration 027). Now they wait outside the claim indexes
 * (migration 028), and a claim reads only the ones come due. Here 3,000 are ahead of the ready tasks
 * in each order, created before and after them, and 5 have come due among them; a claim of 10 takes
 * those 5 and 5 ready ones.
 */
describe("PostgreSQL claim plans behind tasks not yet due", () => {
  const db = usePlanSchema(async (store, client) => {
    const later = () => store.enqueueMany(Array.from({ length: 3000 }, () => ({ taskType: "only", delaySeconds: 3600 })));
    await later();
    await store.enqueueMany(Array.from({ length: 5 }, () => ({ taskType: "only", delaySeconds: 0.2 })));
    await store.enqueueMany(Array.from({ length: 3000 }, () => ({ taskType: "only" })));
    await later();
    await client.query("ANALYZE tasks");
    await new Promise((r) => setTimeout(r, 300));
  });
  claimsReadNoMoreThanTheyTake(db);
});

/**
 * Before the table's first ANALYZE (a fresh deployment's first burst, or a server with autovacuum off)
 * the planner knows neither the backlog nor how few tasks wait. The typed scan of the waiting tasks
 * come due walked tasks_pending_by_type, filtering out every ready task of the type: 5.8 ms of a
 * one-task claim behind 30,000 ready ones, growing with the backlog (migration 029). Typed claims
 * only, a worker's: an untyped claim's open scan still reads the backlog and sorts it here (see
 * docs/durability.md).
 */
describe("PostgreSQL typed claim plans before the table has statistics", () => {
  const db = usePlanSchema(async (store) => {
    for (let i = 0; i < 2; i++) await store.enqueueMany(Array.from({ length: 5000 }, () => ({ taskType: "only", params: { payload: "x".repeat(100) } })));
  });
  claimsReadNoMoreThanTheyTake(db, { typedOnly: true });
});

/** Each claim statement of each shape, in custom and generic plans, walks indexes and reads no more rows than it takes. */
function claimsReadNoMoreThanTheyTake(db: { client: pg.Client }, { typedOnly = false } = {}): void {
  const shapes = [
    { sortBy: "priority", sortOrder: "desc", typed: true },
    { sortBy: "priority", sortOrder: "desc", typed: false },
    { sortBy: "created_at", sortOrder: "asc", typed: true },
    { sortBy: "created_at", sortOrder: "desc", typed: false },
  ].filter((shape) => shape.typed || !typedOnly) as { sortBy: SortBy; sortOrder: SortOrder; typed: boolean }[];

  for (const { sortBy, sortOrder, typed } of shapes) {
    for (const [statement, text] of claimStatements(sortBy, sortOrder, typed)) {
      for (const mode of ["force_custom_plan", "force_generic_plan"]) {
        it(`${typed ? "typed" : "untyped"} ${statement} by ${sortBy} ${sortOrder} (${mode}) reads no more rows than it claims, through indexes`, async () => {
          await db.client.query(`SET plan_cache_mode = ${mode}`);
          await db.client.query("DEALLOCATE ALL");
          await db.client.query(`PREPARE claim(text[], timestamptz, int, int, int, int[]${typed ? ", text[]" : ""}) AS ${text}`);
          const args = `'{plan-test}', now(), 10, 60, NULL, '{10}'${typed ? ", '{only}'" : ""}`;
          await inRollback(db.client, async () => {
            const { rows } = await db.client.query(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE claim(${args})`);
            const scans = scansOf(rows[0]["QUERY PLAN"][0].Plan).filter((s) => s.relation === "tasks");
            expect(scans.filter((s) => s.type === "Seq Scan")).toEqual([]);
            // The scans that ran read at most what the claim takes (10) plus what it skips.
            expect(Math.max(...scans.map((s) => s.rows))).toBeLessThanOrEqual(20);
          });
        });
      }
    }
  }
}

/**
 * The listing indexes hold only pending, failed and cancelled tasks (migration 010), so a listing of
 * those must reach them through the index, in the generic plans the pool uses: a plan that walks the
 * primary key instead reads the whole history before the oldest pending task.
 */
describe("PostgreSQL listing plans", () => {
  const db = usePlanSchema(async (store, client) => {
    await store.enqueueMany(Array.from({ length: 10_000 }, (_, i) => ({ taskType: i % 2 ? "odd" : "even" })));
    // A history older than the backlog: 9,000 completed, 100 failed, then 900 pending.
    await client.query("UPDATE tasks SET status = 'completed', completed_at = now() WHERE id <= (SELECT min(id) + 8999 FROM tasks)");
    await client.query("UPDATE tasks SET status = 'failed', completed_at = now() WHERE id % 90 = 0 AND status = 'completed'");
    await client.query("ANALYZE tasks");
    await client.query("SET plan_cache_mode = force_generic_plan");
  });

  const listings = [
    { statuses: ["pending"], taskType: null, order: "oldest" },
    { statuses: ["pending"], taskType: "odd", order: "oldest" },
    { statuses: ["failed"], taskType: null, order: "newest" },
  ] as const;

  for (const { statuses, taskType, order } of listings) {
    it(`${statuses.join(" + ")} tasks${taskType ? ` of one type` : ""}, ${order} first: read through a listing index, not the history`, async () => {
      const text = listStatement({ statuses: [...statuses], taskType: taskType !== null, workerId: false, search: false, cursor: false }, order);
      await db.client.query("DEALLOCATE ALL");
      await db.client.query(`PREPARE list AS ${text}`);
      const { rows } = await db.client.query(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE list(20${taskType ? `, '${taskType}'` : ""})`);
      const scans = scansOf(rows[0]["QUERY PLAN"][0].Plan);
      expect(scans.map((s) => s.type)).not.toContain("Seq Scan");
      // What it reads is the page and the rows of other statuses or types it passes over on the way, not the history.
      expect(Math.max(...scans.map((s) => s.rows))).toBeLessThanOrEqual(200);
      expect(rows[0]["QUERY PLAN"][0].Plan["Actual Rows"]).toBe(20);
    });
  }

  it("claims never read a listing index, whatever the planner estimates: their guard keeps them to listings", async () => {
    // With the claim indexes gone (in a transaction rolled back after), a listing index is the best
    // plan left for a claim's scan of pending tasks if the planner may use it, as it once chose to
    // when its estimates were off.
    await inRollback(db.client, async () => {
      const { rows: claimIndexes } = await db.client.query<{ name: string }>("SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE 'tasks_claim%'");
      expect(claimIndexes.length).toBeGreaterThanOrEqual(5);
      for (const { name } of claimIndexes) await db.client.query(`DROP INDEX ${name}`);
      for (const typed of [true, false]) {
        for (const [, text] of claimStatements("priority", "desc", typed)) {
          await db.client.query("DEALLOCATE ALL");
          await db.client.query(`PREPARE claim(text[], timestamptz, int, int, int, int[]${typed ? ", text[]" : ""}) AS ${text}`);
          const { rows } = await db.client.query(`EXPLAIN (FORMAT JSON) EXECUTE claim('{plan-test}', now(), 10, 60, NULL, '{10}'${typed ? ", '{odd}'" : ""})`);
          const indexes = JSON.stringify(rows[0]["QUERY PLAN"]).match(/"Index Name":"[a-z_]+"/g) ?? [];
          expect(indexes.join(" ")).not.toMatch(/tasks_by_status|tasks_by_type/);
        }
      }
    });
  });
});

/**
 * Statements that must not read the history: on a table that is mostly completed tasks, counts()
 * reaches the other statuses through their indexes (migration 011), the pruning of worker-level
 * events finds them without a primary key (migration 012), and the sweep's recovery finds expired
 * and orphaned leases among the leased tasks only. A backlog that is a large share of the
 * table may rightly be read in a sequential scan, so this history is 100 times the backlog, as in a
 * queue that keeps a week of completed work.
 */
describe("PostgreSQL plans over a long history", () => {
  const db = usePlanSchema(async (store, client) => {
    await store.enqueueMany(Array.from({ length: 500 }, (_, i) => ({ taskType: i % 2 ? "odd" : "even", maxAttempts: 1 })));
    await client.query(`INSERT INTO tasks (task_type, scheduled_for, backoff, status, completed_at, created_at, updated_at)
      SELECT 'odd', now(), backoff, 'completed', now(), now(), now() FROM generate_series(1, 50000), (SELECT backoff FROM tasks LIMIT 1) b`);
    await client.query("INSERT INTO task_events (task_id, event, created_at) SELECT id, 'completed', now() FROM tasks WHERE status = 'completed'");
    await client.query("INSERT INTO task_events (event, from_worker_id, created_at) SELECT 'worker_dead', 'w' || i, now() - interval '30 days' FROM generate_series(1, 10) i");
    await client.query("UPDATE tasks SET status = 'failed', completed_at = now() WHERE id IN (SELECT id FROM tasks WHERE status = 'pending' LIMIT 20)");
    await client.query("ANALYZE tasks, task_events");
    await client.query("SET plan_cache_mode = force_generic_plan");
  });

  it("prunes worker-level events through the task index, not a scan of every event", async () => {
    await db.client.query(`PREPARE prune_worker_events(timestamptz, int) AS ${PRUNE_WORKER_EVENTS}`);
    await inRollback(db.client, async () => {
      const { rows } = await db.client.query("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE prune_worker_events(now() - interval '7 days', 500)");
      const scans = scansOf(rows[0]["QUERY PLAN"][0].Plan).filter((s) => s.relation === "task_events");
      expect(scans.map((s) => s.type)).not.toContain("Seq Scan");
      expect(scans.reduce((n, s) => n + s.rows, 0)).toBeLessThanOrEqual(100);
      expect(rows[0]["QUERY PLAN"][0].Plan["Actual Rows"]).toBe(1);
      expect((await db.client.query("SELECT count(*)::int AS n FROM task_events WHERE task_id IS NULL")).rows[0].n).toBe(0);
    });
  });

  it("recovers expired leases and a dead worker's tasks through the leased-task indexes, not the history", async () => {
    await db.client.query("UPDATE tasks SET status = 'running', worker_id = 'w' || (id % 7), lease_token = 'x', lease_expires_at = now() - interval '1 minute' * (id % 3 - 1) WHERE id IN (SELECT id FROM tasks WHERE status = 'pending' LIMIT 60)");
    await db.client.query("ANALYZE tasks");
    await db.client.query(`PREPARE recover(text[], timestamptz, jsonb, text, text, text, text) AS ${RECOVER_TASKS}`);
    await inRollback(db.client, async () => {
      const { rows } = await db.client.query("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE recover('{w1}', now(), '{}', 'died', 'expired', 'timed out after {seconds} s', 'claimed after shutdown')");
      const scans = scansOf(rows[0]["QUERY PLAN"][0].Plan).filter((s) => s.relation === "tasks");
      expect(scans.map((s) => s.type)).not.toContain("Seq Scan");
      // The 60 leased tasks (some expired, some of w1) and the rows recovered; none of the history.
      expect(Math.max(...scans.map((s) => s.rows))).toBeLessThanOrEqual(60);
      const { rows: left } = await db.client.query("SELECT count(*)::int AS n FROM tasks WHERE status = 'running' AND (worker_id = 'w1' OR lease_expires_at < now())");
      expect(left[0].n).toBe(0);
    });
  });

  // The leader reads it at every leadership tick (every 15 s by default), not once a sweep.
  it("finds the next lease to run out among the leased tasks only, not the history", async () => {
    await inRollback(db.client, async () => {
      await db.client.query("UPDATE tasks SET status = 'running', worker_id = 'w1', lease_token = 'x', lease_expires_at = now() + interval '1 second' * id WHERE id IN (SELECT id FROM tasks WHERE status = 'pending' LIMIT 40)");
      await db.client.query("ANALYZE tasks");
      const { rows } = await db.client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${NEXT_RECOVERY}`);
      const scans = scansOf(rows[0]["QUERY PLAN"][0].Plan).filter((s) => s.relation === "tasks");
      expect(scans.map((s) => s.type)).not.toContain("Seq Scan");
      // These 40 and any an earlier test of this schema left leased: none of the 50,000 of history.
      const { rows: leased } = await db.client.query("SELECT count(*)::int AS n FROM tasks WHERE status IN ('claimed', 'running')");
      expect(Math.max(...scans.map((s) => s.rows))).toBeLessThanOrEqual(leased[0].n);
      expect(leased[0].n).toBeLessThan(500);
    });
  });

  it("reads the backlog and the failures through their indexes, not the history", async () => {
    // Vacuumed as autovacuum keeps a table of history: the index-only scans need its visibility map.
    await db.client.query("VACUUM tasks");
    await db.client.query(`PREPARE counts AS ${COUNTS}`);
    await inRollback(db.client, async () => {
      await db.client.query("UPDATE tasks SET status = 'cancelled', completed_at = now() WHERE id IN (SELECT id FROM tasks WHERE status = 'pending' LIMIT 10)");
      const { rows } = await db.client.query("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE counts");
      const scans = scansOf(rows[0]["QUERY PLAN"][0].Plan).filter((s) => s.relation === "tasks");
      expect(scans.map((s) => s.type)).not.toContain("Seq Scan");
      // 410 pending, 60 running (the recovery test's), 20 failed and 10 cancelled tasks; none of the 50,000 completed ones.
      expect(scans.reduce((n, s) => n + s.rows, 0)).toBe(500);
      // Failed and cancelled tasks are counted from their indexes alone: kept until retried and
      // scattered through the history, each one read from the table cost a page (migration 017).
      const finished = scans.filter((s) => s.index === "tasks_failed_by_time" || s.index === "tasks_cancelled_by_time");
      expect(finished.map((s) => s.type)).toEqual(["Index Only Scan", "Index Only Scan"]);
    });
  });

  it("plans capacity through the backlog's and the leases' indexes and throughput from the minutes, not the history", async () => {
    const { rows } = await db.client.query("EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM v_worker_capacity");
    const scans = scansOf(rows[0]["QUERY PLAN"][0].Plan).filter((s) => s.relation === "tasks");
    expect(scans.map((s) => s.type)).not.toContain("Seq Scan");
    // The 420 pending and 60 running tasks; none of the 50,000 completed ones.
    expect(scans.reduce((n, s) => n + s.rows, 0)).toBe(480);
    await db.client.query(`PREPARE throughput(timestamptz, timestamptz, text) AS ${THROUGHPUT}`);
    for (const taskType of ["NULL", "'odd'"]) {
      const { rows: read } = await db.client.query(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE throughput(now() - interval '1 day', now(), ${taskType})`);
      expect(scansOf(read[0]["QUERY PLAN"][0].Plan).map((s) => s.relation)).not.toContain("tasks");
    }
  });
});

/** Runs `body` in a transaction rolled back after it: plans are read from real executions, and nothing they write stays. */
async function inRollback(client: pg.Client, body: () => Promise<void>): Promise<void> {
  await client.query("BEGIN");
  try {
    await body();
  } finally {
    await client.query("ROLLBACK");
  }
}

/** A fresh schema for a describe block, filled by `fill`, and a session on it to read plans with. */
function usePlanSchema(fill: (store: PostgresStore, client: pg.Client) => Promise<void>): { client: pg.Client } {
  const db = {} as { client: pg.Client };
  let handle: TestStore<PostgresStore>;
  beforeAll(async () => {
    handle = await createPostgres();
    db.client = new pg.Client({ connectionString: PG_URL });
    await db.client.connect();
    await db.client.query(`SET search_path = "${handle.schema}"`);
    await fill(handle.store, db.client);
  });
  afterAll(async () => {
    await db.client?.end();
    await handle.cleanup();
  });
  return db;
}

/** Every statement a claim of this shape may run: the full one, and the lean one for one worker and for several. */
function claimStatements(sortBy: SortBy, sortOrder: SortOrder, typed: boolean): [string, string][] {
  return [
    ["claim", claimStatement(sortBy, sortOrder, typed, true)],
    ["lean claim (one worker)", leanClaimStatement(sortBy, sortOrder, typed, true, true)],
    ["lean claim (several workers)", leanClaimStatement(sortBy, sortOrder, typed, true, false)],
  ];
}

interface Scan {
  type: string;
  relation: string;
  /** The index it reads, if any. */
  index?: string;
  rows: number;
}

function scansOf(plan: Record<string, unknown>): Scan[] {
  const here = typeof plan["Relation Name"] === "string" ? [{ type: plan["Node Type"] as string, relation: plan["Relation Name"] as string, index: plan["Index Name"] as string | undefined, rows: (plan["Actual Rows"] as number) * ((plan["Actual Loops"] as number) || 0) + ((plan["Rows Removed by Filter"] as number) ?? 0) }] : [];
  return [...here, ...((plan.Plans as Record<string, unknown>[] | undefined) ?? []).flatMap(scansOf)];
}
