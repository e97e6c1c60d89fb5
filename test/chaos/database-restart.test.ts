import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FastifyInstance } from "fastify";
import { connect, type Taskpool } from "../../src/api/taskpool.js";
import { COORDINATOR_LEADERSHIP } from "../../src/coordinator/coordinator.js";
import { buildServer } from "../../src/server/server.js";
import { eventually } from "../helpers/logs.js";
import { ChaosCluster } from "./cluster.js";
import { PrivatePostgres } from "./private-postgres.js";
import { report } from "./settings.js";

/**
 * Scenario 3, on a PostgreSQL server of the test's own: while workers and a coordinator (all real
 * processes, one of them reaching the database through a taskpool HTTP server started here) drain
 * the pool, the server is restarted (`pg_ctl restart -m fast`) and, later, every connection is
 * killed with pg_terminate_backend. Nobody is told; each process must reconnect by itself. Nothing
 * may be lost or done twice (the checker), no process may exit, the coordinator must be sweeping
 * again at the end, and the HTTP server must answer and carry its worker's completions after each cut.
 */
describe.runIf(PrivatePostgres.available())("a PostgreSQL restart and killed connections", () => {
  let server: PrivatePostgres;
  let cluster: ChaosCluster | null = null;
  let app: FastifyInstance | null = null;
  let serverPool: Taskpool | null = null;
  beforeAll(async () => {
    server = await PrivatePostgres.start();
  }, 60_000);
  afterAll(async () => {
    await cluster?.close();
    await app?.close();
    await serverPool?.close();
    await server?.stop();
  }, 60_000);

  it("workers, coordinator and HTTP server reconnect on their own: nothing lost or duplicated, no process exits", { timeout: 120_000 }, async () => {
    const schema = "chaos";
    await (await connect(server.url, { schema })).close(); // migrates
    cluster = await ChaosCluster.open({ url: server.url, schema });
    const TASKS = 800;
    await cluster.enqueueSteps(TASKS, { steps: 4, stepMs: 50 });
    const HTTP_ONLY = Array.from({ length: 6 }, () => ({ taskType: "http_step", params: { steps: 1, stepMs: 50 }, maxAttempts: 50 }));
    // The HTTP server holds its own pool on the database, as `taskpool serve` does.
    serverPool = await connect(server.url, { schema, migrate: false });
    app = await buildServer(serverPool, { auth: "none", rateLimitPerMinute: false, dashboard: false, longPollRecheckMs: 100 });
    const httpUrl = await app.listen({ host: "127.0.0.1", port: 0 });
    await Promise.all([0, 1, 2].map(() => cluster!.startWorker({ CONCURRENCY: "6" })));
    await cluster.startWorker({ CONCURRENCY: "6", TASKPOOL_URL: httpUrl, TASKPOOL_SCHEMA: "", WORKER_ROLE: "step,http_step" }, "http-worker");
    // Completions the server accepted from its worker since `since` (by the trail's clock, this machine's).
    const httpCompletions = async (since: number) => {
      const { tasks } = await cluster!.pool.list({ status: "completed" }, { limit: 1000 });
      return tasks.filter((t) => t.workerId === "http-worker" && (t.completedAt?.getTime() ?? 0) > since).length;
    };
    // A wait on the HTTP worker that times out says what the worker logged (its warnings and errors).
    const httpWorkerWait = (wait: Promise<unknown>) =>
      wait.catch((error: Error) => {
        throw new Error(`${error.message}\nhttp-worker's log (last 4,000 characters):\n${cluster!.runtimeLog("http-worker").slice(-4000)}`);
      });
    await cluster.startCoordinator("coordinator");
    const completed = async () => (await cluster!.pool.counts()).byStatus.completed ?? 0;
    // "Work resumed": a fifth of what was left when the fault hit got done (a share of what is left,
    // not of the whole run, so a slow restart that lets most tasks finish first cannot outrun it).
    const resumed = (from: number) => async () => (await completed().catch(() => 0)) >= from + Math.ceil((TASKS - from) * 0.2);

    await eventually(async () => (await completed()) >= TASKS * 0.15, 30_000, "work under way");
    const restartedAt = Date.now();
    server.restart();
    const restartMs = Date.now() - restartedAt;
    // The pool of the test itself lost its connections too; it must recover like everyone else.
    const afterRestart = await eventually(() => completed().catch(() => 0), 30_000, "reads after the restart");
    await eventually(resumed(afterRestart), 30_000, "work to resume after the restart");
    // Work only the HTTP worker takes: on a loaded machine the others can have drained the pool by now.
    await cluster.pool.enqueueMany(HTTP_ONLY);
    await httpWorkerWait(eventually(async () => (await httpCompletions(restartedAt + restartMs).catch(() => 0)) > 0, 30_000, "the HTTP worker to complete tasks through the server after the restart"));
    const terminatedAt = Date.now();
    const beforeTerminate = await completed();
    const terminated = [await server.terminateConnections()];
    await eventually(resumed(beforeTerminate), 30_000, "work to resume after pg_terminate_backend");
    await cluster.pool.enqueueMany(HTTP_ONLY);
    await httpWorkerWait(eventually(async () => (await httpCompletions(terminatedAt).catch(() => 0)) > 0, 30_000, "the HTTP worker to complete tasks through the server after pg_terminate_backend"));
    terminated.push(await server.terminateConnections());

    await eventually(() => cluster!.drained(1000).then(() => true, () => false), 60_000, "every task to end");
    const leadership = await cluster.pool.protocol.leadershipStatus(COORDINATOR_LEADERSHIP);
    const crashed = cluster.crashed();
    const logs = crashed.map((c) => `${c.id} (exit ${c.code}):\n${cluster!.runtimeLog(c.id)}`).join("\n");
    expect(crashed, logs).toEqual([]);
    expect(leadership.holder).toBe("coordinator");
    expect(leadership.secondsSinceSweep).toBeLessThanOrEqual(2);
    const ready = await fetch(`${httpUrl}/readyz`);
    expect(ready.status).toBe(200);

    const summary = await cluster.check();
    report("database restart and pg_terminate_backend", { restartMs, terminated, ...summary });
    expect(summary.violations.slice(0, 20)).toEqual([]);
    expect(summary.completed).toBe(TASKS + 2 * HTTP_ONLY.length);
    expect(terminated.every((n) => n > 0)).toBe(true);
  });
});
