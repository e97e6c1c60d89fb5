import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { connect } from "../src/api/taskpool.js";
import { eventually } from "./helpers/logs.js";
import { removeSqliteFiles, sqlitePath } from "./helpers/stores.js";
import { CLI, envWith, taskpool, taskpoolIn } from "./helpers/cli.js";

/** A command expected to fail: its exit code and output. */
const failing = (...args: string[]) => taskpool(...args).then(() => ({ code: 0, stderr: "" }), (e: { code: number; stderr: string }) => e);

describe("taskpool schedules", () => {
  const path = sqlitePath();
  const db = `sqlite:${path}`;
  afterEach(() => removeSqliteFiles(path));

  it("adds, lists (table and --json), pauses, resumes and removes a schedule", async () => {
    const added = await taskpool("schedules", "add", "resync", "--type", "product_resync", "--cron", "0 0 * * *", "--timezone", "America/Los_Angeles",
      "--keys", "101,102,x-3", "--batches", "3", "--concurrency-key", "store:{key}", "--unique-key", "resync:{key}", "--params", '{"full":true}', "--db", db);
    expect(added.stdout).toMatch(/^Created schedule resync \(product_resync, 0 0 \* \* \* America\/Los_Angeles\): next run \d{4}-\d\d-\d\dT08:00:00\.000Z\n$/);

    const table = (await taskpool("schedules", "list", "--db", db)).stdout.split("\n");
    expect(table[0]).toMatch(/^NAME\s+TASK TYPE\s+CRON\s+STATE\s+FAN-OUT\s+NEXT RUN\s+LAST RUN\s+LAST RESULT$/);
    expect(table[1]).toMatch(/^resync\s+product_resync\s+0 0 \* \* \* \(America\/Los_Angeles\)\s+running\s+3 keys \/ 3 batches\s+\d{4}-\d\d-\d\dT08:00:00Z?\S*\s+-\s+-$/);

    const [json] = JSON.parse((await taskpool("schedules", "list", "--json", "--db", db)).stdout);
    expect(json).toMatchObject({ name: "resync", params: { full: true }, fanOut: { keys: [101, 102, "x-3"], batches: 3 }, concurrencyKey: "store:{key}", uniqueKey: "resync:{key}", enabled: true, lastRunAt: null });

    expect((await taskpool("schedules", "pause", "resync", "--db", db)).stdout).toBe("Paused schedule resync (product_resync, 0 0 * * * America/Los_Angeles): paused\n");
    const resumed = JSON.parse((await taskpool("schedules", "resume", "resync", "--json", "--db", db)).stdout);
    expect(resumed).toMatchObject({ name: "resync", enabled: true, nextRunAt: json.nextRunAt });
    expect((await taskpool("schedules", "remove", "resync", "--db", db)).stdout).toMatch(/^Removed schedule resync \([^)]*\)\n$/);
    expect((await taskpool("schedules", "list", "--db", db)).stdout).toMatch(/^No schedules/);
  }, 60_000);

  it("pause --cancel-pending stops a schedule and its later batches; cancel-pending alone, and with --json", async () => {
    await taskpool("schedules", "add", "resync", "--type", "product_resync", "--cron", "* * * * * *", "--keys", "1,2,3", "--batches", "3", "--batch-interval", "3600", "--db", db);
    // One run, as the coordinator makes it: batch 1 due now, the others in 1 and 2 hours.
    const pool = await connect(db);
    try {
      await eventually(async () => (await pool.coordinator().fireSchedules()).length === 1, 5000, "the schedule to fire");
    } finally {
      await pool.close();
    }
    const paused = await taskpool("schedules", "pause", "resync", "--cancel-pending", "--db", db);
    expect(paused.stdout).toBe("Paused schedule resync (product_resync, * * * * * *): paused\nCancelled 3 pending tasks of schedule resync: 1, 2, 3\n");
    expect((await taskpool("tasks", "list", "--status", "cancelled", "--json", "--db", db)).stdout).toMatch(/"id": 3/);
    expect(JSON.parse((await taskpool("schedules", "cancel-pending", "resync", "--json", "--db", db)).stdout)).toEqual({ cancelled: [] });
    expect((await taskpool("schedules", "remove", "resync", "--cancel-pending", "--db", db)).stdout).toMatch(/^Removed schedule resync \([^)]*\)\nCancelled 0 pending tasks of schedule resync\n$/);
  }, 60_000);

  it("keeps each --keys key as written: only a whole number written as JSON writes it becomes an integer", async () => {
    const added = await taskpool("schedules", "add", "resync", "--type", "t", "--cron", "@daily", "--keys", "101,-7,007,-0,+5,9007199254740993", "--json", "--db", db);
    expect(JSON.parse(added.stdout).fanOut.keys).toEqual([101, -7, "007", "-0", "+5", "9007199254740993"]);
  }, 60_000);

  it("says what was wrong in one line and exits 1; --help has an example", async () => {
    // The database first: pausing reads it, and a command that reads refuses a file that is not there.
    await taskpool("migrate", "--db", db);
    const [badCron, unknown, badParams, badPolicy, { stdout: help }] = await Promise.all([
      failing("schedules", "add", "x", "--type", "t", "--cron", "0 25 * * *", "--db", db),
      failing("schedules", "pause", "nope", "--db", db),
      failing("schedules", "add", "x", "--type", "t", "--cron", "@daily", "--params", "{oops", "--db", db),
      failing("schedules", "add", "x", "--type", "t", "--cron", "@daily", "--missed-ticks", "later", "--db", db),
      taskpool("schedules", "add", "--help"),
    ]);
    expect(badCron.code).toBe(1);
    expect(badCron.stderr).toMatch(/^taskpool: Invalid --cron: "0 25 \* \* \*": Invalid value for hour: 25 \(5 fields: minute hour/);
    expect(unknown.stderr).toBe('taskpool: Schedule "nope" does not exist (taskpool schedules list shows them)\n');
    expect(badParams.stderr).toMatch(/--params <json>' argument '\{oops' is invalid\. not valid JSON/);
    expect(badPolicy.stderr).toMatch(/Allowed choices are skip, run_once/);
    for (const failure of [badCron, unknown, badParams, badPolicy]) expect(failure.stderr).not.toMatch(/\n\s+at /);
    expect((await taskpool("schedules", "list", "--db", db)).stdout).toMatch(/^No schedules/);
    expect(help).toMatch(/Example \(seed 004's resync/);
    expect(help).toMatch(/--batches 6 --concurrency-key 'store:\{key\}' --unique-key 'resync:\{key\}'/);
    // An option left out is named as the option, before any database is opened: it was the library's
    // "Invalid schedule: taskType: Expected required property".
    const never = `sqlite:${path}.never`;
    const [noType, noCron] = await Promise.all([failing("schedules", "add", "x", "--cron", "@daily", "--db", never), failing("schedules", "add", "x", "--type", "t", "--db", never)]);
    expect([noType.code, noType.stderr]).toEqual([1, 'taskpool: schedules add needs --type <task-type> (or "taskType" in its --file definition)\n']);
    expect([noCron.code, noCron.stderr]).toEqual([1, 'taskpool: schedules add needs --cron <expression> (or "cron" in its --file definition)\n']);
    // A fan-out's flags without its keys, or with two sources of them, named as the flags: it was
    // "Invalid fanOut: give either keys (a list) or fromResults (…)".
    const [noKeys, twoSources] = await Promise.all([
      failing("schedules", "add", "s1", "--type", "crawl", "--cron", "0 * * * *", "--batches", "3", "--db", never),
      failing("schedules", "add", "s1", "--type", "crawl", "--cron", "0 * * * *", "--keys", "1,2", "--from-results", "discovery:ids", "--db", never),
    ]);
    expect([noKeys.code, noKeys.stderr]).toEqual([1, "taskpool: --batches and --batch-interval spread a fan-out's keys: give them with --keys <list> or --from-results <[schedule:]field>\n"]);
    expect([twoSources.code, twoSources.stderr]).toEqual([1, "taskpool: a fan-out takes its keys from --keys or from --from-results, not both\n"]);
    expect(existsSync(`${path}.never`)).toBe(false);
    // The library's refusals name the flag typed; a field from --file keeps its own name.
    const file = join(tmpdir(), `taskpool-schedule-${process.pid}.json`);
    writeFileSync(file, JSON.stringify({ taskType: "crawl", cron: "@daily", concurrencyKey: "store:{id}" }));
    // A key source given as a flag replaces the file's: --from-results over the file's keys is not two sources.
    const withKeys = join(tmpdir(), `taskpool-schedule-keys-${process.pid}.json`);
    writeFileSync(withKeys, JSON.stringify({ taskType: "crawl", cron: "@daily", fanOut: { keys: [1, 2, 3], batches: 3 } }));
    try {
      const [twice, badTemplate, fromFile, noSuchSchedule, overFileKeys] = await Promise.all([
        failing("schedules", "add", "s1", "--type", "crawl", "--cron", "@daily", "--keys", "7,7", "--db", db),
        failing("schedules", "add", "s1", "--type", "crawl", "--cron", "@daily", "--keys", "7", "--concurrency-key", "store:{id}", "--db", db),
        failing("schedules", "add", "s1", "--file", file, "--keys", "7", "--db", db),
        failing("schedules", "add", "s1", "--type", "crawl", "--cron", "@daily", "--from-results", "discovry:ids", "--db", db),
        failing("schedules", "add", "s1", "--file", withKeys, "--from-results", "discovry:ids", "--db", db),
      ]);
      expect(twice.stderr).toBe("taskpool: Invalid schedule: --keys: Expected array elements to be unique (got a list of 2)\n");
      expect(badTemplate.stderr).toMatch(/^taskpool: Invalid --concurrency-key: "store:\{id\}" has \{id\}/);
      expect(fromFile.stderr).toMatch(/^taskpool: Invalid concurrencyKey: "store:\{id\}" has \{id\}/);
      expect(noSuchSchedule.stderr).toMatch(/^taskpool: Invalid --from-results: there is no schedule "discovry" whose last run's results could hold the keys; create "discovry" first/);
      expect(overFileKeys.stderr).toMatch(/^taskpool: Invalid --from-results: there is no schedule "discovry"/);
    } finally {
      rmSync(withKeys, { force: true });
      rmSync(file, { force: true });
    }
  }, 60_000);

  it("runs over a server too, as the other operator commands do: --url, or TASKPOOL_URL with nothing written locally", async () => {
    const serve = spawn(process.execPath, [CLI, "serve", "--port", "0", "--no-coordinator", "--db", db], { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    serve.stdout.on("data", (d) => (output += d));
    serve.stderr.on("data", (d) => (output += d));
    const dir = mkdtempSync(join(tmpdir(), "taskpool-schedules-"));
    try {
      const [, url] = await eventually(() => /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output), 20_000, "the server to listen");
      // In an empty directory: the default sqlite:./taskpool.db would appear there.
      const added = await taskpoolIn(dir, envWith({ TASKPOOL_URL: url }), "schedules", "add", "nightly", "--type", "report", "--cron", "0 3 * * *");
      expect(added.stdout).toMatch(/^Created schedule nightly \(report, 0 3 \* \* \*\): next run /);
      expect((await taskpool("schedules", "pause", "nightly", "--url", url)).stdout).toMatch(/^Paused schedule nightly /);
      expect(readdirSync(dir)).toEqual([]);
      expect((await taskpool("schedules", "list", "--db", db)).stdout).toMatch(/\nnightly\s+report\s+0 3 \* \* \*\s+paused\s/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      serve.kill("SIGTERM");
      await new Promise((resolve) => serve.once("exit", resolve));
    }
  }, 60_000);
});
