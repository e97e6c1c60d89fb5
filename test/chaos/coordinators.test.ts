import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { COORDINATOR_LEADERSHIP } from "../../src/coordinator/coordinator.js";
import { eventually } from "../helpers/logs.js";
import { createPostgres, createSqlite, PG_URL, type TestStore } from "../helpers/stores.js";
import { ChaosCluster } from "./cluster.js";
import { CHAOS_COORDINATION, report, scale } from "./settings.js";

/**
 * Scenario 5, coordinators: three coordinator processes race for leadership while workers are
 * killed; the leader is SIGKILLed again and again. A standby must lead within the lease (three
 * sweep intervals, see coordinator.ts) plus two sweep intervals, and no task may be recovered twice:
 * a second recovery of one claim is an illegal transition for the checker, and the recoveries the
 * coordinators reported can never outnumber those in the trail. On PostgreSQL the leader is also
 * killed in the middle of a sweep transaction: its half-done sweep must leave no trace.
 */
const SWEEP_MS = CHAOS_COORDINATION.sweepIntervalMs as number;
const LEASE_MS = 3 * SWEEP_MS;
/** Process start-up and a loaded 2-core machine add latency that has nothing to do with the design. */
const SLACK_MS = 1500;
const LEADER_KILLS = scale("CHAOS_LEADER_KILLS", 3);

const reported = (lines: Record<string, unknown>[]) =>
  lines.filter((l) => l.event === "sweep").reduce((n, l) => n + (l.requeued as number[]).length + (l.failed as number[]).length, 0);

