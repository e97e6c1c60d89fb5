import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ManualClock } from "../src/core/clock.js";
import { ValidationError } from "../src/core/errors.js";
import { Coordinator } from "../src/coordinator/coordinator.js";
import type { Store } from "../src/store/store.js";
import { captureLogs, eventually } from "./helpers/logs.js";
import { createPostgres, createSqlite, type TestStore, withOverrides } from "./helpers/stores.js";

/**
 * The SPEC: dead workers' tasks handled within 2 minutes, with dead_after 2 minutes. The leader swept
 * only at its interval, so a worker dying just after its beat waited dead_after plus up to a whole
 * interval (3 minutes at the defaults); a lease running out, likewise. Thresholds of 1.5 s and 1 s
 * stand for them here, under a 60 s interval whose first sweep, at the start, finds nothing due yet.
 */
function recoversWhenDue(open: () => Promise<TestStore>) {
  it("sweeps when a worker turns dead or a lease runs out, not at its next interval", async () => {
    const handle = await open();
    const swept: { dead: string[]; requeued: number[]; at: number }[] = [];
    const startedAt = performance.now();
    const coordinator = new Coordinator(handle.store, {
      sweepIntervalMs: 60_000,
      staleAfterMs: 1500,
      deadAfterMs: 1500,
      retention: false,
      logger: pino({ level: "silent" }),
      onSweep: (r) => swept.push({ dead: r.deadWorkers, requeued: r.requeued, at: performance.now() - startedAt }),
    });
    try {
      const beat = (workerId: string) => handle.store.workerHeartbeat({ workerId, roles: [workerId], capacity: 1, currentLoad: 0, tasksProcessed: 0 });
      const { task: dying } = await handle.store.enqueue({ taskType: "dying" });
      const { task: hung } = await handle.store.enqueue({ taskType: "hung" });
      await beat("dying");
      await handle.store.claim({ workerId: "dying", leaseSeconds: 600 });
      // Its worker lives on (beating below), but the lease of its task runs out after a second.
      await beat("hung");
      await handle.store.claim({ workerId: "hung", leaseSeconds: 1 });
      coordinator.start();
      const alive = setInterval(() => void beat("hung"), 200);
      try {
        await eventually(() => swept.some((s) => s.requeued.includes(dying.id)), 20_000, "the dead worker's task taken back");
        await new Promise((r) => setTimeout(r, 1500));
      } finally {
        clearInterval(alive);
      }
      const hungSweep = swept.find((s) => s.requeued.includes(hung.id));
      const dyingSweep = swept.find((s) => s.requeued.includes(dying.id));
      expect(dyingSweep?.dead).toEqual(["dying"]);
      expect(hungSweep?.dead).not.toContain("hung");
      // At about 1 s and 1.5 s; the living worker, beating every 200 ms, always has a deadline nearer than
      // the next tick, and is never declared dead for it.
      expect(hungSweep!.at).toBeLessThan(dyingSweep!.at);
      // Well before the interval's next sweep, 60 s from the start (a load-delayed wake-up allowed for).
      expect(dyingSweep!.at).toBeLessThan(20_000);
      expect(swept.filter((s) => s.dead.includes("hung"))).toEqual([]);
    } finally {
      await coordinator.stop();
      await handle.cleanup();
    }
  });

  // A wake-up that came after a freeze longer than the lease swept as leader on the strength of the last
  // tick, beside whichever coordinator had taken the lease meanwhile.
  it("a wake-up due while the process was frozen past its lease asks for the lease again before it sweeps", async () => {
    const handle = await open();
    const calls: string[] = [];
    const watched = withOverrides(handle.store, {
      tryLead: async (...args) => (calls.push("tryLead"), handle.store.tryLead(...args)),
      sweep: async (options) => (calls.push("sweep"), handle.store.sweep(options)),
      nextRecoveryIn: async (options) => {
        const seconds = await handle.store.nextRecoveryIn(options);
        calls.push("planned");
        return seconds;
      },
    });
    // Ticks a second apart, a 3 s lease; the worker turns dead half a second after the start, before the
    // second tick, so the leader plans a wake-up for it.
    const coordinator = new Coordinator(watched, { sweepIntervalMs: 1000, staleAfterMs: 1000, deadAfterMs: 1000, retention: false, logger: pino({ level: "silent" }) });
    try {
      await handle.store.workerHeartbeat({ workerId: "w", roles: ["crawl"], capacity: 1, currentLoad: 0, tasksProcessed: 0 });
      await new Promise((r) => setTimeout(r, 500));
      coordinator.start();
      await eventually(() => calls.includes("planned"), 5000, "the first tick to plan its wake-up");
      // Frozen: nothing on this event loop runs until the lease has run out.
      const frozenUntil = performance.now() + 3500;
      while (performance.now() < frozenUntil);
      calls.length = 0;
      await eventually(() => calls.includes("sweep"), 5000, "a sweep after the freeze");
      expect(calls[0]).toBe("tryLead");
    } finally {
      await coordinator.stop();
      await handle.cleanup();
    }
  });

  it("a leader stalled past its lease just after being granted it sweeps nothing and fires nothing: another leads by then", async () => {
    const handle = await open();
    const calls: string[] = [];
    let granted = 0;
    let stall = async () => {};
    const stalled = withOverrides(handle.store, {
      tryLead: async (...args) => {
        const leading = await handle.store.tryLead(...args);
        // Its second grant: held up past the lease (3 ticks of 1 s) before it answers, as a process frozen there would be.
        if (leading && ++granted === 2) await stall();
        return leading;
      },
      sweep: async (options) => (calls.push("sweep"), handle.store.sweep(options)),
      recordSweep: async (...args) => (calls.push("recordSweep"), handle.store.recordSweep(...args)),
      fireDueSchedules: async (...args) => (calls.push("fireDueSchedules"), handle.store.fireDueSchedules(...args)),
    });
    const quiet = { sweepIntervalMs: 1000, retention: false, logger: pino({ level: "silent" }) } as const;
    const coordinator = new Coordinator(stalled, { ...quiet, coordinatorId: "stalled" });
    const other = new Coordinator(handle.store, { ...quiet, coordinatorId: "other" });
    try {
      let stallOver = () => {};
      stall = () => new Promise<void>((resolve) => (stallOver = resolve));
      coordinator.start();
      await eventually(() => granted === 2, 5000, "the second grant");
      calls.length = 0;
      // While it stalls, its lease runs out and the other takes over.
      other.start();
      await eventually(async () => (await handle.store.leadershipStatus("coordinator")).holder === "other", 10_000, "the other to lead");
      stallOver();
      await new Promise((r) => setTimeout(r, 300));
      expect(calls).toEqual([]);
    } finally {
      await Promise.all([coordinator.stop(), other.stop()]);
      await handle.cleanup();
    }
  });

  // The store answers the soonest deadline only. One that passed while a wake-up's sweep ran was taken
  // for a recovery no sweep could make and dropped, and every later one waited behind it for the next
  // leadership tick (15 s): workers dying together were recovered up to 15 s late.
  it("recovers a worker whose deadline passed while the sweep for another ran", async () => {
    const handle = await open();
    const slowSweeps = withOverrides(handle.store, { sweep: async (options) => {
      const result = await handle.store.sweep(options);
      await new Promise((r) => setTimeout(r, 800));
      return result;
    } });
    const dead: { worker: string; at: number }[] = [];
    const startedAt = performance.now();
    const coordinator = new Coordinator(slowSweeps, {
      sweepIntervalMs: 60_000,
      staleAfterMs: 1500,
      deadAfterMs: 1500,
      retention: false,
      logger: pino({ level: "silent" }),
      onSweep: (r) => dead.push(...r.deadWorkers.map((worker) => ({ worker, at: performance.now() - startedAt }))),
    });
    try {
      const beat = (workerId: string) => handle.store.workerHeartbeat({ workerId, roles: ["crawl"], capacity: 1, currentLoad: 0, tasksProcessed: 0 });
      await beat("first");
      await new Promise((r) => setTimeout(r, 400));
      await beat("second");
      coordinator.start();
      await eventually(() => dead.some((d) => d.worker === "second"), 10_000, "the second worker declared dead");
      expect(dead.map((d) => d.worker)).toEqual(["first", "second"]);
      // About 1.9 s, then 0.8 s of sweep and a second's second look: not the next tick, 15 s from the start.
      expect(dead[1].at).toBeLessThan(8000);
    } finally {
      await coordinator.stop();
      await handle.cleanup();
    }
  });
}

