import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../src/api/checked-store.js";
import { Taskpool } from "../src/api/taskpool.js";
import { ManualClock } from "../src/core/clock.js";
import { COORDINATOR_LEADERSHIP, Coordinator } from "../src/coordinator/coordinator.js";
import { eventually } from "./helpers/logs.js";
import { postgresKind, sqliteKind, type TestStore } from "./helpers/stores.js";

const logger = pino({ level: "silent" });
const utc = (hours: number, seconds = 0) => new Date(Date.UTC(2030, 0, 1, hours, 0, seconds));

for (const kind of [sqliteKind, postgresKind]) {
  describe(`the coordinator fires schedules (${kind.name})`, () => {
    let handle: TestStore;
    const running: Coordinator[] = [];
    afterEach(async () => {
      await Promise.all(running.splice(0).map((c) => c.stop()));
      await handle.cleanup();
    });

    /** A started coordinator on its own store (another process would open one), counting its passes. */
    async function coordinator(clock: ManualClock) {
      const passes = { count: 0 };
      const c = new Coordinator(new CheckedStore(await handle.another({ clock })), { sweepIntervalMs: 20, logger, onSchedules: () => passes.count++ });
      running.push(c);
      c.start();
      return { c, passes };
    }

    it("fires each tick once with two coordinators running, not again after a restart, and skips the ticks missed while none ran", async () => {
      const clock = new ManualClock(utc(0));
      handle = await kind.create({ clock });
      const pool = new Taskpool(new CheckedStore(handle.store), null);
      const taskCount = async () => (await pool.counts()).byStatus.pending;
      await pool.schedule({ name: "resync", taskType: "product_resync", cron: "0 */4 * * *", fanOut: { keys: [1, 2, 3], batches: 3 }, concurrencyKey: "store:{key}" });
      const a = await coordinator(clock);
      const b = await coordinator(clock);
      await eventually(() => a.c.isLeader || b.c.isLeader, 5000, "a leader");

      for (let tick = 1; tick <= 3; tick++) {
        clock.set(utc(4 * tick, 5));
        // Whoever leads fires; both firing at once (a split brain) must not double the tick either.
        await Promise.all([a.c.fireSchedules(), b.c.fireSchedules()]);
        await eventually(async () => (await pool.schedules.get("resync"))?.lastRunAt?.getTime() === utc(4 * tick).getTime(), 5000, `tick ${tick}`);
        const passed = a.passes.count + b.passes.count;
        await eventually(() => a.passes.count + b.passes.count >= passed + 3, 5000, "more passes at the same time");
        expect(await taskCount()).toBe(3 * tick);
      }
      const batches = (await pool.list({}, { order: "oldest" })).tasks.slice(0, 3).map((t) => [t.concurrencyKey, t.scheduledFor.toISOString()]);
      // 3 batches over the 4 hours to the next tick.
      expect(batches).toEqual([
        ["store:1", "2030-01-01T04:00:00.000Z"],
        ["store:2", "2030-01-01T05:20:00.000Z"],
        ["store:3", "2030-01-01T06:40:00.000Z"],
      ]);

      // Restart: new coordinators on new connections find the 12:00 tick done.
      await Promise.all(running.splice(0).map((c) => c.stop()));
      const restarted = await coordinator(clock);
      await eventually(() => restarted.passes.count >= 3, 5000, "passes after the restart");
      expect(await taskCount()).toBe(9);

      // Down from 12:00 to 00:10 the next day: the 16:00, 20:00 and 00:00 ticks were missed and are skipped.
      await Promise.all(running.splice(0).map((c) => c.stop()));
      clock.set(utc(24, 600));
      const back = await coordinator(clock);
      const schedule = await eventually(async () => {
        const s = await pool.schedules.get("resync");
        return s?.lastResult?.skippedTicks === 3 && s;
      }, 5000, "the missed ticks skipped");
      expect(schedule).toMatchObject({ nextRunAt: utc(28), lastRunAt: utc(12), lastResult: { tasksCreated: 0 } });
      expect(await taskCount()).toBe(9);
      clock.set(utc(28, 1));
      await eventually(async () => (await taskCount()) === 12, 5000, "the next tick after the outage");
      expect(back.c.isLeader).toBe(true);
    }, 30_000);

    /** One tick of a coordinator that is not started, driven by hand with the clock. */
    const tickOf = (c: Coordinator) => (c as unknown as { tick(): Promise<void> }).tick();

    it("a standby taking over from a dead leader fires the tick that fell during the failover, whatever the leader's sweep interval", async () => {
      const clock = new ManualClock(new Date("2030-01-01T00:59:00Z"));
      handle = await kind.create({ clock });
      const pool = new Taskpool(new CheckedStore(handle.store), null);
      await pool.schedule({ name: "hourly", taskType: "report", cron: "0 * * * *" });
      // The leader sweeps every minute (the default), and holds its lease 3 minutes, as a leader of an
      // older taskpool did (3 sweep intervals); the standby sweeps every 5 s.
      const leader = new Coordinator(new CheckedStore(await handle.another({ clock })), { coordinatorId: "A", logger, sweepIntervalMs: 60_000 });
      const standby = new Coordinator(new CheckedStore(await handle.another({ clock })), { coordinatorId: "B", logger, sweepIntervalMs: 5000 });
      await tickOf(leader);
      expect(await handle.store.tryLead(COORDINATOR_LEADERSHIP, "A", 180)).toBe(true);
      await tickOf(standby);
      expect([leader.isLeader, standby.isLeader]).toEqual([true, false]);
      // The leader dies without resigning; the 01:00 tick falls while its lease still runs.
      while (!standby.isLeader) {
        clock.advance(5000);
        await tickOf(standby);
      }
      expect(clock.now().getTime()).toBeGreaterThanOrEqual(Date.parse("2030-01-01T01:02:00Z"));
      const hourly = await pool.schedules.get("hourly");
      expect(hourly).toMatchObject({ lastRunAt: new Date("2030-01-01T01:00:00Z"), lastResult: { tasksCreated: 1, skippedTicks: 0 } });
      expect((await pool.counts()).byStatus.pending).toBe(1);
    });

    it("fires schedules while its sweep fails: a sweep fault does not turn ticks into missed ones", async () => {
      const clock = new ManualClock(new Date("2030-01-01T00:59:00Z"));
      handle = await kind.create({ clock });
      const pool = new Taskpool(new CheckedStore(handle.store), null);
      await pool.schedule({ name: "hourly", taskType: "report", cron: "0 * * * *" });
      const store = new CheckedStore(await handle.another({ clock }));
      store.sweep = () => Promise.reject(new Error("canceling statement due to lock timeout"));
      const leader = new Coordinator(store, { coordinatorId: "A", logger, sweepIntervalMs: 60_000 });
      for (let minute = 0; minute < 6; minute++) {
        await tickOf(leader);
        clock.advance(60_000);
      }
      expect(leader.isLeader).toBe(true);
      expect(await pool.schedules.get("hourly")).toMatchObject({ lastRunAt: new Date("2030-01-01T01:00:00Z"), lastResult: { tasksCreated: 1, skippedTicks: 0 } });
    });
  });
}