describe.each([
  ["postgres", createPostgres],
  ["sqlite", createSqlite],
] as const)("coordinators on %s", (name, create) => {
  let handle: TestStore;
  let cluster: ChaosCluster;
  afterEach(async () => {
    await cluster?.close();
    await handle?.cleanup();
  });

  /**
   * A fresh cluster: a worker (the victim) running four tasks of `steps` × 50 ms, and coordinator
   * "first" leading. The tasks carry no step time of their own, so that a worker started later with
   * STEP_MS=1 finishes them at once.
   */
  async function victimRunningUnderLeader(steps: number) {
    handle = await create();
    cluster = await ChaosCluster.open(handle);
    await cluster.enqueueSteps(4, { steps });
    // Started together: the tasks must still be running once the leader leads, and a coordinator's
    // start (up to 4 s on a loaded machine) after the victim's took a good part of their time.
    const [victim] = await Promise.all([cluster.startWorker({ CONCURRENCY: "4", STEP_MS: "50" }), cluster.startCoordinator("first")]);
    const held = await eventually(async () => {
      const tasks = (await cluster.pool.list({ workerId: victim.id, status: "running" })).tasks;
      return tasks.length === 4 ? tasks : null;
    }, 20_000, "the victim to run all four tasks");
    await eventually(async () => (await cluster.pool.protocol.leadershipStatus(COORDINATOR_LEADERSHIP)).holder === "first", 10_000, "first to lead");
    return { victim, held };
  }

  it(`three racing coordinators, the leader SIGKILLed ${LEADER_KILLS} times: leadership moves in time, no task recovered twice`, { timeout: 60_000 + LEADER_KILLS * 10_000 }, async () => {
    handle = await create();
    cluster = await ChaosCluster.open(handle);
    await cluster.enqueueSteps(200, { steps: 4, stepMs: 50 });
    await Promise.all([0, 1, 2].map(() => cluster.startWorker({ CONCURRENCY: "6" })));
    let next = 1;
    await Promise.all([0, 1, 2].map(() => cluster.startCoordinator(`c${next++}`)));
    const status = () => cluster.pool.protocol.leadershipStatus(COORDINATOR_LEADERSHIP);

    const takeovers: number[] = [];
    for (let round = 0; round < LEADER_KILLS; round++) {
      // A worker dies too, so the sweeps have tasks to recover while leadership changes hands.
      const live = cluster.live();
      await cluster.kill(live[Math.floor(Math.random() * live.length)].id);
      const replacement = cluster.startWorker({ CONCURRENCY: "6" });
      const leader = (await eventually(async () => (await status()).holder, 10_000, "a leader")) as string;
      await cluster.kill(leader);
      const killedAt = Date.now();
      const successor = await eventually(async () => {
        const s = await status();
        return s.holder !== null && s.holder !== leader ? s.holder : null;
      }, 10_000, `a standby to take over from ${leader}`);
      takeovers.push(Date.now() - killedAt);
      expect(cluster.coordinators.has(successor)).toBe(true);
      await Promise.all([replacement, cluster.startCoordinator(`c${next++}`)]);
    }

    await cluster.drained(60_000);
    const summary = await cluster.check();
    const claimed = [...cluster.coordinators.values()].reduce((n, c) => n + reported(c.lines), 0);
    report(`coordinators on ${name}`, { leaderKills: LEADER_KILLS, takeoverMs: takeovers, reportedRecoveries: claimed, ...summary });
    expect(summary.violations.slice(0, 20)).toEqual([]);
    expect(summary.completed).toBe(200);
    expect(claimed).toBeLessThanOrEqual(summary.recoveries);
    for (const ms of takeovers) expect(ms).toBeLessThanOrEqual(LEASE_MS + 2 * SWEEP_MS + SLACK_MS);
    expect(cluster.crashed()).toEqual([]);
  });

  it.runIf(name === "postgres")("a leader killed inside its sweep transaction: rolled back, its successor recovers each task once", { timeout: 60_000 }, async () => {
    const { victim, held } = await victimRunningUnderLeader(60);

    // Lock the victim's tasks, so the leader's sweep stops inside its transaction, at the recovery
    // statement: the worker is already marked dead there, uncommitted.
    const locker = new pg.Client({ connectionString: PG_URL, application_name: "chaos-locker" });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query(`SELECT id FROM "${handle.schema}".tasks WHERE worker_id = $1 FOR UPDATE`, [victim.id]);
      victim.child.kill("SIGSTOP");
      const lockerPid = (await locker.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0].pid;
      const observer = new pg.Client({ connectionString: PG_URL, application_name: "chaos-observer" });
      await observer.connect();
      try {
        await eventually(async () => {
          const { rows } = await observer.query(`SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, [lockerPid]);
          return rows.length > 0;
        }, 15_000, "the leader's sweep to wait on the locked tasks");
      } finally {
        await observer.end();
      }
      await cluster.kill("first");
      // The worker that finishes the tasks has nothing to claim before their recovery: it starts beside the successor.
      await Promise.all([cluster.startCoordinator("second"), cluster.startWorker({ CONCURRENCY: "4", STEP_MS: "1" })]);
    } finally {
      await locker.query("ROLLBACK").catch(() => {});
      await locker.end();
    }
    await cluster.kill(victim.id);
    await cluster.drained(30_000);

    const summary = await cluster.check();
    expect(summary.violations).toEqual([]);
    for (const t of held) {
      const events = await cluster.pool.events(t.id);
      expect(events.filter((e) => e.event === "requeued")).toHaveLength(1);
      expect(events.filter((e) => e.event === "completed")).toHaveLength(1);
    }
    // Eventually: thawed for a moment by its kill (SIGCONT, then SIGKILL), the victim can send one more
    // beat, a sign of life after it was declared dead, which shows it active until the next sweep.
    await eventually(async () => (await cluster.pool.workers()).workers.find((w) => w.workerId === victim.id)?.status === "dead", 10_000, "the victim declared dead");
    expect(reported(cluster.coordinators.get("first")!.lines)).toBe(0);
  });

  it.runIf(name === "postgres")("a leader frozen (SIGSTOP) inside its sweep transaction does not stop its successor recovering other dead workers; thawed, it recovers nothing", { timeout: 90_000 }, async () => {
    const { victim, held } = await victimRunningUnderLeader(300);

    // Hold the victim's tasks so that the leader's sweep waits inside its transaction (the victim
    // marked dead, uncommitted), freeze the leader there, then let its statement finish: the
    // transaction is left open, holding the victim's row and tasks, by a process that sends nothing.
    const locker = new pg.Client({ connectionString: PG_URL, application_name: "chaos-locker" });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query(`SELECT id FROM "${handle.schema}".tasks WHERE worker_id = $1 FOR UPDATE`, [victim.id]);
      victim.child.kill("SIGSTOP");
      const lockerPid = (await locker.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0].pid;
      await eventually(async () => (await locker.query(`SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, [lockerPid])).rows.length > 0, 15_000, "the leader's sweep to wait on the locked tasks");
      cluster.coordinators.get("first")!.child.kill("SIGSTOP");
    } finally {
      await locker.query("ROLLBACK").catch(() => {});
      await locker.end();
    }
    await cluster.kill(victim.id);

    // Another worker dies while the leader is frozen: its successor must recover its tasks.
    await cluster.enqueueSteps(2, { steps: 300 });
    const second = await cluster.startWorker({ CONCURRENCY: "2", STEP_MS: "50" });
    const secondHeld = await eventually(async () => {
      const tasks = (await cluster.pool.list({ workerId: second.id, status: "running" })).tasks;
      return tasks.length === 2 ? tasks : null;
    }, 20_000, "the second worker to run its two tasks");
    await cluster.startCoordinator("second");
    await cluster.kill(second.id);
    const recovered = async (ids: number[]) => {
      for (const id of ids) if (!(await cluster.pool.events(id)).some((e) => e.event === "requeued")) return false;
      return true;
    };
    await eventually(() => recovered([...held, ...secondHeld].map((t) => t.id)), 45_000, "the successor to recover both dead workers' tasks while the old leader is frozen");
    expect(cluster.coordinators.get("first")!.child.exitCode).toBe(null);

    // Thawed, the old leader finds its transaction gone: it recovered nothing, and stands by.
    cluster.coordinators.get("first")!.child.kill("SIGCONT");
    await cluster.startWorker({ CONCURRENCY: "6", STEP_MS: "1" });
    await cluster.drained(60_000);
    const summary = await cluster.check();
    expect(summary.violations).toEqual([]);
    for (const t of [...held, ...secondHeld]) {
      const events = await cluster.pool.events(t.id);
      expect(events.filter((e) => e.event === "requeued")).toHaveLength(1);
      expect(events.filter((e) => e.event === "completed")).toHaveLength(1);
    }
    expect(reported(cluster.coordinators.get("first")!.lines)).toBe(0);
    expect(cluster.crashed()).toEqual([]);
  });
});
