import type { System, SystemName } from "./system.js";

/** Loads one system's adapter, and with it only that system's library. */
export async function loadSystem(name: SystemName): Promise<System> {
  switch (name) {
    case "taskpool-postgres":
      return (await import("./taskpool.js")).taskpoolPostgres;
    case "taskpool-sqlite":
      return (await import("./taskpool.js")).taskpoolSqlite;
    case "graphile-worker":
      return (await import("./graphile-worker.js")).graphileWorker;
    case "graphile-worker-batched":
      return (await import("./graphile-worker.js")).graphileWorkerBatched;
    case "pg-boss":
      return (await import("./pg-boss.js")).pgBoss;
    case "bullmq":
      return (await import("./bullmq.js")).bullmq;
  }
}
