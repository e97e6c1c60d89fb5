import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { postgresKind, sqliteKind } from "../helpers/stores.js";
import { useServer } from "./harness.js";

const RESYNC = { name: "resync", task_type: "product_resync", params: { full: false }, cron: "0 0 * * *", fan_out: { keys: [1, 2, 3, 4, 5, 6], batches: 6 }, concurrency_key: "store:{key}" };

describe.each([sqliteKind, postgresKind])("schedules over HTTP on $name", (kind) => {
  const s = useServer(kind, { auth: "keys" });

  it("creates (201), updates (200), reads, pauses, resumes and removes a schedule, in snake_case; producers read, admins write", async () => {
    const admin = (await s.pool.createApiKey({ scope: "admin" })).key;
    const producer = (await s.pool.createApiKey({ scope: "producer" })).key;
    s.key = admin;

    const created = await s.call("POST", "/api/schedules", RESYNC);
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      success: true,
      created: true,
      schedule: {
        ...RESYNC,
        timezone: "UTC",
        enabled: true,
        unique_key: null,
        priority: null,
        missed_ticks: "skip",
        next_run_at: "2030-01-02T00:00:00.000Z",
        last_run_at: null,
        last_result: null,
        created_at: "2030-01-01T00:00:00.000Z",
        updated_at: "2030-01-01T00:00:00.000Z",
      },
    });
    const updated = await s.call("POST", "/api/schedules", { ...RESYNC, timezone: "America/Los_Angeles", missed_ticks: "run_once" });
    expect(updated).toMatchObject({ status: 200, body: { created: false, schedule: { missed_ticks: "run_once", next_run_at: "2030-01-01T08:00:00.000Z" } } });

    expect((await s.call("GET", "/api/schedules", undefined, { key: producer })).body.schedules.map((x: { name: string }) => x.name)).toEqual(["resync"]);
    expect((await s.call("GET", "/api/schedules/resync", undefined, { key: producer })).body.schedule.fan_out).toEqual(RESYNC.fan_out);
    const forbidden = await s.call("POST", "/api/schedules/resync/pause", undefined, { key: producer });
    expect(forbidden).toMatchObject({ status: 403, body: { error: "forbidden" } });
    expect(forbidden.body.message).toMatch(/^This API key's scope is producer; POST \/api\/schedules\/:name\/pause needs admin/);

    expect((await s.call("POST", "/api/schedules/resync/pause")).body.schedule).toMatchObject({ enabled: false, next_run_at: null });
    s.clock.set(new Date("2030-01-01T09:00:00.000Z"));
    expect((await s.call("POST", "/api/schedules/resync/resume")).body.schedule).toMatchObject({ enabled: true, next_run_at: "2030-01-02T08:00:00.000Z" });
    expect((await s.call("DELETE", "/api/schedules/resync")).body.schedule.name).toBe("resync");
    const gone = await s.call("GET", "/api/schedules/resync");
    // The route that lists them, not the CLI's command: an HTTP caller may have no CLI.
    const unknown = { success: false, error: "not_found", message: 'Schedule "resync" does not exist (GET /api/schedules shows them)' };
    expect(gone).toMatchObject({ status: 404, body: unknown });
    expect(await s.call("DELETE", "/api/schedules/resync")).toMatchObject({ status: 404, body: unknown });
  });

  it("shows what the coordinator fired: next run, last run and last result", async () => {
    s.key = (await s.pool.createApiKey({ scope: "admin" })).key;
    await s.call("POST", "/api/schedules", RESYNC);
    s.clock.set(new Date("2030-01-02T00:00:20.000Z"));
    await s.pool.coordinator({ logger: pino({ level: "silent" }) }).fireSchedules();
    const { schedule } = (await s.call("GET", "/api/schedules/resync")).body;
    expect(schedule).toMatchObject({
      next_run_at: "2030-01-03T00:00:00.000Z",
      last_run_at: "2030-01-02T00:00:00.000Z",
      last_result: { tick_at: "2030-01-02T00:00:00.000Z", fired_at: "2030-01-02T00:00:20.000Z", tasks_created: 6, skipped_ticks: 0, error: null, message: "created 6 tasks in 6 batches, the first due 2030-01-02T00:00:00.000Z" },
    });
  });

  it("refuses bad definitions with 400 naming the field as the request names it, and stores nothing", async () => {
    s.key = (await s.pool.createApiKey({ scope: "admin" })).key;
    const bad: [unknown, string, RegExp][] = [
      [{ ...RESYNC, cron: "0 25 * * *" }, "cron", /Invalid cron: "0 25 \* \* \*": Invalid value for hour: 25/],
      [{ ...RESYNC, timezone: "Europe/Atlantis" }, "timezone", /not an IANA time zone/],
      [{ ...RESYNC, fan_out: { keys: [1], from_results: { field: "ids" } } }, "fan_out", /give either keys/],
      [{ ...RESYNC, fan_out: { keys: [1], batch_interval_seconds: 0 } }, "fan_out.batch_interval_seconds", /Expected integer to be greater or equal to 1/],
      [{ ...RESYNC, missed_ticks: "always" }, "missed_ticks", /must be one of skip, run_once/],
      [{ ...RESYNC, every: "day" }, "every", /Unexpected property/],
    ];
    for (const [body, path, message] of bad) {
      const answer = await s.call("POST", "/api/schedules", body);
      expect(answer.status, path).toBe(400);
      expect(answer.body.error).toBe("validation_error");
      expect(answer.body.issues.map((i: { path: string }) => i.path), path).toContain(path);
      expect(answer.body.message, path).toMatch(message);
    }
    expect((await s.call("GET", "/api/schedules")).body.schedules).toEqual([]);
  });

  it("a refusal names fields as the caller sent them: the wire's names over HTTP, the library's in the library", async () => {
    s.key = (await s.pool.createApiKey({ scope: "admin" })).key;
    const refused = async (path: string, body: unknown) => {
      const answer = await s.call("POST", path, body);
      expect(answer.status).toBe(400);
      return { message: answer.body.message, issues: answer.body.issues };
    };
    expect(await refused("/api/tasks/generate/resync", {})).toEqual({
      message: "Invalid resync: give the stores either as keys (a list) or as from_results (a query of a schedule's last run's results), not both or neither",
      issues: [{ path: "keys", message: "needs exactly one of keys, from_results" }],
    });
    expect(await refused("/api/schedules", { ...RESYNC, fan_out: {} })).toEqual({
      message: "Invalid fan_out: give either keys (a list) or from_results (a query of a previous run's results), not both or neither",
      issues: [{ path: "fan_out", message: "needs exactly one of keys, from_results" }],
    });
    expect(await refused("/api/schedules", { ...RESYNC, fan_out: { keys: [1, "1"] } })).toEqual({
      message: 'Invalid fan_out.keys.1: 1 and "1" are one key written twice (the same as text, as {key} puts it in a concurrency key); list it once',
      issues: [{ path: "fan_out.keys.1", message: "the same key as an earlier one" }],
    });
    // A fan-out reading the results of a schedule that does not exist: a 400 like the definition's other checks.
    expect(await refused("/api/schedules", { ...RESYNC, fan_out: { from_results: { schedule: "discovry", field: "ids" } } })).toEqual({
      message:
        'Invalid fan_out.from_results.schedule: there is no schedule "discovry" whose last run\'s results could hold the keys; create "discovry" first, ' +
        "correct the name (GET /api/schedules shows them), or leave schedule out to read this schedule's own results",
      issues: [{ path: "fan_out.from_results.schedule", message: 'no schedule "discovry"' }],
    });
    expect(await refused("/api/tasks", { task_type: "crawl", scheduled_for: "2030-01-02T00:00:00Z", delay_seconds: 5 })).toMatchObject({
      message: "Invalid task: scheduled_for and delay_seconds are both given: give one or the other",
    });
    // A generation's request sends the keys as keys (its fan-out is the server's): refusals say keys.
    expect(await refused("/api/tasks/generate/resync", { keys: [1, "1"] })).toEqual({
      message: 'Invalid keys.1: 1 and "1" are one key written twice (the same as text, as {key} puts it in a concurrency key); list it once',
      issues: [{ path: "keys.1", message: "the same key as an earlier one" }],
    });
    expect(await refused("/api/tasks/generate/discovery", { keys: ["k".repeat(256)] })).toMatchObject({
      message: expect.stringMatching(/^Invalid request body: keys\.0: Expected string length less or equal to 255 \(got "kkk/),
      issues: [{ path: "keys.0", message: expect.stringMatching(/^Expected string length less or equal to 255/) }],
    });
    await s.pool.registerTaskType({ name: "typed", paramsSchema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } });
    expect(await refused("/api/tasks/generate/resync", { keys: [7, 8], task_type: "typed" })).toEqual({
      message: "keys.0 (7): Invalid params for typed v1: params.n: is required",
      issues: [{ path: "keys.0.params.n", message: "is required" }],
    });
    expect(await refused("/api/tasks/generate/discovery", { task_type: "typed", params: { n: "x" } })).toEqual({
      message: "Invalid params for typed v1: params.n: must be integer",
      issues: [{ path: "params.n", message: "must be integer" }],
    });
    await expect(s.pool.generate({ taskType: "typed", fanOut: { keys: ["CA"] } })).rejects.toMatchObject({
      message: 'fanOut.keys.0 ("CA"): Invalid params for typed v1: params.n: is required',
      issues: [{ path: "fanOut.keys.0.params.n", message: "is required" }],
    });
    expect((await s.pool.counts()).byStatus.pending).toBe(0);
    // The library's callers know the fields by the library's names.
    const definition = { name: "resync", taskType: "product_resync", cron: "0 0 * * *" };
    await expect(s.pool.schedule({ ...definition, fanOut: {} })).rejects.toMatchObject({
      message: "Invalid fanOut: give either keys (a list) or fromResults (a query of a previous run's results), not both or neither",
      issues: [{ path: "fanOut", message: "needs exactly one of keys, fromResults" }],
    });
    await expect(s.pool.schedule({ ...definition, fanOut: { keys: [1, "1"] } })).rejects.toMatchObject({
      message: expect.stringMatching(/^Invalid fanOut\.keys\.1: 1 and "1" are one key/),
    });
    await expect(s.pool.schedule({ ...definition, fanOut: { fromResults: { schedule: "discovry", field: "ids" } } })).rejects.toMatchObject({
      message: expect.stringMatching(/^Invalid fanOut\.fromResults\.schedule: there is no schedule "discovry"/),
      issues: [{ path: "fanOut.fromResults.schedule", message: 'no schedule "discovry"' }],
    });
    expect((await s.call("GET", "/api/schedules")).body.schedules).toEqual([]);
  });

  it("generates the day's resync batches (seed 004: 6 batches, one every 4 hours) and discovery tasks", async () => {
    s.key = (await s.pool.createApiKey({ scope: "producer" })).key;
    const stores = Array.from({ length: 300 }, (_, i) => i + 1);
    const resync = await s.call("POST", "/api/tasks/generate/resync", { keys: stores, date: "2030-01-05" });
    expect(resync.status).toBe(201);
    expect(resync.body).toMatchObject({ success: true, created: 300, message: "created 300 tasks in 6 batches, the first due 2030-01-05T00:00:00.000Z" });
    // The seed's table: batch 1 at 00:00 with stores 1-50, batch 2 at 04:00 with 51-100, …
    expect(resync.body.batches.map((b: { batch: number; scheduled_for: string; task_ids: number[] }) => [b.batch, b.scheduled_for.slice(11, 16), b.task_ids.length])).toEqual([
      [1, "00:00", 50],
      [2, "04:00", 50],
      [3, "08:00", 50],
      [4, "12:00", 50],
      [5, "16:00", 50],
      [6, "20:00", 50],
    ]);
    const first = (await s.call("GET", `/api/tasks/${resync.body.batches[1].task_ids[0]}`)).body.task;
    expect(first).toMatchObject({ task_type: "product_resync", params: { key: 51 }, concurrency_key: "store:51", scheduled_for: "2030-01-05T04:00:00.000Z" });

    // The day's batches made again under unique keys make nothing: 200, not 201.
    const keyed = { keys: [1, 2], date: "2030-01-06", unique_key: "resync:{key}" };
    expect(await s.call("POST", "/api/tasks/generate/resync", keyed)).toMatchObject({ status: 201, body: { created: 2 } });
    expect(await s.call("POST", "/api/tasks/generate/resync", keyed)).toMatchObject({ status: 200, body: { created: 0 } });
    // So does a query of a schedule that has not run yet: it finds no keys.
    await s.pool.schedule({ name: "discovery", taskType: "store_discovery", cron: "0 0 * * *" });
    const unrun = await s.call("POST", "/api/tasks/generate/resync", { from_results: { schedule: "discovery", field: "store_ids" } });
    expect(unrun).toMatchObject({ status: 200, body: { created: 0, message: "created no task: the fan-out found no keys" } });

    const one = await s.call("POST", "/api/tasks/generate/discovery", {});
    expect(one).toMatchObject({ status: 201, body: { created: 1, batches: [{ batch: 1, scheduled_for: "2030-01-01T00:00:00.000Z" }] } });
    const regions = await s.call("POST", "/api/tasks/generate/discovery", { keys: ["CA", "OR"], params: { depth: 2 } });
    expect(regions.body.created).toBe(2);
    expect((await s.call("GET", `/api/tasks/${regions.body.batches[0].task_ids[1]}`)).body.task).toMatchObject({ task_type: "store_discovery", params: { depth: 2, key: "OR" } });
    expect((await s.pool.counts()).byType).toEqual({ product_resync: { pending: 302 }, store_discovery: { pending: 3 } });

    const bad: [unknown, RegExp][] = [
      [{}, /give the stores either as keys/],
      [{ keys: [1], date: "2030-02-30" }, /"2030-02-30" is not a day of the calendar/],
      [{ keys: [1], date: "tomorrow" }, /date: must be a day as YYYY-MM-DD/],
      // Named by the field sent, not by the generation's start_at it becomes.
      [{ keys: [1], date: "1969-12-31" }, /^Invalid date: "1969-12-31" is before 1970-01-01, the earliest day a task may be due$/],
      [{ keys: [], batches: 6 }, /keys: Expected array length to be greater or equal to 1/],
      [{ from_results: { field: "ids" } }, /name the schedule whose last run's results hold the keys/],
    ];
    for (const [body, message] of bad) {
      const answer = await s.call("POST", "/api/tasks/generate/resync", body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.body.message).toMatch(message);
    }
    // A field the request does not have is no help: the query is from_results, at the top of the body.
    const unnamed = await s.call("POST", "/api/tasks/generate/resync", { from_results: { field: "ids" } });
    expect(unnamed.body).toMatchObject({ message: expect.stringMatching(/^Invalid from_results\.schedule: /), issues: [{ path: "from_results.schedule" }] });
    expect((await s.pool.counts()).byStatus.pending).toBe(305);
  });
});
