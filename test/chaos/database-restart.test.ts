import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect } from "../../src/api/taskpool.js";
import { COORDINATOR_LEADERSHIP } from "../../src/coordinator/coordinator.js";
import { eventually } from "../helpers/logs.js";
import { ChaosCluster } from "./cluster.js";
import { PrivatePostgres } from "./private-postgres.js";
import { report } from "./settings.js";

/**
 * Scenario 3, on a PostgreSQL server of the test's own: while workers and a coordinator (all real
 * processes) drain the pool, the server is restarted (`pg_ctl restart -m fast`) and, later, every
 * connection is killed with pg_terminate_backend. Nobody is told; each process must reconnect by
 * itself. Nothing may be lost or done twice (the checker), no process may exit, and the coordinator
 * must be sweeping again at the end.
 */
describe.runIf(PrivatePostgres.available())("a PostgreSQL restart and killed connections", () => {
  let server: PrivatePostgres;
  let cluster: ChaosCluster | null = null;
  beforeAll(async () => {
    server = await PrivatePostgres.start();
  }, 60_000);
  afterAll(async () => {
    await cluster?.close();
    await server?.stop();
  }, 60_000);

  it("workers and coordinator reconnect on their own: nothing lost or duplicated, no process exits", { timeout: 120_000 }, async () => {
    const schema = "chaos";
    await (await connect(server.url, { schema })).close(); // migrates
    cluster = await ChaosCluster.open({ url: server.url, schema });
    const TASKS = 400;
    await cluster.enqueueSteps(TASKS, { steps: 4, stepMs: 50 });
    await Promise.all([0, 1, 2].map(() => cluster!.startWorker({ CONCURRENCY: "6" })));
    await cluster.startCoordinator("coordinator");
    const completed = async () => (await cluster!.pool.counts()).byStatus.completed ?? 0;

    await eventually(async () => (await completed()) >= TASKS * 0.15, 30_000, "work under way");
    const restartedAt = Date.now();
    server.restart();
    const restartMs = Date.now() - restartedAt;
    // The pool of the test itself lost its connections too; it must recover like everyone else.
    const afterRestart = await eventually(() => completed().catch(() => 0), 30_000, "reads after the restart");
    await eventually(async () => (await completed()) >= afterRestart + TASKS * 0.15, 30_000, "work to resume after the restart");
    const terminated = [await server.terminateConnections()];
    await eventually(async () => (await completed().catch(() => 0)) >= afterRestart + TASKS * 0.3, 30_000, "work to resume after pg_terminate_backend");
    terminated.push(await server.terminateConnections());

    await eventually(() => cluster!.drained(1000).then(() => true, () => false), 60_000, "every task to end");
    const leadership = await cluster.pool.protocol.leadershipStatus(COORDINATOR_LEADERSHIP);
    const crashed = cluster.crashed();
    const logs = crashed.map((c) => `${c.id} (exit ${c.code}):\n${cluster!.runtimeLog(c.id)}`).join("\n");
    expect(crashed, logs).toEqual([]);
    expect(leadership.holder).toBe("coordinator");
    expect(leadership.secondsSinceSweep).toBeLessThanOrEqual(2);

    const summary = await cluster.check();
    report("database restart and pg_terminate_backend", { restartMs, terminated, ...summary });
    expect(summary.violations.slice(0, 20)).toEqual([]);
    expect(summary.completed).toBe(TASKS);
    expect(terminated.every((n) => n > 0)).toBe(true);
  });
});
