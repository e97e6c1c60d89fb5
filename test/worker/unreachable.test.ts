import { expect, it } from "vitest";
import { HttpStore } from "../../src/client/http-store.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { Worker } from "../../src/worker/worker.js";
import { captureLogs, eventually } from "../helpers/logs.js";

it("a worker whose database is unreachable logs, backs off, keeps running and stops cleanly", async () => {
  const store = new PostgresStore({ url: "postgres://postgres@127.0.0.1:1/none", poolSize: 1 });
  const logs = captureLogs();
  const worker = new Worker(store, {
    roles: ["x"],
    handlers: { x: async () => {} },
    pollIntervalMs: 50,
    heartbeatIntervalMs: 50,
    handleSignals: false,
    heartbeatThread: false,
    logger: logs.logger,
  });
  await worker.start();
  await eventually(() => logs.messages().filter((m) => m.startsWith("Claim failed; not claiming for")).length >= 2, 10_000, "two claim failures");
  const messages = logs.messages();
  expect(messages).toContain("Cannot reach the database to register; will keep trying");
  expect(messages).toContain("Heartbeat failed; retrying at the next interval");
  const delays = messages.filter((m) => m.startsWith("Claim failed")).map((m) => Number(/for (\d+) ms/.exec(m)?.[1]));
  expect(delays[1]).toBeGreaterThan(delays[0]);
  await worker.stop(0);
  await store.close();
});

it("over HTTP, its log lines name the taskpool server it cannot reach, not a database", async () => {
  const store = new HttpStore("http://127.0.0.1:1", { retryForMs: 0 });
  const logs = captureLogs();
  const worker = new Worker(store, { roles: ["x"], handlers: { x: async () => {} }, pollIntervalMs: 50, heartbeatIntervalMs: 50, handleSignals: false, heartbeatThread: false, logger: logs.logger });
  await worker.start();
  await eventually(() => logs.messages().some((m) => m.startsWith("Claim failed; not claiming for")), 10_000, "a claim failure");
  expect(logs.messages()).toContain("Cannot reach the taskpool server to register; will keep trying");
  await worker.stop(0);
  await store.close();
});
