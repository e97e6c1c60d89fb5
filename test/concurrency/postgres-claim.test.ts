import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { BeatBatcher, ClaimBatcher } from "../../src/api/write-batcher.js";
import type { ClaimedTask } from "../../src/core/task.js";
import type { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { createPostgres, type TestStore } from "../helpers/stores.js";
import { claimedOnceEach } from "./audit.js";

describe("PostgreSQL claims under real concurrency", () => {
  let handle: TestStore<PostgresStore>;
  let claimers: PostgresStore[];
  beforeEach(async () => {
    handle = await createPostgres();
    // Each claimer is its own pool of one connection: 16 sessions racing in the database.
    claimers = await Promise.all(Array.from({ length: 16 }, () => handle.another({ poolSize: 1 })));
  });
  afterEach(() => handle.cleanup());

  it("16 claimers drain 5,000 tasks: each claimed exactly once, none left behind", async () => {
    await handle.store.enqueueMany(Array.from({ length: 5000 }, (_, i) => ({ taskType: "drain", params: { i } })));
    const seen = await Promise.all(
      claimers.map(async (store, n) => {
        const mine: number[] = [];
        for (;;) {
          // Half claim one at a time, half in batches: both paths race each other.
          const batch = await store.claim({ workerId: `claimer-${n}`, limit: n % 2 === 0 ? 1 : 7 });
          if (batch.length === 0) return mine;
          for (const task of batch) {
            mine.push(task.id);
            await store.complete(task.id, task);
          }
        }
      }),
    );
    const all = seen.flat();
    expect(all).toHaveLength(5000);
    expect(new Set(all).size).toBe(5000);
    expect(seen.filter((ids) => ids.length > 0).length).toBeGreaterThan(8);
    const counts = await handle.store.counts();
    expect(counts.byStatus).toMatchObject({ pending: 0, claimed: 0, running: 0, completed: 5000 });
    await claimedOnceEach(handle.store, 5000);
  });

  it("batched claims (4 servers' ClaimBatchers, 8 concurrent callers each) drain 2,000 tasks, each once, in shared statements", async () => {
    await handle.store.enqueueMany(Array.from({ length: 2000 }, (_, i) => ({ taskType: "drain", params: { i } })));
    let statements = 0;
    let claims = 0;
    const seen = await Promise.all(
      claimers.slice(0, 4).map(async (store, s) => {
        const claimMany = store.claimMany.bind(store);
        store.claimMany = (items) => (statements++, claimMany(items));
        const batcher = new ClaimBatcher(new CheckedStore(store));
        const callers = Array.from({ length: 8 }, async (_, c) => {
          const mine: number[] = [];
          for (;;) {
            claims++;
            const [task] = await batcher.claim({ workerId: `server-${s}-caller-${c}`, taskTypes: ["drain"] });
            if (!task) return mine;
            expect(task.workerId).toBe(`server-${s}-caller-${c}`);
            mine.push(task.id);
            await store.complete(task.id, task);
          }
        });
        return (await Promise.all(callers)).flat();
      }),
    );
    const all = seen.flat();
    expect(all).toHaveLength(2000);
    expect(new Set(all).size).toBe(2000);
    expect(statements).toBeLessThan(claims / 2);
    await claimedOnceEach(handle.store, 2000);
  });

  it("batched worker heartbeats: 48 workers beating at once each renew only their own leases, in shared statements", async () => {
    const workers = Array.from({ length: 48 }, (_, i) => `beater-${i}`);
    await handle.store.enqueueMany(workers.map((w) => ({ taskType: "beat", params: { w } })));
    const held = await Promise.all(workers.map(async (workerId) => (await handle.store.claim({ workerId, leaseSeconds: 30 }))[0]));
    const store = claimers[0];
    let statements = 0;
    const many = store.workerHeartbeatMany.bind(store);
    store.workerHeartbeatMany = (beats) => (statements++, many(beats));
    const batcher = new BeatBatcher(new CheckedStore(store));
    // Each worker also names its neighbour's task with the neighbour's own token: a lease it does not hold, so lost for it.
    const results = await Promise.all(
      workers.map((workerId, i) => {
        const other = held[(i + 1) % workers.length];
        const leases = [{ taskId: held[i].id, leaseToken: held[i].leaseToken }, { taskId: other.id, leaseToken: other.leaseToken }];
        return batcher.beat({ workerId, roles: ["beat"], capacity: 1, currentLoad: 1, tasksProcessed: i, leases });
      }),
    );
    results.forEach((result, i) => expect(result.lost).toEqual([held[(i + 1) % workers.length].id]));
    expect(statements).toBeLessThan(workers.length / 2);
    const registry = (await handle.store.listWorkers()).workers;
    expect(registry.filter((w) => w.workerId.startsWith("beater-") && w.status === "active")).toHaveLength(48);
    for (const [i, task] of held.entries()) {
      const now = await handle.store.get(task.id);
      expect(now?.workerId).toBe(workers[i]);
      expect(now!.leaseExpiresAt!.getTime()).toBeGreaterThan(task.leaseExpiresAt!.getTime());
    }
  });

  it("10 claimers race for 5 tasks: exactly 5 win", async () => {
    await handle.store.enqueueMany(Array.from({ length: 5 }, () => ({ taskType: "race" })));
    const results = await Promise.all(claimers.slice(0, 10).map((s, n) => s.claim({ workerId: `racer-${n}` })));
    const winners = results.filter((r) => r.length === 1);
    expect(winners).toHaveLength(5);
    expect(results.filter((r) => r.length === 0)).toHaveLength(5);
    expect(new Set(winners.map((r) => r[0].id)).size).toBe(5);
  });

  it("never runs two tasks of one concurrency key at once, even when claims race", async () => {
    const keys = ["store:1", "store:2", "store:3", "store:4"];
    await handle.store.enqueueMany(Array.from({ length: 200 }, (_, i) => ({ taskType: "crawl", concurrencyKey: keys[i % 4] })));
    const active = new Map<string, number>();
    let overlap = 0;
    let done = 0;
    await Promise.all(
      claimers.map(async (store, n) => {
        let idle = 0;
        while (idle < 20) {
          const [task] = (await store.claim({ workerId: `c${n}`, limit: 1 })) as (ClaimedTask | undefined)[];
          if (!task) {
            idle++;
            await new Promise((r) => setTimeout(r, 5));
            continue;
          }
          idle = 0;
          const key = task.concurrencyKey as string;
          active.set(key, (active.get(key) ?? 0) + 1);
          if (active.get(key)! > 1) overlap++;
          await new Promise((r) => setTimeout(r, 1));
          // Leave the key before completing: the database holds it until the completion commits.
          active.set(key, active.get(key)! - 1);
          await store.complete(task.id, task);
          done++;
        }
      }),
    );
    expect(overlap).toBe(0);
    expect(done).toBe(200);
  });
});
