/** The heartbeat interval a server tells HTTP workers (`next_heartbeat_in`) fits its coordinator's stale_after and dead_after. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { Taskpool } from "../../src/api/taskpool.js";
import { HttpStore } from "../../src/client/http-store.js";
import { buildServer, type ServerOptions } from "../../src/server/server.js";
import { Worker } from "../../src/worker/worker.js";
import { captureLogs, eventually } from "../helpers/logs.js";
import { sqliteKind, type TestStore, withOverrides } from "../helpers/stores.js";
import { request } from "./harness.js";

describe("next_heartbeat_in", () => {
  let handle: TestStore;
  let pool: Taskpool;
  beforeEach(async () => {
    handle = await sqliteKind.create();
    pool = new Taskpool(new CheckedStore(handle.store), null);
  });
  afterEach(async () => {
    await pool.close();
    await handle.cleanup();
  });

  /** What a server made with `options` answers a worker's heartbeat with; one server after another on the same pool. */
  async function advertised(options: ServerOptions): Promise<number> {
    const app = await buildServer(pool, { auth: "none", ...options });
    try {
      const url = await app.listen({ host: "127.0.0.1", port: 0 });
      const beat = await request(url, "POST", "/api/workers/heartbeat", { worker_id: "w1", roles: ["crawl"] }, null);
      expect(beat.status).toBe(200);
      return beat.body.next_heartbeat_in;
    } finally {
      await app.close();
    }
  }

  it("is half of stale_after, at most 30 s: a worker following it beats twice before it would turn stale", async () => {
    expect(await advertised({})).toBe(30);
    expect(await advertised({ coordinator: { staleAfterMs: 10_000, deadAfterMs: 20_000 } })).toBe(5);
    expect(await advertised({ coordinator: { staleAfterMs: 1500, deadAfterMs: 3000 } })).toBe(0.75);
    expect(await advertised({ coordinator: { staleAfterMs: 300_000, deadAfterMs: 600_000 } })).toBe(30);
    // Set, it is kept when it fits.
    expect(await advertised({ heartbeatIntervalSeconds: 5, coordinator: { staleAfterMs: 10_000, deadAfterMs: 20_000 } })).toBe(5);
    expect(await advertised({ heartbeatIntervalSeconds: 90, coordinator: { staleAfterMs: 300_000, deadAfterMs: 600_000 } })).toBe(90);
  });

  // At the worker's default 30 s, a server run with --stale-after 2000 --dead-after 4000 declared it dead
  // between every two beats, and took its tasks back.
  it("a TypeScript worker over HTTP beats as often as the server asks, unless told an interval, and then says what follows", async () => {
    const app = await buildServer(pool, { auth: "none", coordinator: { staleAfterMs: 2000, deadAfterMs: 4000 } });
    const workers: Worker[] = [];
    try {
      const url = await app.listen({ host: "127.0.0.1", port: 0 });
      const beats = new Map<string, number>();
      const counted = (workerId: string) => {
        const http = new HttpStore(url);
        return withOverrides(http, { workerHeartbeat: (beat) => (beats.set(workerId, (beats.get(workerId) ?? 0) + 1), http.workerHeartbeat(beat)) });
      };
      const following = captureLogs();
      const told = captureLogs();
      const common = { roles: ["crawl"], handlers: { crawl: async () => {} }, heartbeatThread: false, handleSignals: false };
      workers.push(new Worker(counted("following"), { ...common, workerId: "following", logger: following.logger }));
      workers.push(new Worker(counted("told"), { ...common, workerId: "told", heartbeatIntervalMs: 30_000, logger: told.logger }));
      await Promise.all(workers.map((w) => w.start()));
      // A beat a second: the registration, the first beat, then one a second.
      await eventually(() => (beats.get("following") ?? 0) >= 4, 10_000, "beats every second");
      expect(beats.get("told")).toBeLessThanOrEqual(2);
      expect(following.messages()).toContain("Heartbeats every 1 s, as the server asks (its coordinator's stale_after is 2 s)");
      expect(told.messages()).toContain(
        "Heartbeats every 30 s, but the server asks for one every 1 s: its coordinator marks this worker stale between beats, and may declare it dead and take its tasks back. " +
          "Set heartbeatIntervalMs (--heartbeat-interval, HEARTBEAT_INTERVAL_MS) to 1000 or less, or leave it out to follow the server",
      );
    } finally {
      await Promise.all(workers.map((w) => w.stop(0)));
      await app.close();
    }
  });

  it("set longer than half of stale_after, the server is refused, saying what to change", async () => {
    await expect(buildServer(pool, { heartbeatIntervalSeconds: 30, coordinator: { staleAfterMs: 20_000, deadAfterMs: 25_000 } })).rejects.toThrow(
      "Invalid server options: heartbeatIntervalSeconds (30) must let a worker beat twice within coordinator.staleAfterMs (20000), or every HTTP worker following it turns stale between two beats " +
        "(dead past deadAfterMs, 25000, and its tasks taken back): set heartbeatIntervalSeconds to 10 or less, raise staleAfterMs to 60000 or more, or leave heartbeatIntervalSeconds out to have it follow staleAfterMs",
    );
    await expect(buildServer(pool, { heartbeatIntervalSeconds: 0 })).rejects.toThrow("Invalid server option heartbeatIntervalSeconds: 0 (must be a positive number of seconds)");
    // A coordinator's own refusal comes first, as the coordinator would give it.
    await expect(buildServer(pool, { coordinator: { staleAfterMs: 20_000, deadAfterMs: 10_000 } })).rejects.toThrow(/^Invalid coordinator options: deadAfterMs \(10000\) must not be shorter than staleAfterMs/);
  });
});
