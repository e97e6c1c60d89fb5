import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../src/api/checked-store.js";
import { ManualClock } from "../src/core/clock.js";
import { ValidationError } from "../src/core/errors.js";
import type { PruneResult } from "../src/core/retention.js";
import { Coordinator } from "../src/coordinator/coordinator.js";
import { eventually } from "./helpers/logs.js";
import { createPostgres, createSqlite, type TestStore } from "./helpers/stores.js";

const logger = pino({ level: "silent" });
const DAY_MS = 86_400_000;

describe("coordinator retention options", () => {
  let handle: TestStore;
  afterEach(() => handle?.cleanup());

  it("has documented defaults and refuses settings that cannot work, naming them", async () => {
    handle = await createSqlite();
    const make = (retention: object | false) => new Coordinator(new CheckedStore(handle.store), { logger, retention: retention as never });
    expect(() => make({})).not.toThrow();
    expect(() => make(false)).not.toThrow();
    expect(() => make({ completedAfterMs: 999 })).toThrow(/retention\.completedAfterMs: 999 \(from 1000 ms/);
    expect(() => make({ cancelledAfterMs: Number.NaN })).toThrow(ValidationError);
    expect(() => make({ failedAfterMs: DAY_MS })).toThrow(/retention\.failedAfterMs: 86400000 \(shorter than completedAfterMs \(604800000\)/);
    expect(() => make({ failedAfterMs: 30 * DAY_MS })).not.toThrow();
    expect(() => make({ batchSize: 0 })).toThrow(/retention\.batchSize: 0/);
    expect(() => make({ batchSize: 1.5 })).toThrow(/retention\.batchSize/);
    expect(() => make({ batchesPerSweep: 101 })).toThrow(/retention\.batchesPerSweep: 101/);
  });
});

describe.each([
  ["postgres", createPostgres],
  ["sqlite", createSqlite],
] as const)("the leading coordinator prunes on %s", (_name, create) => {
  let handle: TestStore;
  const coordinators: Coordinator[] = [];
  afterEach(async () => {
    await Promise.all(coordinators.splice(0).map((c) => c.stop()));
    await handle?.cleanup();
  });

  it("deletes old finished tasks after its sweep, at most batchSize × batchesPerSweep a tick, and only while leading", async () => {
    const clock = new ManualClock();
    handle = await create({ clock });
    const store = new CheckedStore(handle.store);
    await store.enqueueMany(Array.from({ length: 7 }, () => ({ taskType: "a" })));
    for (const t of await store.claim({ workerId: "w1", limit: 7 })) await store.complete(t.id, t);
    clock.advance(8 * DAY_MS);
    await store.enqueue({ taskType: "a" });

    // A standby prunes nothing: the leader holds the lease.
    expect(await store.tryLead("coordinator", "someone-else", 3600)).toBe(true);
    const standbyPrunes: PruneResult[] = [];
    const standby = new Coordinator(store, { logger, sweepIntervalMs: 50, retention: { batchSize: 2, batchesPerSweep: 2 }, onPrune: (r) => standbyPrunes.push(r) });
    coordinators.push(standby);
    standby.start();
    await new Promise((r) => setTimeout(r, 200));
    await standby.stop();
    expect(standbyPrunes).toEqual([]);
    expect((await store.counts()).byStatus.completed).toBe(7);
    await store.resign("coordinator", "someone-else");

    const prunes: PruneResult[] = [];
    const leader = new Coordinator(store, { logger, sweepIntervalMs: 60_000, retention: { batchSize: 2, batchesPerSweep: 2 }, onPrune: (r) => prunes.push(r) });
    coordinators.push(leader);
    leader.start(); // the first tick runs at once; the next is a minute away
    await eventually(() => prunes.length === 1, 10_000, "the first tick's retention");
    expect(prunes[0].tasks).toBe(4);
    expect((await store.counts()).byStatus).toMatchObject({ completed: 3, pending: 1 });
  });

  it("keeps everything with retention: false", async () => {
    const clock = new ManualClock();
    handle = await create({ clock });
    const store = new CheckedStore(handle.store);
    await store.enqueue({ taskType: "a" });
    const [t] = await store.claim({ workerId: "w1" });
    await store.complete(t.id, t);
    clock.advance(365 * DAY_MS);
    const sweeps: number[] = [];
    const coordinator = new Coordinator(store, { logger, retention: false, onSweep: () => sweeps.push(1) });
    coordinators.push(coordinator);
    coordinator.start();
    await eventually(() => sweeps.length === 1, 10_000, "the first sweep");
    await coordinator.stop();
    expect(await store.get(t.id)).not.toBeNull();
  });
});
