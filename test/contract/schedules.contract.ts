import { describe, expect, it } from "vitest";
import { ScheduleNotFoundError, ValidationError } from "../../src/core/errors.js";
import type { ScheduleDefinition } from "../../src/core/schedule.js";
import type { ClaimedTask, Task } from "../../src/core/task.js";
import type { StoreKind } from "../helpers/stores.js";
import { claimOne, useStore } from "./context.js";

const HOUR = 3_600_000;
const at = (iso: string) => new Date(iso);
const FIRE = { graceSeconds: 240 };

const RESYNC: ScheduleDefinition = { name: "resync", taskType: "product_resync", params: { full: false }, cron: "0 */4 * * *" };

export function schedulesContract(kind: StoreKind) {
  describe("schedules", () => {
    const ctx = useStore(kind);
    const tasks = async (taskType?: string) => (await ctx.store.list({ taskType }, { order: "oldest", limit: 1000 })).tasks;

    it("saves a schedule with its defaults and its next tick in its time zone; an update keeps what it does not change", async () => {
      // The manual clock starts at 2030-01-01T00:00:00Z.
      const { schedule, created } = await ctx.store.saveSchedule(RESYNC);
      expect(created).toBe(true);
      expect(schedule).toEqual({
        ...RESYNC,
        timezone: "UTC",
        enabled: true,
        fanOut: null,
        concurrencyKey: null,
        uniqueKey: null,
        priority: null,
        missedTicks: "skip",
        nextRunAt: at("2030-01-01T04:00:00.000Z"),
        lastRunAt: null,
        lastResult: null,
        createdAt: ctx.clock.now(),
        updatedAt: ctx.clock.now(),
      });
      expect(await ctx.store.getSchedule("resync")).toEqual(schedule);

      ctx.clock.advance(HOUR);
      // Same ticks: the next run stays; a new zone moves it (09:00 in Paris is 08:00 UTC in winter).
      const same = await ctx.store.saveSchedule({ ...RESYNC, priority: 3 });
      expect(same).toMatchObject({ created: false, schedule: { priority: 3, nextRunAt: at("2030-01-01T04:00:00.000Z"), createdAt: schedule.createdAt, updatedAt: ctx.clock.now() } });
      const paris = await ctx.store.saveSchedule({ ...RESYNC, cron: "0 9 * * *", timezone: "Europe/Paris" });
      expect(paris.schedule.nextRunAt).toEqual(at("2030-01-01T08:00:00.000Z"));

      await ctx.store.setScheduleEnabled("resync", false);
      // A deploy saving the definition again does not resume what an operator paused.
      expect((await ctx.store.saveSchedule(RESYNC)).schedule).toMatchObject({ enabled: false, nextRunAt: null });
      expect((await ctx.store.saveSchedule({ ...RESYNC, enabled: true })).schedule).toMatchObject({ enabled: true, nextRunAt: at("2030-01-01T04:00:00.000Z") });
      await ctx.store.saveSchedule({ ...RESYNC, name: "analytics", taskType: "analytics_refresh", cron: "@daily" });
      expect((await ctx.store.listSchedules()).map((s) => s.name)).toEqual(["analytics", "resync"]);
    });

    const bad: [string, unknown, RegExp][] = [
      ["a cron with a bad field", { ...RESYNC, cron: "61 * * * *" }, /Invalid cron: "61 \* \* \* \*": Invalid value for minute: 61 \(5 fields/],
      ["a cron with three fields", { ...RESYNC, cron: "* * *" }, /^Invalid cron: "\* \* \*": it has 3 parts, not 5 or 6 \(5 fields: minute/],
      ["a cron with seven fields", { ...RESYNC, cron: "0 0 0 * * * 2030" }, /^Invalid cron: "0 0 0 \* \* \* 2030": it has 7 parts, not 5 or 6 \(5 fields: minute/],
      ["a date instead of a cron", { ...RESYNC, cron: "2031-01-01T00:00:00" }, /is a date, not a recurring expression/],
      ["an unknown time zone", { ...RESYNC, timezone: "Mars/Olympus" }, /Invalid timezone: "Mars\/Olympus" is not an IANA time zone/],
      ["both keys and a query", { ...RESYNC, fanOut: { keys: [1], fromResults: { field: "ids" } } }, /give either keys .* or fromResults/],
      ["a fan-out without keys", { ...RESYNC, fanOut: { batches: 6 } }, /give either keys/],
      ["{key} without a fan-out", { ...RESYNC, concurrencyKey: "store:{key}" }, /\{key\} stands for a fan-out key, and this schedule has no fan-out/],
      ["a placeholder other than {key}", { ...RESYNC, fanOut: { keys: ["eu"] }, concurrencyKey: "store:{region}" }, /Invalid concurrencyKey: "store:\{region\}" has \{region\}, and the only placeholder is \{key\}/],
      ["{keys} for {key}", { ...RESYNC, fanOut: { keys: ["eu"] }, concurrencyKey: "{key}:{keys}" }, /has \{keys\}, and the only placeholder is \{key\}/],
      ["a unique key with another placeholder", { ...RESYNC, fanOut: { keys: ["eu"] }, uniqueKey: "resync:{store}" }, /^Invalid uniqueKey: "resync:\{store\}" has \{store\}, and the only placeholder is \{key\}/],
      ["a unique key's {key} without a fan-out", { ...RESYNC, uniqueKey: "resync:{key}" }, /^Invalid uniqueKey: \{key\} stands for a fan-out key, and this schedule has no fan-out/],
      ["zero batches", { ...RESYNC, fanOut: { keys: [1], batches: 0 } }, /fanOut\.batches/],
      ["one key written as a number and as text", { ...RESYNC, fanOut: { keys: [7, 8, "7"] } }, /^Invalid fanOut\.keys\.2: 7 and "7" are one key written twice/],
      // Each tick made a task per listing: two of store 7 at once.
      ["a key listed twice", { ...RESYNC, fanOut: { keys: [7, 8, 7] } }, /fanOut\.keys: Expected array elements to be unique/],
      ["params.key beside a fan-out, which gives each task its key there", { ...RESYNC, params: { key: "all" }, fanOut: { keys: [1] } }, /Invalid params\.key: each task's params get its fan-out key as key/],
      ["an unknown missed-tick policy", { ...RESYNC, missedTicks: "catch_up" }, /missedTicks: must be one of skip, run_once/],
      ["a bad name", { ...RESYNC, name: "two words" }, /name: must be a letter/],
      ["an unknown field", { ...RESYNC, crons: "x" }, /crons|additional/i],
    ];
    for (const [what, definition, message] of bad) {
      it(`refuses ${what}, saving nothing`, async () => {
        const error = await ctx.store.saveSchedule(definition as ScheduleDefinition).catch((e) => e);
        expect(error).toBeInstanceOf(ValidationError);
        expect(error.message).toMatch(message);
        expect(await ctx.store.listSchedules()).toEqual([]);
      });
    }

    it("a deploy re-saving a schedule while an operator pauses it, from another connection, never undoes the pause", async () => {
      await ctx.store.saveSchedule(RESYNC);
      const operator = await ctx.another();
      for (let round = 0; round < 30; round++) {
        await ctx.store.setScheduleEnabled("resync", true);
        // In either order the schedule ends paused: a save keeps what an operator set. Only a pause landing
        // between the save's read and its write was undone, the save putting back what it had read.
        await Promise.all([ctx.store.saveSchedule({ ...RESYNC, priority: round }), operator.setScheduleEnabled("resync", false)]);
        expect((await ctx.store.getSchedule("resync"))?.enabled, `round ${round}`).toBe(false);
      }
    });

    it("pauses, resumes and removes by name; an unknown name is a ScheduleNotFoundError", async () => {
      await ctx.store.saveSchedule(RESYNC);
      expect(await ctx.store.setScheduleEnabled("resync", false)).toMatchObject({ enabled: false, nextRunAt: null });
      ctx.clock.set(at("2030-01-01T09:30:00.000Z"));
      // Ticks while paused are not missed ones: the next is the first after now.
      expect(await ctx.store.setScheduleEnabled("resync", true)).toMatchObject({ enabled: true, nextRunAt: at("2030-01-01T12:00:00.000Z") });
      expect(await ctx.store.fireDueSchedules(FIRE)).toEqual([]);
      expect((await ctx.store.removeSchedule("resync")).name).toBe("resync");
      expect(await ctx.store.getSchedule("resync")).toBeNull();
      for (const call of [() => ctx.store.removeSchedule("resync"), () => ctx.store.setScheduleEnabled("nope", true)]) {
        const error = await call().catch((e) => e);
        expect(error).toBeInstanceOf(ScheduleNotFoundError);
        // Over HTTP too: the server's points to its route, the client's to what a store's does.
        expect(error.message).toMatch(/^Schedule "(resync|nope)" does not exist \(taskpool schedules list shows them\)$/);
      }
      await expect(ctx.store.getSchedule("bad name")).rejects.toBeInstanceOf(ValidationError);
    });

    it("fires a due tick once, with its tasks due at the tick, and shows the next run, the last run and its result", async () => {
      await ctx.store.saveSchedule({ ...RESYNC, priority: 7 });
      ctx.clock.set(at("2030-01-01T03:59:59.000Z"));
      expect(await ctx.store.fireDueSchedules(FIRE)).toEqual([]);
      ctx.clock.set(at("2030-01-01T04:00:30.000Z"));
      const [fired] = await ctx.store.fireDueSchedules(FIRE);
      expect(fired).toMatchObject({ name: "resync", tickAt: at("2030-01-01T04:00:00.000Z"), skippedTicks: 0, error: null });
      const [task] = await tasks();
      expect(fired.taskIds).toEqual([task.id]);
      expect(task).toMatchObject({ taskType: "product_resync", params: { full: false }, priority: 7, scheduledFor: at("2030-01-01T04:00:00.000Z") });
      expect(await ctx.store.getSchedule("resync")).toMatchObject({
        nextRunAt: at("2030-01-01T08:00:00.000Z"),
        lastRunAt: at("2030-01-01T04:00:00.000Z"),
        lastResult: { tickAt: at("2030-01-01T04:00:00.000Z"), firedAt: ctx.clock.now(), tasksCreated: 1, skippedTicks: 0, error: null, message: "created 1 task, the first due 2030-01-01T04:00:00.000Z" },
      });
      expect(await ctx.store.fireDueSchedules(FIRE)).toEqual([]);
      expect(await tasks()).toHaveLength(1);
    });

    it("fans out over keys in staggered batches (seed 004: 6 batches, one every 4 hours) with a concurrency key per key", async () => {
      const keys = Array.from({ length: 12 }, (_, i) => i + 1);
      await ctx.store.saveSchedule({ ...RESYNC, cron: "0 0 * * *", fanOut: { keys, batches: 6 }, concurrencyKey: "store:{key}" });
      ctx.clock.set(at("2030-01-02T00:01:00.000Z"));
      const [fired] = await ctx.store.fireDueSchedules(FIRE);
      expect(fired.taskIds).toHaveLength(12);
      const all = await tasks();
      // The daily period shared out: batch i at 00:00 + 4 h × i, stores 1-2, 3-4, … as the seed's table.
      expect(all.map((t) => [t.params.key, t.scheduledFor.toISOString().slice(11, 16), t.concurrencyKey])).toEqual(
        keys.map((k) => [k, `${String(Math.floor((k - 1) / 2) * 4).padStart(2, "0")}:00`, `store:${k}`]),
      );
      expect(all[0].params).toEqual({ full: false, key: 1 });
      expect((await ctx.store.getSchedule("resync"))?.lastResult?.message).toBe("created 12 tasks in 6 batches, the first due 2030-01-02T00:00:00.000Z");
      // A set interval wins over the shared-out period.
      await ctx.store.saveSchedule({ name: "hourly", taskType: "t", cron: "0 * * * *", fanOut: { keys: ["a", "b"], batches: 2, batchIntervalSeconds: 60 } });
      ctx.clock.set(at("2030-01-02T01:00:00.000Z"));
      await ctx.store.fireDueSchedules(FIRE);
      expect((await tasks("t")).map((t) => t.scheduledFor.toISOString())).toEqual(["2030-01-02T01:00:00.000Z", "2030-01-02T01:01:00.000Z"]);
    });

    it("cancels the pending tasks of a schedule's runs (a fan-out's later batches), not those held or finished, nor another schedule's", async () => {
      await ctx.store.saveSchedule({ ...RESYNC, cron: "0 0 * * *", fanOut: { keys: [1, 2, 3, 4], batches: 4 } });
      await ctx.store.saveSchedule({ name: "other", taskType: "analytics_refresh", cron: "0 0 * * *" });
      ctx.clock.set(at("2030-01-02T00:01:00.000Z"));
      const fired = await ctx.store.fireDueSchedules(FIRE);
      const ids = fired.find((f) => f.name === "resync")?.taskIds ?? [];
      const [otherId] = fired.find((f) => f.name === "other")?.taskIds ?? [];
      // Batch 1 is due: one worker holds key 1. The 06:00, 12:00 and 18:00 batches wait.
      const held = await claimOne(ctx.store, "w1", { taskTypes: ["product_resync"], limit: 1 });
      expect(held.id).toBe(ids[0]);
      const plain = await ctx.store.enqueue({ taskType: "product_resync" });

      expect(await ctx.store.setScheduleEnabled("resync", false)).toMatchObject({ enabled: false });
      const cancelled = await ctx.store.cancelScheduleTasks("resync");
      expect(cancelled).toEqual(ids.slice(1));
      const byId = new Map((await tasks()).map((t) => [t.id, t.status]));
      expect([...byId.entries()].filter(([, status]) => status === "cancelled").map(([id]) => id)).toEqual(ids.slice(1));
      expect([byId.get(held.id), byId.get(otherId), byId.get(plain.task.id)]).toEqual(["claimed", "pending", "pending"]);
      expect((await ctx.store.events(ids[3])).at(-1)).toMatchObject({ event: "cancelled", message: "cancelled with the pending tasks of schedule resync", createdAt: ctx.clock.now() });
      // Nothing left to cancel; the held task still completes under its lease.
      expect(await ctx.store.cancelScheduleTasks("resync")).toEqual([]);
      expect((await ctx.store.complete(held.id, held)).task.status).toBe("completed");
      const error = await ctx.store.cancelScheduleTasks("nope").catch((e) => e);
      expect(error).toBeInstanceOf(ScheduleNotFoundError);
    });

    it("a unique key template makes no task of a key whose earlier task is still pending: workers behind gather no pile of duplicates", async () => {
      await ctx.store.saveSchedule({ ...RESYNC, fanOut: { keys: [1, 2, 3] }, uniqueKey: "resync:{key}" });
      expect((await ctx.store.getSchedule("resync"))?.uniqueKey).toBe("resync:{key}");
      ctx.clock.set(at("2030-01-01T04:00:00.000Z"));
      const [first] = await ctx.store.fireDueSchedules(FIRE);
      expect(first.taskIds).toHaveLength(3);
      // Store 2's task runs and completes; the others still wait at the next tick.
      const done = (await tasks()).find((t) => t.params.key === 2) as Task;
      const lease = (await ctx.store.claimById(done.id, { workerId: "w1" })) as ClaimedTask;
      await ctx.store.complete(done.id, lease);
      ctx.clock.set(at("2030-01-01T08:00:00.000Z"));
      const [second] = await ctx.store.fireDueSchedules(FIRE);
      expect(second.taskIds).toHaveLength(1);
      expect((await ctx.store.get(second.taskIds[0]))?.params).toEqual({ full: false, key: 2 });
      expect((await ctx.store.getSchedule("resync"))?.lastResult).toMatchObject({
        tasksCreated: 1,
        message: "created 1 task, the first due 2030-01-01T08:00:00.000Z; 2 not made: a task of their unique key is still pending",
      });
      expect((await tasks()).filter((t) => t.status === "pending").map((t) => t.params.key).sort()).toEqual([1, 2, 3]);
      // A generation counts what it made; each key's batch names its task, made now or still pending.
      const generated = await ctx.store.generateTasks({ taskType: "product_resync", params: { full: false }, fanOut: { keys: [3, 4] }, uniqueKey: "resync:{key}" });
      expect(generated.created).toBe(1);
      expect(generated.message).toMatch(/^created 1 task, the first due .*; 1 not made: a task of their unique key is still pending$/);
      expect(generated.batches[0].taskIds).toHaveLength(2);
    });

    it("two concurrent passes on two stores create a tick's tasks once", async () => {
      await ctx.store.saveSchedule({ ...RESYNC, fanOut: { keys: [1, 2, 3, 4, 5] } });
      const other = await ctx.another();
      ctx.clock.set(at("2030-01-01T04:00:05.000Z"));
      const passes = await Promise.all([ctx.store.fireDueSchedules(FIRE), other.fireDueSchedules(FIRE), ctx.store.fireDueSchedules(FIRE), other.fireDueSchedules(FIRE)]);
      expect(passes.flat()).toHaveLength(1);
      expect(await tasks()).toHaveLength(5);
    });

    it("does not fire a tick again after a restart, even when its schedule is brought back to it (the tick's unique key)", async () => {
      await ctx.store.saveSchedule(RESYNC);
      ctx.clock.set(at("2030-01-01T04:00:00.000Z"));
      expect(await ctx.store.fireDueSchedules(FIRE)).toHaveLength(1);
      const restarted = await ctx.another();
      expect(await restarted.fireDueSchedules(FIRE)).toEqual([]);
      // Paused and resumed with the clock set back: the schedule waits for 04:00 again, which fired already.
      await restarted.setScheduleEnabled("resync", false);
      ctx.clock.set(at("2030-01-01T03:00:00.000Z"));
      expect((await restarted.setScheduleEnabled("resync", true)).nextRunAt).toEqual(at("2030-01-01T04:00:00.000Z"));
      ctx.clock.set(at("2030-01-01T04:00:10.000Z"));
      expect(await restarted.fireDueSchedules(FIRE)).toEqual([]);
      expect(await tasks()).toHaveLength(1);
      expect(await restarted.getSchedule("resync")).toMatchObject({ nextRunAt: at("2030-01-01T08:00:00.000Z"), lastResult: { tasksCreated: 1 } });
    });

    it("skips ticks missed while no coordinator ran, or fires one catch-up run now (run_once)", async () => {
      await ctx.store.saveSchedule(RESYNC);
      await ctx.store.saveSchedule({ ...RESYNC, name: "catch_up", missedTicks: "run_once", fanOut: { keys: [1, 2], batches: 2 } });
      // Down from before 04:00 to 13:00: the 04:00, 08:00 and 12:00 ticks were missed.
      ctx.clock.set(at("2030-01-01T13:00:00.000Z"));
      const fired = await ctx.store.fireDueSchedules(FIRE);
      expect(fired).toEqual([
        { name: "catch_up", tickAt: at("2030-01-01T12:00:00.000Z"), taskIds: expect.any(Array), skippedTicks: 2, error: null },
        { name: "resync", tickAt: null, taskIds: [], skippedTicks: 3, error: null },
      ]);
      // The catch-up run starts now; its batches keep their spacing.
      expect((await tasks()).map((t) => [t.params.key, t.scheduledFor.toISOString()])).toEqual([
        [1, "2030-01-01T13:00:00.000Z"],
        [2, "2030-01-01T15:00:00.000Z"],
      ]);
      expect(await ctx.store.getSchedule("resync")).toMatchObject({
        nextRunAt: at("2030-01-01T16:00:00.000Z"),
        lastRunAt: null,
        lastResult: { tasksCreated: 0, skippedTicks: 3, message: "skipped: the coordinator was down at the tick (missed_ticks: skip); 3 missed ticks passed over" },
      });
      expect(await ctx.store.getSchedule("catch_up")).toMatchObject({ nextRunAt: at("2030-01-01T16:00:00.000Z"), lastRunAt: at("2030-01-01T12:00:00.000Z") });
      // A tick found late but within the grace is on time, whatever the policy.
      ctx.clock.set(at("2030-01-01T16:03:00.000Z"));
      expect((await ctx.store.fireDueSchedules(FIRE)).map((f) => [f.name, f.tickAt])).toEqual([
        ["catch_up", at("2030-01-01T16:00:00.000Z")],
        ["resync", at("2030-01-01T16:00:00.000Z")],
      ]);
    });

    it("fans out over the keys in the results of a previous run (store discovery → one resync per store found)", async () => {
      await ctx.store.saveSchedule({ name: "discovery", taskType: "store_discovery", cron: "0 0 * * *" });
      await ctx.store.saveSchedule({ name: "resync", taskType: "product_resync", cron: "0 6 * * *", fanOut: { fromResults: { schedule: "discovery", field: "found.storeIds" } }, concurrencyKey: "store:{key}" });
      ctx.clock.set(at("2030-01-02T00:00:00.000Z"));
      await ctx.store.fireDueSchedules(FIRE);
      const discovery = await claimOne(ctx.store, "w1");
      await ctx.store.complete(discovery.id, discovery, { result: { found: { storeIds: [42, 7, 42, "x-9"] } } });
      ctx.clock.set(at("2030-01-02T06:00:00.000Z"));
      const [fired] = await ctx.store.fireDueSchedules(FIRE);
      expect(fired).toMatchObject({ name: "resync", error: null });
      expect((await tasks("product_resync")).map((t) => [t.params.key, t.concurrencyKey])).toEqual([
        [42, "store:42"],
        [7, "store:7"],
        ["x-9", "store:x-9"],
      ]);
      // The discovery's next run has nothing completed yet: the latest run with results still counts.
      ctx.clock.set(at("2030-01-03T00:00:00.000Z"));
      await ctx.store.fireDueSchedules(FIRE);
      ctx.clock.set(at("2030-01-03T06:00:00.000Z"));
      expect((await ctx.store.fireDueSchedules(FIRE))[0].taskIds).toHaveLength(3);
    });

    it("refuses to save a schedule whose tasks its registered type would refuse at every run, params or listed keys; keys from results are left to the run", async () => {
      const schema = { type: "object", properties: { key: { type: "integer" }, full: { type: "boolean" } }, required: ["key"], additionalProperties: false };
      await ctx.store.registerTaskType({ name: "product_resync", paramsSchema: schema });
      const without = await ctx.store.saveSchedule({ ...RESYNC, params: { bogus: 1 } }).catch((e) => e);
      expect(without).toBeInstanceOf(ValidationError);
      expect(without.message).toBe("Invalid params for product_resync v1: params.key: is required");
      const badKey = await ctx.store.saveSchedule({ ...RESYNC, fanOut: { keys: [1, "a"] } }).catch((e) => e);
      expect(badKey).toBeInstanceOf(ValidationError);
      // Through a server (connect("http://…")) too: the client says the server's message in the library's names.
      expect(badKey.message).toMatch(/^fanOut\.keys\.1 \("a"\): Invalid params for product_resync v1: params\.key/);
      expect(badKey.issues[0].path).toMatch(/^fanOut\.keys\.1\.params\.key/);
      expect(await ctx.store.listSchedules()).toEqual([]);
      expect((await ctx.store.saveSchedule({ ...RESYNC, fanOut: { keys: [1, 2] } })).created).toBe(true);
      await ctx.store.saveSchedule({ name: "discovery", taskType: "store_discovery", cron: "0 0 * * *" });
      expect((await ctx.store.saveSchedule({ ...RESYNC, name: "found", fanOut: { fromResults: { schedule: "discovery", field: "ids" } } })).created).toBe(true);
    });

    it("records a run whose tasks the task type refuses, with the reason, and does not retry it every pass", async () => {
      // Registered after the schedule was saved: its tasks are refused only when it runs.
      await ctx.store.saveSchedule(RESYNC);
      await ctx.store.registerTaskType({ name: "product_resync", paramsSchema: { type: "object", properties: { storeId: { type: "integer" } }, required: ["storeId"] } });
      ctx.clock.set(at("2030-01-01T04:00:00.000Z"));
      const [fired] = await ctx.store.fireDueSchedules(FIRE);
      // Said of the task, not of "item 0" of a batch the operator never wrote.
      expect(fired).toMatchObject({ tickAt: at("2030-01-01T04:00:00.000Z"), taskIds: [], error: "Invalid params for product_resync v1: params.storeId: is required" });
      expect(await ctx.store.getSchedule("resync")).toMatchObject({ nextRunAt: at("2030-01-01T08:00:00.000Z"), lastResult: { tasksCreated: 0, error: expect.stringMatching(/storeId/) } });
      expect(await ctx.store.fireDueSchedules(FIRE)).toEqual([]);
      expect(await tasks()).toEqual([]);
    });

    it("refuses a fan-out reading the results of a schedule that does not exist, saving nothing; a run finding it removed since says so in its error", async () => {
      const reading = (schedule: string): ScheduleDefinition => ({ ...RESYNC, fanOut: { fromResults: { schedule, field: "ids" } } });
      const refused = await ctx.store.saveSchedule(reading("discovry")).catch((e) => e);
      expect(refused).toBeInstanceOf(ValidationError);
      expect(refused.issues).toEqual([{ path: "fanOut.fromResults.schedule", message: 'no schedule "discovry"' }]);
      // Through a server (connect("http://…")) too: the client says the server's message in the library's names.
      expect(refused.message).toMatch(/^Invalid fanOut\.fromResults\.schedule: there is no schedule "discovry" whose last run's results could hold the keys; create "discovry" first/);
      expect(await ctx.store.listSchedules()).toEqual([]);
      // Naming itself is reading its own results: it exists once saved.
      expect((await ctx.store.saveSchedule(reading("resync"))).created).toBe(true);
      const saved = await ctx.store.getSchedule("resync");
      await expect(ctx.store.saveSchedule(reading("discovry"))).rejects.toThrow(ValidationError);
      expect(await ctx.store.getSchedule("resync")).toEqual(saved);

      // Removed after: the run records why it made nothing (it said "the fan-out found no keys"), once per tick.
      await ctx.store.saveSchedule({ name: "discovery", taskType: "store_discovery", cron: "0 0 * * *" });
      await ctx.store.saveSchedule(reading("discovery"));
      await ctx.store.removeSchedule("discovery");
      ctx.clock.set(at("2030-01-01T04:00:00.000Z"));
      const gone = /^Invalid fanOut\.fromResults\.schedule: the schedule "discovery" whose last run's results hold the keys does not exist \(removed since this schedule was saved\?\), so this run made no task; create "discovery" again/;
      const [fired] = await ctx.store.fireDueSchedules(FIRE);
      expect(fired).toMatchObject({ name: "resync", taskIds: [], error: expect.stringMatching(gone) });
      expect(await ctx.store.getSchedule("resync")).toMatchObject({ nextRunAt: at("2030-01-01T08:00:00.000Z"), lastResult: { tasksCreated: 0, error: expect.stringMatching(gone) } });
      expect(await ctx.store.fireDueSchedules(FIRE)).toEqual([]);
      expect(await tasks()).toEqual([]);
    });

    it("generates a fan-out's tasks now, in batches from a start; all or nothing", async () => {
      const result = await ctx.store.generateTasks({
        taskType: "product_resync",
        fanOut: { keys: [1, 2, 3, 4, 5], batches: 3, batchIntervalSeconds: 4 * 3600 },
        concurrencyKey: "store:{key}",
        startAt: at("2030-01-05T00:00:00.000Z"),
      });
      expect(result.created).toBe(5);
      expect(result.batches.map((b) => [b.batch, b.scheduledFor.toISOString(), b.taskIds.length])).toEqual([
        [1, "2030-01-05T00:00:00.000Z", 2],
        [2, "2030-01-05T04:00:00.000Z", 2],
        [3, "2030-01-05T08:00:00.000Z", 1],
      ]);
      expect(result.message).toBe("created 5 tasks in 3 batches, the first due 2030-01-05T00:00:00.000Z");
      // Runs differ by one key at most, and fewer keys than batches spread over the period: none is
      // left with the whole load while the last batches are empty.
      const sizes = async (keys: number, batches: number) =>
        (await ctx.store.generateTasks({ taskType: "spread", fanOut: { keys: Array.from({ length: keys }, (_, i) => i + 1), batches, batchIntervalSeconds: 60 } })).batches.map((b) => b.taskIds.length);
      expect(await sizes(7, 6)).toEqual([2, 1, 1, 1, 1, 1]);
      expect(await sizes(2, 6)).toEqual([1, 0, 0, 1, 0, 0]);
      expect(await sizes(305, 6)).toEqual([51, 51, 51, 51, 51, 50]);
      // Without a fan-out: one task, now.
      const one = await ctx.store.generateTasks({ taskType: "store_discovery", params: { region: "CA" } });
      expect((await ctx.store.get(one.batches[0].taskIds[0]))?.scheduledFor).toEqual(ctx.clock.now());
      const refused = [
        ctx.store.generateTasks({ taskType: "t", fanOut: { keys: [1, 2], batches: 2 } }),
        ctx.store.generateTasks({ taskType: "t", fanOut: { fromResults: { field: "ids" } } }),
        ctx.store.generateTasks({ taskType: "t", fanOut: { keys: [1, { a: 1 } as never] } }),
        ctx.store.generateTasks({ taskType: "t", params: { key: 0 }, fanOut: { keys: [1, 2] } }),
        ctx.store.generateTasks({ taskType: "t", fanOut: { keys: [1, 2] }, concurrencyKey: "store:{store}" }),
      ];
      for (const [i, message] of [/batchIntervalSeconds is needed/, /name the schedule whose last run's results/, /fanOut\.keys\.1/, /Invalid params\.key/, /has \{store\}, and the only placeholder is \{key\}/].entries()) {
        await expect(refused[i]).rejects.toThrow(message);
      }
      expect(await tasks("t")).toEqual([]);
      // A query of a schedule that does not exist is a typo, not a run that found no keys.
      const unknown = await ctx.store.generateTasks({ taskType: "t", fanOut: { fromResults: { schedule: "discovry", field: "ids" } } }).catch((e) => e);
      expect(unknown).toBeInstanceOf(ScheduleNotFoundError);
      expect(unknown.message).toMatch(/Schedule "discovry" does not exist/);
    });

    it("refuses a fan-out whose tasks a producer could not enqueue (due after 9999, a concurrency key over 255 characters), making none", async () => {
      const long = "x".repeat(250);
      const late = ctx.store.generateTasks({ taskType: "t", fanOut: { keys: [1, 2], batches: 2, batchIntervalSeconds: 366 * 86400 }, startAt: at("9999-06-01T00:00:00.000Z") });
      await expect(late).rejects.toThrow(/the last of 2 batches would be due \+010000-06-01T00:00:00\.000Z, after 9999-12-31/);
      const generated = ctx.store.generateTasks({ taskType: "t", fanOut: { keys: [1, long] }, concurrencyKey: "store:{key}" });
      await expect(generated).rejects.toThrow(/Invalid concurrencyKey: "store:\{key\}" with the key "x+" is 256 characters long, over 255/);
      expect(await tasks("t")).toEqual([]);
      // A schedule's keys are known when it is saved; those its run finds in results are refused at the tick, and recorded.
      const saved = ctx.store.saveSchedule({ ...RESYNC, fanOut: { keys: [long] }, concurrencyKey: "store:{key}" });
      await expect(saved).rejects.toThrow(ValidationError);
      expect(await ctx.store.listSchedules()).toEqual([]);
      await ctx.store.saveSchedule({ name: "discovery", taskType: "store_discovery", cron: "0 0 * * *" });
      await ctx.store.saveSchedule({ ...RESYNC, fanOut: { fromResults: { schedule: "discovery", field: "ids" } }, concurrencyKey: "store:{key}" });
      ctx.clock.set(at("2030-01-02T00:00:00.000Z"));
      await ctx.store.fireDueSchedules(FIRE);
      const discovery = await claimOne(ctx.store, "w1", { taskTypes: ["store_discovery"] });
      await ctx.store.complete(discovery.id, discovery, { result: { ids: [1, long] } });
      ctx.clock.set(at("2030-01-02T04:00:00.000Z"));
      const [fired] = await ctx.store.fireDueSchedules(FIRE);
      expect(fired).toMatchObject({ name: "resync", taskIds: [], error: expect.stringMatching(/over 255/) });
      expect(await tasks("product_resync")).toEqual([]);
    });
  });
}