describe("coordinator recovers when due, on SQLite", () => recoversWhenDue(() => createSqlite()));
describe("coordinator recovers when due, on PostgreSQL", () => recoversWhenDue(() => createPostgres()));

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
    expect(() => new Coordinator(handle.store, { staleAfterMs: 60_000, deadAfterMs: 30_000 })).toThrow(/raise deadAfterMs or lower staleAfterMs/);
    // Sweeps at most 8 h apart, and sweep thresholds the checked store accepts (at most a day).
    expect(() => new Coordinator(handle.store, { sweepIntervalMs: 28_800_001 })).toThrow(/sweepIntervalMs: 28800001 \(at most 28800000 ms: a dead worker's tasks would wait that long/);
    expect(() => new Coordinator(handle.store, { deadAfterMs: 86_400_001 })).toThrow(/deadAfterMs: 86400001 \(at most 86400000 ms: a store accepts sweep thresholds/);
    expect(() => new Coordinator(handle.store, { sweepIntervalMs: 28_800_000, staleAfterMs: 86_400_000, deadAfterMs: 86_400_000, reservationMs: 86_400_000, logger })).not.toThrow();
    // What works is accepted: fractional milliseconds, sweeps rarer than dead-worker detection (only slower).
    expect(() => new Coordinator(handle.store, { sweepIntervalMs: 1500.5, staleAfterMs: 1000.25, deadAfterMs: 1000.25, logger })).not.toThrow();
    expect(() => new Coordinator(handle.store, { sweepIntervalMs: 300_000, deadAfterMs: 120_000, logger })).not.toThrow();
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

  it("leads alone, and hands over when the leader stops, saying so in each one's log", async () => {
    const logsA = captureLogs();
    const logsB = captureLogs();
    const a = new Coordinator(handle.store, { sweepIntervalMs: 20, logger: logsA.logger });
    const b = new Coordinator(await handle.another(), { sweepIntervalMs: 20, logger: logsB.logger });
    a.start();
    await eventually(() => a.isLeader, 5000, "a to lead");
    b.start();
    await new Promise((r) => setTimeout(r, 100)); // b tries a few times while a holds the lease
    expect([a.isLeader, b.isLeader]).toEqual([true, false]);
    await a.stop();
    await eventually(() => b.isLeader, 5000, "b to take over");
    await b.stop();
    const said = (logs: ReturnType<typeof captureLogs>) => logs.messages().filter((m) => !m.startsWith("Sweep:"));
    expect(said(logsA)).toEqual(["Coordinator started", "Leading: this coordinator sweeps", "Coordinator stopped; leadership handed back: another coordinator leads from its next tick"]);
    // A standby says so at its first tick: it used to say nothing after it started.
    expect(said(logsB)).toEqual([
      "Coordinator started",
      "Standing by: another coordinator leads",
      "Leading: this coordinator sweeps",
      "Coordinator stopped; leadership handed back: another coordinator leads from its next tick",
    ]);
  });

  // A leader killed (no resignation) under the default 60 s sweep held its lease 3 sweep intervals,
  // 3 minutes, before a standby could sweep: a worker dead beside it waited that long past dead_after.
  it("renews the leadership every 15 s at most, so a standby takes over a killed leader's within 45 s under the default sweep", async () => {
    const a = new Coordinator(withOverrides(handle.store, { resign: async () => {} }), { logger });
    a.start();
    await eventually(() => a.isLeader, 5000, "a to lead");
    await a.stop(); // its resignation lost, as a killed leader's: the lease stays until it runs out
    clock.advance(45_001);
    const b = new Coordinator(await handle.another(), { logger });
    b.start();
    try {
      await eventually(() => b.isLeader, 5000, "b to take over the lapsed lease");
    } finally {
      await b.stop();
    }
  });

  // The lease lasts 3 leadership ticks (45 s at most), renewed at each; a sweep and its schedules slow
  // enough to outlast it let a standby take over, and the old leader then pruned beside the new one.
  it("prunes only under a lease renewed after the sweep and the schedules", async () => {
    const pruned: number[] = [];
    const slow = withOverrides(handle.store, {
      fireDueSchedules: async (...args) => {
        const fired = await handle.store.fireDueSchedules(...args);
        clock.advance(45_001);
        expect(await handle.store.tryLead("coordinator", "standby", 45)).toBe(true);
        return fired;
      },
    });
    const coordinator = new Coordinator(slow, { logger, onSweep: () => {}, onPrune: (r) => pruned.push(r.tasks) });
    coordinator.start();
    try {
      await eventually(async () => (await handle.store.leadershipStatus("coordinator")).holder === "standby", 5000, "the standby to lead");
      await eventually(() => !coordinator.isLeader, 5000, "the old leader to see it lost its lease");
      expect(pruned).toEqual([]);
    } finally {
      await coordinator.stop();
    }
  });

  // A tick still running when the coordinator was started again went on to set a timer of its own
  // beside the new run's: two chains of ticks, each leadership try made twice as often.
  it("started again while its stop waits for a tick, ticks in one chain, and not at all once stopped", async () => {
    let tries = 0;
    const slow = withOverrides(handle.store, { tryLead: async (...args) => (tries++, await new Promise((r) => setTimeout(r, 100)), handle.store.tryLead(...args)) });
    const coordinator = new Coordinator(slow, { sweepIntervalMs: 20, retention: false, logger });
    coordinator.start();
    await eventually(() => coordinator.isLeader, 5000, "the coordinator to lead");
    const stopping = coordinator.stop(); // waits for the tick under way, 100 ms in its tryLead
    coordinator.start();
    await stopping;
    // One chain makes a try at most every 100 ms (each waits for the one before): 11 in a second at most.
    const before = tries;
    await new Promise((r) => setTimeout(r, 1000));
    expect(tries - before).toBeLessThanOrEqual(11);
    await coordinator.stop();
    const after = tries;
    await new Promise((r) => setTimeout(r, 500));
    expect(tries).toBe(after);
  });

  it("a failing read of the next recovery is warned of on its own, not taken for a failed tick each tick", async () => {
    const failing = withOverrides(handle.store, { nextRecoveryIn: async () => Promise.reject(new Error("statement timeout")) });
    const logs = captureLogs();
    const coordinator = new Coordinator(failing, { sweepIntervalMs: 20, retention: false, logger: logs.logger });
    coordinator.start();
    try {
      await eventually(() => logs.messages().filter((m) => m.startsWith("Could not read when the next recovery is due")).length >= 3, 5000, "three warnings");
    } finally {
      await coordinator.stop();
    }
    expect(logs.messages().filter((m) => /tick failed|Coordinator recovered|has failed/.test(m))).toEqual([]);
  });

  it("sweeps every sweep interval, not at every leadership tick", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    // The faked setTimeout would hold eventually()'s own pauses too.
    const until = async (done: () => boolean, what: string) => {
      for (let i = 0; i < 10_000; i++) if (done()) return;
      else await new Promise((r) => setImmediate(r));
      throw new Error(`no ${what}`);
    };
    let tries = 0;
    const sweeps: number[] = [];
    const counted = withOverrides(handle.store, { tryLead: (...args) => (tries++, handle.store.tryLead(...args)) });
    // No retention: its batches renew the lease first (a try of their own), and the tries count the ticks.
    const coordinator = new Coordinator(counted, { sweepIntervalMs: 60_000, retention: false, logger, onSweep: () => sweeps.push(tries) });
    try {
      coordinator.start();
      vi.advanceTimersByTime(0);
      await until(() => sweeps.length === 1, "first sweep");
      for (let tick = 2; tick <= 9; tick++) {
        // The next tick's timer is set once this one has run.
        await until(() => vi.getTimerCount() > 0, `timer for tick ${tick}`);
        vi.advanceTimersByTime(15_000);
        await until(() => tries === tick, `leadership tick ${tick}`);
      }
      await until(() => sweeps.length === 3, "third sweep");
      expect(sweeps).toEqual([1, 5, 9]);
    } finally {
      await coordinator.stop();
      vi.useRealTimers();
    }
  });

  // A database gone silent: each statement waits out its timeout (here 1 s). The stop waited for the
  // whole tick, one such wait per step (the sweep, the schedules), not for the step under way.
  it("stops after the step under way, not after the rest of its tick", async () => {
    let silent = false;
    const slow = <T>(answer: () => Promise<T>) => (silent ? new Promise((resolve) => setTimeout(resolve, 1000)).then(() => Promise.reject(new Error("timeout"))) : answer());
    const store = withOverrides(handle.store, {
      sweep: (options) => slow(() => handle.store.sweep(options)),
      recordSweep: (...args) => slow(() => handle.store.recordSweep(...args)),
      fireDueSchedules: (options) => slow(() => handle.store.fireDueSchedules(options)),
    });
    let sweeping = false;
    const coordinator = new Coordinator(withOverrides(store, { sweep: (options) => ((sweeping = silent), store.sweep(options)) }), { sweepIntervalMs: 50, logger });
    coordinator.start();
    await eventually(() => coordinator.isLeader, 5000, "the coordinator to lead");
    silent = true;
    await eventually(() => sweeping, 5000, "a sweep to hang");
    const stoppingAt = performance.now();
    await coordinator.stop();
    expect(performance.now() - stoppingAt).toBeLessThan(1600);
  });

  it("raises the alarm after 3 failed ticks in a row, and says when it recovers", async () => {
    let down = true;
    const flaky: Store = Object.assign(Object.create(handle.store), {
      tryLead: async (name: string, holder: string, ttl: number) => {
        if (down) throw new Error("connect ECONNREFUSED 127.0.0.1:5432");
        return handle.store.tryLead(name, holder, ttl);
      },
    });
    const logs = captureLogs();
    const coordinator = new Coordinator(flaky, { sweepIntervalMs: 20, logger: logs.logger });
    coordinator.start();
    try {
      const alarm = await eventually(() => logs.lines().find((l) => l.level === 50), 5000, "the alarm");
      expect(alarm.msg).toMatch(/^Coordinator has failed 3 ticks in a row since \d{4}-\d\d-\d\dT.*Z: /);
      expect(alarm.msg).toMatch(/dead workers are not being detected and expired leases not recovered\. Last error: connect ECONNREFUSED/);
      expect(alarm).toMatchObject({ failedTicks: 3, err: "connect ECONNREFUSED 127.0.0.1:5432" });
      // The first two were a blip as far as anyone could tell then.
      expect(logs.lines().filter((l) => /tick failed/.test(l.msg) && l.level >= 40).map((l) => l.level)).toEqual([40, 40]);
      // Said again as the outage doubles, not at every tick: 3, 6, 12, 24.
      await eventually(() => logs.lines().some((l) => l.level === 50 && l.failedTicks === 24), 5000, "the 24th failed tick");
      expect(logs.lines().filter((l) => l.level === 50).map((l) => l.failedTicks)).toEqual([3, 6, 12, 24]);
      down = false;
      const recovered = await eventually(() => logs.lines().find((l) => l.msg.startsWith("Coordinator recovered")), 5000, "the recovery");
      expect(recovered).toMatchObject({ level: 40, failingSince: alarm.failingSince });
      expect(recovered.msg).toMatch(/^Coordinator recovered: ticks succeed again after \d+ failed in a row since /);
      await eventually(() => coordinator.isLeader, 5000, "leading");
    } finally {
      await coordinator.stop();
    }
  });

  it("logs a sweep that only marked workers stale at info, and warns when tasks were taken back", async () => {
    const logs = captureLogs();
    const coordinator = new Coordinator(handle.store, { logger: logs.logger });
    const beat = (workerId: string) => handle.store.workerHeartbeat({ workerId, roles: ["a"], capacity: 1, currentLoad: 0, tasksProcessed: 0 });
    await beat("w1");
    await handle.store.enqueue({ taskType: "a" });
    await handle.store.claim({ workerId: "w1" });
    clock.advance(61_000);
    await coordinator.sweepOnce();
    clock.advance(60_000);
    await coordinator.sweepOnce();
    const sweeps = logs.lines().filter((l) => l.msg.startsWith("Sweep:"));
    expect(sweeps.map((l) => [l.level, l.msg])).toEqual([
      [30, "Sweep: 1 worker stale, 0 dead; 0 tasks requeued, 0 failed, 0 reassigned, 0 without a worker with room"],
      [40, "Sweep: 0 workers stale, 1 dead; 1 task requeued, 0 failed, 0 reassigned, 1 without a worker with room"],
    ]);
  });

  it("records each sweep it runs as leader, with its interval", async () => {
    const coordinator = new Coordinator(handle.store, { sweepIntervalMs: 20, logger });
    coordinator.start();
    try {
      const status = await eventually(async () => {
        const s = await handle.store.leadershipStatus("coordinator");
        return s.lastSweptAt && s;
      }, 5000, "a recorded sweep");
      expect(status).toMatchObject({ holder: coordinator.id, lastSweptBy: coordinator.id, lastSweptAt: clock.now(), secondsSinceSweep: 0, sweepIntervalSeconds: 0.02 });
    } finally {
      await coordinator.stop();
    }
  });
});

describe("coordinator on PostgreSQL", () => {
  let handle: TestStore;
  const clock = new ManualClock();
  beforeEach(async () => {
    handle = await createPostgres({ clock });
  });
  afterEach(() => handle.cleanup());

  // 3 × 500 ms is a 1.5 s lease: PostgreSQL refused fractional lease times, and the coordinator never led.
  it("leads and sweeps with a 500 ms interval", async () => {
    const swept: string[][] = [];
    const coordinator = new Coordinator(handle.store, { sweepIntervalMs: 500, logger: pino({ level: "silent" }), onSweep: (r) => swept.push(r.deadWorkers) });
    await handle.store.workerHeartbeat({ workerId: "w1", roles: ["a"], capacity: 1, currentLoad: 0, tasksProcessed: 0 });
    clock.advance(121_000);
    coordinator.start();
    try {
      await eventually(() => coordinator.isLeader && swept.length > 0, 5000, "a sweep as leader");
      expect(swept[0]).toEqual(["w1"]);
      expect(await handle.store.leadershipStatus("coordinator")).toMatchObject({ holder: coordinator.id, lastSweptBy: coordinator.id });
    } finally {
      await coordinator.stop();
    }
  });
});
