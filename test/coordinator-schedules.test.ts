import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../src/api/checked-store.js";
import { Taskpool } from "../src/api/taskpool.js";
import { ManualClock } from "../src/core/clock.js";
import { Coordinator } from "../src/coordinator/coordinator.js";
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
  });
}
