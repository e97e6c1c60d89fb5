import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import type { ClaimedTask } from "../../src/core/task.js";
import type { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { createPostgres, PG_URL, type TestStore } from "../helpers/stores.js";

const SWEEP = { staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 };

/**
 * The sweep locks a worker's row before its tasks (it marks the worker dead, then takes its tasks
 * back). A worker's heartbeat and its shutdown must take the same order, or a worker acting just as it is
 * declared dead deadlocks with the sweep: PostgreSQL aborts one of them after a second, and the
 * sweep, which recovers every dead worker's tasks in one transaction, starts over at its next pass.
 * The interleaving is forced: a third session holds the task's row, so both statements queue on it
 * with whatever else they locked first.
 */
describe("PostgreSQL: a worker's heartbeat and shutdown take their locks in the sweep's order", () => {
  let handle: TestStore<PostgresStore>;
  let holder: pg.Client;
  let watcher: pg.Client;
  afterEach(async () => {
    await holder?.end().catch(() => {});
    await watcher?.end().catch(() => {});
    await handle?.cleanup();
  });

  /**
   * Resolves when `count` sessions wait, directly or in a queue, on the holder's lock. Only those: other
   * files running beside this one wait on locks of their own (the deadlock tests on purpose), and a
   * count of every waiting session in the database let the test go on too early (seen once in CI).
   */
  async function waitingOnLocks(count: number): Promise<void> {
    const holderPid = (holder as unknown as { processID: number }).processID;
    for (let i = 0; i < 500; i++) {
      const { rows } = await watcher.query<{ pid: number; blockers: number[] }>(
        "SELECT pid, pg_blocking_pids(pid) AS blockers FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
      );
      const behind = new Set([holderPid]);
      for (let grew = true; grew; ) {
        grew = false;
        for (const r of rows) {
          if (behind.has(r.pid) || !r.blockers.some((b) => behind.has(b))) continue;
          behind.add(r.pid);
          grew = true;
        }
      }
      if (behind.size - 1 >= count) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`never saw ${count} sessions waiting on a lock`);
  }

  /**
   * A worker holding a task, silent past dead_after but with its lease still running (only the worker's
   * death makes the sweep take the task). `act` (its beat, its shutdown) and a sweep are queued on the
   * task's row, held by a third session, `act` first; then the row is let go. Both outcomes, settled.
   */
  async function declaredDeadAsItActs(act: (store: PostgresStore, task: ClaimedTask) => Promise<unknown>) {
    handle = await createPostgres();
    const [acting, sweeper] = await Promise.all([handle.another({ poolSize: 1 }), handle.another({ poolSize: 1 })]);
    await handle.store.workerHeartbeat({ workerId: "w1", runId: "run-1", roles: ["crawl"] });
    await handle.store.enqueue({ taskType: "crawl", params: {} });
    const [task] = await handle.store.claim({ workerId: "w1", taskTypes: ["crawl"] });
    await handle.execute("UPDATE workers SET last_seen_at = now() - interval '1 hour'");

    holder = new pg.Client({ connectionString: PG_URL });
    watcher = new pg.Client({ connectionString: PG_URL });
    await Promise.all([holder.connect(), watcher.connect()]);
    await holder.query("BEGIN");
    await holder.query(`SELECT 1 FROM "${handle.schema}".tasks WHERE id = $1 FOR UPDATE`, [task.id]);

    const acted = act(acting, task);
    await waitingOnLocks(1);
    const sweep = sweeper.sweep(SWEEP);
    await waitingOnLocks(2);
    await holder.query("COMMIT");
    const [outcome, swept] = await Promise.allSettled([acted, sweep]);
    return { task, outcome, swept };
  }

  it("a beat arriving as its worker is declared dead neither deadlocks nor loses the lease", async () => {
    const { task, outcome, swept } = await declaredDeadAsItActs((store, t) =>
      store.workerHeartbeat({ workerId: "w1", leases: [{ taskId: t.id, leaseToken: t.leaseToken }], allLeases: true }),
    );
    expect(outcome).toEqual({ status: "fulfilled", value: { lost: [] } });
    // The beat came first: the worker is alive, and keeps its task.
    expect(swept).toMatchObject({ status: "fulfilled", value: { deadWorkers: [], requeued: [] } });
    expect(await handle.store.get(task.id)).toMatchObject({ status: task.status, workerId: "w1", leaseToken: task.leaseToken });
  });

  it("a batch of beats from a dead worker and a stale one, arriving as the sweep marks them, does not deadlock with it", async () => {
    handle = await createPostgres();
    const [acting, sweeper] = await Promise.all([handle.another({ poolSize: 1 }), handle.another({ poolSize: 1 })]);
    await handle.store.workerHeartbeatMany([{ workerId: "a", roles: ["crawl"] }, { workerId: "b", roles: ["crawl"] }]);
    // a silent past dead_after (120 s), b only past stale_after (60 s): the sweep marks b, then a.
    await handle.execute("UPDATE workers SET last_seen_at = now() - CASE worker_id WHEN 'a' THEN interval '1 hour' ELSE interval '90 seconds' END");
    holder = new pg.Client({ connectionString: PG_URL });
    watcher = new pg.Client({ connectionString: PG_URL });
    await Promise.all([holder.connect(), watcher.connect()]);
    await holder.query("BEGIN");
    await holder.query(`SELECT 1 FROM "${handle.schema}".workers WHERE worker_id = 'a' FOR UPDATE`);
    // The batch waits for a's row, holding none; the sweep then waits for a's row too, having marked b stale.
    const beats = acting.workerHeartbeatMany([{ workerId: "a", roles: ["crawl"] }, { workerId: "b", roles: ["crawl"] }]);
    await waitingOnLocks(1);
    const sweep = sweeper.sweep(SWEEP);
    await waitingOnLocks(2);
    await holder.query("COMMIT");
    const [outcome, swept] = await Promise.allSettled([beats, sweep]);
    expect(outcome).toMatchObject({ status: "fulfilled" });
    // The beats came first: both workers are alive.
    expect(swept).toMatchObject({ status: "fulfilled", value: { staleWorkers: [], deadWorkers: [] } });
    expect((await handle.store.listWorkers()).workers.map((w) => [w.workerId, w.status])).toEqual([["a", "active"], ["b", "active"]]);
  });

  it("a worker shutting down as it is declared dead neither deadlocks nor leaves its task leased", async () => {
    const { task, outcome, swept } = await declaredDeadAsItActs((store) => store.shutdownWorker("w1"));
    // The shutdown came first: the task is back in the pool, released, and the worker inactive, not dead.
    expect(outcome).toEqual({ status: "fulfilled", value: [task.id] });
    expect(swept).toMatchObject({ status: "fulfilled", value: { deadWorkers: [], requeued: [] } });
    expect(await handle.store.get(task.id)).toMatchObject({ status: "pending", workerId: null });
  });

  it("so does one naming its run, which the registry still has as the worker's current one", async () => {
    const { task, outcome, swept } = await declaredDeadAsItActs((store) => store.shutdownWorker("w1", "run-1"));
    expect(outcome).toEqual({ status: "fulfilled", value: [task.id] });
    expect(swept).toMatchObject({ status: "fulfilled", value: { deadWorkers: [], requeued: [] } });
    expect(await handle.store.get(task.id)).toMatchObject({ status: "pending", workerId: null });
  });

  it("a shutdown naming its run that waits on its worker's row for a beat of another run decides by that run: it changes nothing", async () => {
    // Decided on the row as the snapshot showed it, the late shutdown released the new run's task.
    handle = await createPostgres();
    const acting = await handle.another({ poolSize: 1 });
    await handle.store.workerHeartbeat({ workerId: "w1", runId: "run-1", roles: ["crawl"] });
    await handle.store.enqueue({ taskType: "crawl", params: {} });
    const [task] = await handle.store.claim({ workerId: "w1", taskTypes: ["crawl"] });
    holder = new pg.Client({ connectionString: PG_URL });
    watcher = new pg.Client({ connectionString: PG_URL });
    await Promise.all([holder.connect(), watcher.connect()]);
    // run-2's first beat, committing as run-1's shutdown arrives.
    await holder.query("BEGIN");
    await holder.query(`UPDATE "${handle.schema}".workers SET run_id = 'run-2' WHERE worker_id = 'w1'`);
    const shutdown = acting.shutdownWorker("w1", "run-1");
    await waitingOnLocks(1);
    await holder.query("COMMIT");
    expect(await shutdown).toEqual([]);
    expect(await handle.store.get(task.id)).toMatchObject({ status: "claimed", workerId: "w1", leaseToken: task.leaseToken });
    expect((await handle.store.listWorkers()).workers[0]).toMatchObject({ status: "active" });
  });
});
