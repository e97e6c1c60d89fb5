/**
 * The store contract over HTTP: every call a client makes goes through a real server on a random
 * port (`connect("http://…")`'s HttpStore → Fastify → CheckedStore → the database), on both
 * databases. The calls that belong to the coordinator and to key management are not offered over
 * HTTP (they run next to the database); the contract's uses of them go to the server's own store,
 * as the coordinator running beside the server would.
 */
import { describe } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { Taskpool } from "../../src/api/taskpool.js";
import { HttpStore } from "../../src/client/http-store.js";
import { buildServer } from "../../src/server/server.js";
import type { Store } from "../../src/store/store.js";
import { postgresKind, sqliteKind, type StoreKind, type TestStore } from "../helpers/stores.js";
import { type ContractPart, storeContract } from "./store-contract.js";

const BESIDE_THE_DATABASE = new Set(["sweep", "nextRecoveryIn", "tryLead", "resign", "recordSweep", "leadershipStatus", "reserve", "createApiKey", "listApiKeys", "findApiKey", "revokeApiKey", "fireDueSchedules", "generateTasks"]);

/** An HttpStore to the server, with the coordinator's and key calls going to the database beside it. */
function overHttp(http: HttpStore, direct: Store): Store {
  return new Proxy(http, {
    get(target, name, receiver) {
      if (typeof name === "string" && BESIDE_THE_DATABASE.has(name)) return (direct as unknown as Record<string, (...args: unknown[]) => unknown>)[name].bind(direct);
      return Reflect.get(target, name, receiver);
    },
  });
}

function httpKind(base: StoreKind): StoreKind {
  return {
    name: base.name,
    async create(options) {
      const handle: TestStore = await base.create(options);
      const app = await buildServer(new Taskpool(new CheckedStore(handle.store), null), { auth: "none", rateLimitPerMinute: false, longPollRecheckMs: 50, dashboard: false });
      const url = await app.listen({ host: "127.0.0.1", port: 0 });
      const clients: HttpStore[] = [];
      const open = async () => {
        const client = new HttpStore(url, { retryForMs: 0 });
        await client.migrate();
        clients.push(client);
        return overHttp(client, handle.store);
      };
      const store = await open();
      return {
        store,
        url,
        another: open,
        execute: (statement) => handle.execute(statement),
        async cleanup() {
          await Promise.all(clients.map((c) => c.close()));
          await app.close();
          await handle.cleanup();
        },
      };
    },
  };
}

/**
 * What a client calls, and the dead letter's groups (their record's dates and arrays across the
 * wire). Left out: the monitoring views, throughput and API keys (reads the server
 * passes through, or calls made beside the database) and the hostile-input part (the same checks
 * run in the client before a request leaves; test/server/ covers the server's own refusals).
 */
const CLIENT_PARTS: ContractPart[] = ["enqueue", "idempotency", "claim", "lifecycle", "fencing", "batch", "queries", "workers", "registry", "taskTypes", "schedules", "failures"];

describe("over HTTP, PostgreSQL", () => storeContract(httpKind(postgresKind), CLIENT_PARTS));
describe("over HTTP, SQLite", () => storeContract(httpKind(sqliteKind), CLIENT_PARTS));
