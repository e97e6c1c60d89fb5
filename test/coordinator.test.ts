import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ManualClock } from "../src/core/clock.js";
import { ValidationError } from "../src/core/errors.js";
import { Coordinator } from "../src/coordinator/coordinator.js";
import { eventually } from "./helpers/logs.js";
import { createSqlite, type TestStore } from "./helpers/stores.js";

describe("coordinator", () => {
  let handle: TestStore;
  const clock = new ManualClock();
  const logger = pino({ level: "silent" });
  beforeEach(async () => {
    handle = await createSqlite({ clock });
  });
  afterEach(() => handle.cleanup());

  it("refuses thresholds that cannot work", () => {
    expect(() => new Coordinator(handle.store, { staleAfterMs: 60_000, deadAfterMs: 30_000 })).toThrow(ValidationError);
    expect(() => new Coordinator(handle.store, { sweepIntervalMs: 0 })).toThrow(/sweepIntervalMs: 0/);
  });

  it("sweeps with its thresholds (time moved by the clock, not by sleeping) and reports each sweep", async () => {
    const sweeps: number[] = [];
    const coordinator = new Coordinator(handle.store, { deadAfterMs: 120_000, logger, onSweep: (r) => sweeps.push(r.deadWorkers.length) });
    await handle.store.workerHeartbeat({ workerId: "w1", roles: ["a"], capacity: 1, currentLoad: 0, tasksProcessed: 0 });
    clock.advance(119_000);
    expect((await coordinator.sweepOnce()).deadWorkers).toEqual([]);
    clock.advance(2_000);
    expect((await coordinator.sweepOnce()).deadWorkers).toEqual(["w1"]);
    expect(sweeps).toEqual([0, 1]);
  });

  it("leads alone, and hands over when the leader stops", async () => {
    const a = new Coordinator(handle.store, { sweepIntervalMs: 20, logger });
    const b = new Coordinator(await handle.another(), { sweepIntervalMs: 20, logger });
    a.start();
    await eventually(() => a.isLeader, 5000, "a to lead");
    b.start();
    await new Promise((r) => setTimeout(r, 100)); // b tries a few times while a holds the lease
    expect([a.isLeader, b.isLeader]).toEqual([true, false]);
    await a.stop();
    await eventually(() => b.isLeader, 5000, "b to take over");
    await b.stop();
  });
});
