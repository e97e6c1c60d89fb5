import { describe, expect, it } from "vitest";
import type { WorkerBeat } from "../../src/core/worker.js";
import type { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import type { Store } from "../../src/store/store.js";
import type { StoreKind } from "../helpers/stores.js";
import { useStore } from "./context.js";

const SWEEP = { staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 };
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** Reads a monitoring view with plain SQL, as an operator would. */
async function view(store: Store, name: string): Promise<Record<string, unknown>[]> {
  if (store.dialect === "postgres") return (await (store as PostgresStore).pool.query(`SELECT * FROM ${name}`)).rows;
  return (store as SqliteStore).db.prepare(`SELECT * FROM ${name}`).all() as Record<string, unknown>[];
}

/** PostgreSQL returns roles as an array, SQLite as JSON text. */
const roles = (value: unknown) => (typeof value === "string" ? JSON.parse(value) : value);

/**
 * The views use the database's clock (now(), datetime('now')), so these tests set the store's clock to
 * the real time and seed rows relative to it.
 */
export function viewsContract(kind: StoreKind) {
  describe("monitoring views", () => {
    const ctx = useStore(kind);
    let start: number;
    const at = (offsetMs: number) => ctx.clock.set(new Date(start + offsetMs));
    const beat = (workerId: string, extra: Partial<WorkerBeat> = {}) =>
      ctx.store.workerHeartbeat({ workerId, roles: ["crawl"], capacity: 10, currentLoad: 0, tasksProcessed: 0, ...extra });
    const completeAll = async (n: number) => {
      for (const t of await ctx.store.claim({ workerId: "w9", limit: n })) await ctx.store.complete(t.id, t);
    };

    it("worker_status and v_worker_capacity report the seeded figures", async () => {
      start = Date.now();
      at(-2 * HOUR);
      await ctx.store.enqueue({ taskType: "crawl" });
      await completeAll(1); // too long ago to count as throughput
      at(-10 * MINUTE);
      await ctx.store.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }, { taskType: "crawl" }]);
      await completeAll(3);
      await beat("gone-quiet"); // still 'active' (no sweep yet), but not heard from within 2 minutes
      at(-30_000);
      await beat("w1", { roles: ["crawl", "parse"], capacity: 4, currentLoad: 1 });
      at(0);
      await beat("w2", { capacity: 2, currentLoad: 2 });
      await ctx.store.enqueueMany([
        ...Array.from({ length: 6 }, () => ({ taskType: "crawl" })),
        { taskType: "crawl", scheduledFor: new Date(start + HOUR) },
      ]);
      await ctx.store.claim({ workerId: "w1" });
      const [running] = await ctx.store.claim({ workerId: "w2" });
      await ctx.store.start(running.id, running);
      await ctx.store.registerTaskType({ name: "parse", maxRunning: 3 });

      const workers = new Map((await view(ctx.store, "worker_status")).map((w) => [w.worker_id, w]));
      expect(workers.get("w1")).toMatchObject({ status: "active", hostname: null, capacity: 4, current_load: 1, load_percent: 25, active_tasks: 1 });
      expect(roles(workers.get("w1")?.roles)).toEqual(["crawl", "parse"]);
      expect(workers.get("w2")).toMatchObject({ load_percent: 100, active_tasks: 1 });
      expect(workers.get("gone-quiet")).toMatchObject({ load_percent: 0, active_tasks: 0 });
      const elapsed = Math.ceil((Date.now() - start) / 1000) + 1;
      expect(workers.get("w1")?.seconds_since_heartbeat).toBeGreaterThanOrEqual(30);
      expect(workers.get("w1")?.seconds_since_heartbeat).toBeLessThanOrEqual(30 + elapsed);
      expect(workers.get("gone-quiet")?.seconds_since_heartbeat).toBeGreaterThanOrEqual(600);

      const capacity = new Map((await view(ctx.store, "v_worker_capacity")).map((r) => [r.task_type, r]));
      // 5 pending (4 ready, 1 scheduled later), 2 held; 3 done in the last hour by 2 live workers:
      // 1.5 tasks per worker-hour, 5 / 3 = 1.67 hours to drain, ceil(5 / 1.5 / N) workers for N hours.
      expect(capacity.get("crawl")).toEqual({
        task_type: "crawl", pending_tasks: 5, ready_tasks: 4, running_tasks: 2, active_workers: 2, completed_last_hour: 3,
        max_running: null, tasks_per_worker_hour: 1.5, estimated_hours_to_drain: 1.67,
        workers_needed_1h: 4, workers_needed_4h: 1, workers_needed_8h: 1,
      });
      // Registered, staffed by w1, no work and no throughput yet.
      expect(capacity.get("parse")).toEqual({
        task_type: "parse", pending_tasks: 0, ready_tasks: 0, running_tasks: 0, active_workers: 1, completed_last_hour: 0,
        max_running: 3, tasks_per_worker_hour: 0, estimated_hours_to_drain: 0,
        workers_needed_1h: null, workers_needed_4h: null, workers_needed_8h: null,
      });
    });

    it("reassignment views: 24-hour success rate, failing workers, tasks reassigned more than once", async () => {
      start = Date.now();
      at(-26 * HOUR);
      await beat("ancient");
      const { task: twice } = await ctx.store.enqueue({ taskType: "crawl" });
      await ctx.store.claim({ workerId: "ancient" });
      at(-25 * HOUR);
      expect((await ctx.store.sweep(SWEEP)).unassigned).toEqual([twice.id]); // outside the 24-hour window
      at(-5 * MINUTE);
      await beat("dying");
      await ctx.store.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }]);
      expect(await ctx.store.claim({ workerId: "dying", limit: 3 })).toHaveLength(3);
      at(0);
      await beat("helper", { capacity: 1 });
      const result = await ctx.store.sweep(SWEEP);
      expect([result.reassigned.length, result.unassigned.length]).toEqual([1, 2]);

      expect(await view(ctx.store, "v_reassignment_stats")).toEqual([{ total: 3, successful: 1, success_rate_percent: 33.3 }]);
      const failing = (await view(ctx.store, "v_failing_workers")).map((r) => [r.from_worker_id, r.failure_count]);
      expect(failing.sort()).toEqual([["ancient", 1], ["dying", 3]]);
      expect((await view(ctx.store, "v_repeated_reassignments")).map((r) => [r.task_id, r.reassignment_count])).toEqual([[twice.id, 2]]);
    });
  });
}
