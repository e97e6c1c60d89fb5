import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, openSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { connect, type Taskpool } from "../src/api/taskpool.js";
import { TaskpoolCommand } from "../src/cli/database.js";
import { capacityCommand } from "../src/cli/capacity.js";
import { reassignmentsCommand } from "../src/cli/reassignments.js";
import { recountCommand } from "../src/cli/recount.js";
import { tasksCommand } from "../src/cli/tasks.js";
import { workersCommand } from "../src/cli/workers.js";
import { ManualClock } from "../src/core/clock.js";
import { dropSchema, PG_URL, removeSqliteFiles, sqlitePath } from "./helpers/stores.js";
import { CLI, type CliRun as Run, taskpoolRun as taskpool } from "./helpers/cli.js";

/** The records as the CLI's --json prints them: dates as ISO strings. */
const asJson = (value: unknown) => JSON.parse(JSON.stringify(value));

/** One line on stderr, starting with the program name, and no stack trace. */
function expectOneLine(run: Run, message: RegExp): void {
  expect(run.code, run.stderr).toBe(1);
  expect(run.stderr.trim()).toMatch(message);
  expect(run.stderr.trim().split("\n")).toHaveLength(1);
  expect(run.stderr).not.toMatch(/\n\s+at /);
}

/**
 * Four product_resync/analytics_refresh tasks in every state an operator looks at: 1 running with a
 * checkpoint and progress, 2 pending, 3 failed for good, 4 completed with a result.
 */
async function seedTasks(pool: Taskpool) {
  const p = pool.protocol;
  await p.workerHeartbeat({ workerId: "w1", roles: ["product_resync", "analytics_refresh"], capacity: 4, currentLoad: 1, tasksProcessed: 2, hostname: "host-a", pid: 4242 });
  const running = await pool.enqueue("product_resync", { storeId: 1 }, { priority: 5, concurrencyKey: "store:1" });
  const pending = await pool.enqueue("product_resync", { storeId: 2 });
  const failed = await pool.enqueue("analytics_refresh", {}, { maxAttempts: 1 });
  const completed = await pool.enqueue("product_resync", { storeId: 4 });
  const [r] = await p.claim({ workerId: "w1", taskTypes: ["product_resync"], start: true });
  for (const page of [1, 2, 3]) await p.checkpoint(r.id, r, { page });
  await p.progress(r.id, r, 0.4);
  const [f] = await p.claim({ workerId: "w1", taskTypes: ["analytics_refresh"] });
  await p.fail(f.id, f, { error: "view refresh timed out", stack: "Error: view refresh timed out\n    at refresh (views.js:7:3)" });
  const c = await p.claimById(completed.id, { workerId: "w1" });
  await p.complete(c.id, c, { result: { products: 12 } });
  return { running, pending, failed, completed };
}

describe("taskpool operator CLI", () => {
  const path = sqlitePath();
  const db = `sqlite:${path}`;
  afterEach(() => removeSqliteFiles(path));

  it("tasks retry --reset-checkpoint starts a failed task afresh", async () => {
    const pool = await connect(db);
    let id: number;
    try {
      id = (await pool.enqueue("resync", {}, { maxAttempts: 1 })).id;
      const [lease] = await pool.protocol.claim({ workerId: "w1" });
      await pool.protocol.checkpoint(lease.id, lease, { cursor: "bad" });
      await pool.protocol.fail(lease.id, lease, { error: "cursor expired" });
    } finally {
      await pool.close();
    }
    const retried = JSON.parse((await taskpool("tasks", "retry", String(id), "--reset-checkpoint", "--json", "--db", db)).stdout);
    expect(retried).toMatchObject([{ id, task: { status: "pending", checkpoint: null } }]);
  }, 30_000);

  it("tasks list, show, retry and cancel on real tasks, as tables and as --json", async () => {
    const pool = await connect(db);
    let ids: Awaited<ReturnType<typeof seedTasks>>;
    try {
      ids = await seedTasks(pool);
    } finally {
      await pool.close();
    }
    const { running, pending, failed, completed } = ids;

    const [list, filtered, firstPage, show, showJson, showFailed] = await Promise.all([
      taskpool("tasks", "list", "--db", db),
      taskpool("tasks", "list", "--worker", "w1", "--status", "failed,completed", "--json", "--db", db),
      taskpool("tasks", "list", "--status", "pending", "--status", "running", "--order", "oldest", "--limit", "1", "--db", db),
      taskpool("tasks", "show", String(running.id), "--db", db),
      taskpool("tasks", "show", String(failed.id), "--json", "--db", db),
      taskpool("tasks", "show", String(failed.id), "--db", db),
    ]);
    const lines = list.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^ID\s+TYPE\s+STATUS\s+PRIORITY\s+ATTEMPTS\s+WORKER\s+PROGRESS\s+CREATED\s+UPDATED$/);
    expect(lines.slice(1).map((l) => Number(l.trim().split(/\s+/)[0]))).toEqual([completed.id, failed.id, pending.id, running.id]); // newest first
    expect(list.stdout).toMatch(new RegExp(`\\n\\s*${running.id}  product_resync\\s+running\\s+5\\s+1/3\\s+w1\\s+40%`));
    expect(list.stdout).toMatch(new RegExp(`\\n\\s*${failed.id}  analytics_refresh\\s+failed\\s+0\\s+1/1\\s+w1\\s+-`));

    const page = JSON.parse(filtered.stdout);
    expect(page.tasks.map((t: { id: number; status: string }) => [t.id, t.status])).toEqual([[completed.id, "completed"], [failed.id, "failed"]]);
    expect(page.tasks[0]).toMatchObject({ taskType: "product_resync", result: { products: 12 }, workerId: "w1" });
    expect(page.nextCursor).toBeNull();

    expect(firstPage.stdout).toMatch(new RegExp(`\\n\\s*${running.id}  product_resync\\s+running`));
    const cursor = firstPage.stdout.match(/More: run the same command \(its filters and --order too\) with --cursor (\S+)/)?.[1];
    expect(cursor).toBeDefined();
    const secondPage = JSON.parse((await taskpool("tasks", "list", "--status", "pending,running", "--order", "oldest", "--limit", "1", "--cursor", cursor!, "--json", "--db", db)).stdout);
    expect(secondPage.tasks.map((t: { id: number }) => t.id)).toEqual([pending.id]);

    expect(show.stdout).toMatch(new RegExp(`^Task ${running.id}\\n`));
    for (const field of [/type\s+product_resync\n/, /status\s+running\n/, /params\s+\{"storeId":1\}\n/, /concurrency key\s+store:1\n/, /progress\s+40%\n/, /checkpoint\s+\{"page":3\}\n/, /error\s+-\n/]) {
      expect(show.stdout).toMatch(field);
    }
    // The three checkpoints in a row are one row, with the last one's data.
    expect(show.stdout).toMatch(
      /Events \(5, oldest first; runs of checkpoints as one row, with the last one's time and data\):\n\s+TIME\s+EVENT\s+FROM\s+TO\s+MESSAGE\s+DATA\n.*created.*\n.*claimed\s+-\s+w1\s+-\s+\{"attempt":1,"started":true\}\n.*checkpoint ×3\s+-\s+w1\s+-\s+\{"page":3\}\n$/,
    );

    // The failure's stack is printed below the timeline, a line each, not packed into its data cell.
    expect(showFailed.stdout).toMatch(/failed\s+w1\s+-\s+view refresh timed out\s+\{"attempt":1,"max_attempts":1,"retry_at":null,"stack":"\(below\)"\}\n/);
    expect(showFailed.stdout).toMatch(/\n\nStack of the last failure \(\S+Z\):\n {2}Error: view refresh timed out\n {6}at refresh \(views\.js:7:3\)\n$/);

    const shown = JSON.parse(showJson.stdout);
    expect(shown.task).toMatchObject({ id: failed.id, status: "failed", errorMessage: "view refresh timed out", attempts: 1 });
    expect(shown.events.map((e: { event: string }) => e.event)).toEqual(["created", "claimed", "failed"]);

    // Several ids: each is acted on and reported; the command then fails naming the refused ones and why.
    const retry = await taskpool("tasks", "retry", String(failed.id), String(completed.id), "999", "--db", db);
    expectOneLine(retry, new RegExp(`^taskpool: 2 of 3 tasks not retried: ${completed.id} \\(Cannot retry task ${completed.id}: it is completed \\(only failed tasks can be retried\\)\\); 999 \\(Task 999 does not exist\\)`));
    expect(retry.stdout).toMatch(new RegExp(`^\\s*ID\\s+TYPE\\s+STATUS\\s+OUTCOME\\n\\s*${failed.id}  analytics_refresh\\s+pending\\s+retried\\n`));
    expect(retry.stdout).toMatch(/999 {2}-\s+-\s+not retried: Task 999 does not exist/);

    // A bad id anywhere in the list refuses the whole command before any task is touched.
    const [cancel, typo] = await Promise.all([
      taskpool("tasks", "cancel", String(running.id), String(pending.id), "--reason", "store closed", "--json", "--db", db),
      taskpool("tasks", "cancel", String(failed.id), "4x", "--db", db),
    ]);
    expect(cancel.code, cancel.stderr).toBe(0);
    expect(JSON.parse(cancel.stdout).map((o: { id: number; task: { status: string } }) => [o.id, o.task.status])).toEqual([[running.id, "cancelled"], [pending.id, "cancelled"]]);
    expectOneLine(typo, /^taskpool: "4x" is not a task id: pass the number `taskpool tasks list` shows, e\.g\. 42$/);

    const after = await connect(db);
    try {
      expect((await after.get(failed.id))?.status).toBe("pending"); // retried, then left alone by the refused cancel
      expect((await after.get(completed.id))?.status).toBe("completed");
      expect((await after.events(running.id)).at(-1)).toMatchObject({ event: "cancelled", message: "store closed" });
    } finally {
      await after.close();
    }
  }, 60_000);

  it("tasks show and types list print no terminal escapes from stored text: a worker's stack, a producer's description", async () => {
    const pool = await connect(db);
    let id: number;
    try {
      const p = pool.protocol;
      const hostile = "\u001b[2J\u001b]0;TITLE\u0007";
      await pool.registerTaskType({ name: "ansi", description: `clears ${hostile}the screen` });
      id = (await pool.enqueue("ansi", {}, { maxAttempts: 1 })).id;
      const [task] = await p.claim({ workerId: "w-ansi", taskTypes: ["ansi"] });
      await p.fail(task.id, task, { error: "boom", stack: `Error: boom${hostile}\n    at x (y.js:1:1)` });
    } finally {
      await pool.close();
    }
    const [show, types] = await Promise.all([taskpool("tasks", "show", String(id), "--db", db), taskpool("types", "list", "--db", db)]);
    // eslint-disable-next-line no-control-regex -- what must not reach the terminal
    for (const out of [show.stdout, types.stdout]) expect(out).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/);
    expect(show.stdout).toMatch(/Stack of the last failure \(\S+Z\):\n {2}Error: boom \[2J \]0;TITLE \n/);
    expect(types.stdout).toMatch(/ansi v1 .* — clears {2}\[2J \]0;TITLE the screen\n/);
  });

  it("workers, capacity and reassignments show the registry, seed 004's figures and seed 003's history after a worker dies", async () => {
    // The monitoring views read the database's own clock, so the rows are written relative to the real time.
    const start = Date.now();
    const clock = new ManualClock(new Date(start - 10 * 60_000));
    const pool = await connect(db, { clock });
    const p = pool.protocol;
    const beat = (workerId: string, capacity: number) => p.workerHeartbeat({ workerId, roles: ["crawl"], capacity, currentLoad: 0, tasksProcessed: 0, hostname: "host-b", pid: 77 });
    try {
      await beat("helper", 1);
      await pool.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }]);
      for (const t of await p.claim({ workerId: "helper", limit: 2 })) await p.complete(t.id, t); // 2 done in the last hour
      clock.set(new Date(start - 5 * 60_000));
      await beat("dying", 5);
      await pool.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }, { taskType: "crawl" }]);
      expect(await p.claim({ workerId: "dying", limit: 3 })).toHaveLength(3);
      clock.set(new Date(start));
      await beat("helper", 1);
      const swept = await p.sweep({ staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 300 });
      expect([swept.deadWorkers, swept.reassigned.length, swept.unassigned.length]).toEqual([["dying"], 1, 2]);

      const reassignedTask = swept.reassigned[0].taskId;
      const [workers, workersJson, capacity, capacityJson, history, oneTask, stats, statsJson, unknownRole] = await Promise.all([
        taskpool("workers", "--db", db),
        taskpool("workers", "--json", "--db", db),
        taskpool("capacity", "--db", db),
        taskpool("capacity", "crawl", "--json", "--db", db),
        taskpool("reassignments", "--db", db),
        taskpool("reassignments", "--task", String(reassignedTask), "--json", "--db", db),
        taskpool("reassignments", "--stats", "--db", db),
        taskpool("reassignments", "--stats", "--json", "--db", db),
        taskpool("capacity", "nope", "--db", db),
      ]);

      expect(workers.stdout).toMatch(/^WORKER\s+STATUS\s+ROLES\s+HEARTBEAT\s+LOAD\s+ACTIVE\s+PROCESSED\s+HOST\s+PID\n/);
      expect(workers.stdout).toMatch(/\ndying\s+dead\s+crawl\s+3\d\ds ago\s+0\/5 \(0%\)\s+0\s+0\s+host-b\s+77\n/);
      expect(workers.stdout).toMatch(/\nhelper\s+active\s+crawl\s+\d+s ago\s+0\/1 \(0%\)/);
      const registry = (await pool.workers()).workers;
      const withoutAge = (rows: { secondsSinceHeartbeat?: number }[]) => rows.map(({ secondsSinceHeartbeat: _, ...rest }) => rest);
      const page = JSON.parse(workersJson.stdout);
      expect(withoutAge(page.workers)).toEqual(withoutAge(asJson(registry)));
      expect(page).toMatchObject({ counts: { active: 1, stale: 0, dead: 1, inactive: 0 }, nextCursor: null });

      // 3 pending again (one reserved for helper), 2 completed in the last hour by the one live worker.
      const [row] = JSON.parse(capacityJson.stdout);
      // Its wait grows between the two reads.
      const waitAside = ({ oldestReadySeconds: _, ...rest }: { oldestReadySeconds?: number | null }) => rest;
      expect(waitAside(row)).toEqual(waitAside(asJson((await pool.capacity("crawl"))[0]) as typeof row));
      expect(row.oldestReadySeconds).toBeGreaterThanOrEqual(0);
      expect(row).toMatchObject({ taskType: "crawl", pendingTasks: 3, runningTasks: 0, activeWorkers: 1, completedLastHour: 2, tasksPerWorkerHour: 2, estimatedHoursToDrain: 1.5 });
      expect(row.workersNeeded).toEqual({ for1Hour: 2, for4Hours: 1, for8Hours: 1 });
      expect(capacity.stdout).toMatch(/^ROLE\s+PENDING\s+READY\s+OLDEST READY \(S\)\s+RUNNING\s+WORKERS\s+TASKS\/WORKER-HOUR\s+HOURS TO DRAIN\s+NEED 1H\s+NEED 4H\s+NEED 8H\ncrawl\s+3\s+\d\s+\d+(\.\d)?\s+0\s+1\s+2\s+1\.5\s+2\s+1\s+1\n$/);
      expectOneLine(unknownRole, /^taskpool: no capacity figures for role "nope": it has no pending or running task, none completed in the last hour, no active worker and no registration; `taskpool capacity` lists the roles that have$/);

      const historyLines = history.stdout.trim().split("\n");
      expect(historyLines[0]).toMatch(/^ID\s+TASK\s+TIME\s+FROM\s+TO\s+OUTCOME\s+REASON\s+ERROR$/);
      expect(historyLines).toHaveLength(4);
      expect(history.stdout).toMatch(new RegExp(`\\s${reassignedTask}\\s+\\S+\\s+dying\\s+helper\\s+reassigned\\s+Worker died unexpectedly`));
      expect(history.stdout.match(/dying\s+-\s+unassigned/g)).toHaveLength(2);
      expect(JSON.parse(oneTask.stdout)).toEqual(asJson(await pool.reassignments({ taskId: reassignedTask })));
      expect(JSON.parse(oneTask.stdout)).toMatchObject([{ taskId: reassignedTask, fromWorkerId: "dying", toWorkerId: "helper", success: true }]);

      expect(stats.stdout).toMatch(/^Last 24 hours: 3 reassignment attempts, 1 found a worker \(33\.3%\)\n/);
      expect(stats.stdout).toMatch(/Workers whose tasks were taken back, last 7 days:\n\s+WORKER\s+FAILURES\s+LAST\n\s+dying\s+3\s+\S+Z\n/);
      expect(stats.stdout).toMatch(/Tasks reassigned more than once:\n\s+none\n$/);
      expect(JSON.parse(statsJson.stdout)).toEqual(asJson(await pool.reassignmentStats()));
    } finally {
      await pool.close();
    }
  }, 60_000);

  it("refuses bad input and unreachable databases with one line saying what to fix", async () => {
    await (await connect(db)).close();
    const [verbose, ...runs] = await Promise.all([
      taskpool("tasks", "show", "999", "--verbose", "--db", db),
      taskpool("tasks", "show", "999", "--db", db),
      taskpool("tasks", "show", "abc", "--db", db),
      taskpool("tasks", "list", "--status", "pending,bogus", "--db", db),
      taskpool("tasks", "list", "--cursor", "not-a-cursor", "--db", db),
      taskpool("tasks", "list", "--order", "sideways", "--db", db),
      taskpool("reassignments", "--stats", "--limit", "3", "--db", db),
      taskpool("reassignments", "--task", "999", "--db", db),
      taskpool("workers", "--db", "mysql://x"),
      taskpool("capacity", "--db", "postgres://postgres:s3cret@127.0.0.1:1/postgres"),
      taskpool("enqueue", "crawl", "--delay", "5s", "--db", db),
      taskpool("tasks", "list", "--limit", "2.5", "--db", db),
      taskpool("tasks", "list", "--limit", "ten", "--db", db),
      taskpool("tasks", "list", "--limit", "0", "--db", db),
      taskpool("serve", "--trust-proxy", "2", "--db", db),
      taskpool("serve", "--trust-proxy", "10.0.0.0/33", "--db", db),
    ]);
    const messages = [
      /^taskpool: task 999 does not exist; `taskpool tasks list` shows the ids$/,
      /^taskpool: "abc" is not a task id: pass the number `taskpool tasks list` shows/,
      /^taskpool: option '--status <status>' argument 'pending,bogus' is invalid\. "bogus" is not a task status; use one of pending, claimed, running, completed, failed, cancelled$/,
      /^taskpool: Invalid cursor: pass back the next cursor a previous page gave, unchanged$/,
      /^taskpool: option '--order <order>' argument 'sideways' is invalid\. Allowed choices are newest, oldest\.$/,
      /^taskpool: option '--stats' cannot be used with option '--limit <n>'$/,
      /^taskpool: task 999 does not exist; `taskpool tasks list` shows the ids$/,
      /^taskpool: Unsupported database URL "mysql:\/\/x": use sqlite:/,
      /^taskpool: cannot connect to postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:1\/postgres: connection refused/,
      /^taskpool: option '--delay <seconds>' argument '5s' is invalid\. expected a whole number, without a unit \(the option's <…> names its unit\)$/,
      /^taskpool: option '--limit <n>' argument '2\.5' is invalid\. expected a whole number, without a fraction$/,
      /^taskpool: option '--limit <n>' argument 'ten' is invalid\. expected a whole number, such as 10$/,
      /^taskpool: option '--limit <n>' argument '0' is invalid\. expected a whole number from 1 to 1000$/,
      /^taskpool: option '--trust-proxy <addresses>' argument '2' is invalid\. "2" is not an address: give the proxies' addresses or ranges, comma-separated \(10\.0\.0\.5, 10\.0\.0\.0\/8, loopback\), not how many there are$/,
      /^taskpool: option '--trust-proxy <addresses>' argument '10\.0\.0\.0\/33' is invalid\. "10\.0\.0\.0\/33" is not an address/,
    ];
    runs.forEach((run, i) => expectOneLine(run, messages[i]));
    expect(verbose.stderr).toMatch(/^taskpool: task 999 does not exist[\s\S]*\n\s+at /);
  }, 60_000);

  it("works the same on PostgreSQL, in the schema --schema names", async () => {
    const schema = `tp_cli_${randomBytes(4).toString("hex")}`;
    const pool = await connect(PG_URL, { schema });
    try {
      const { failed, pending } = await seedTasks(pool);
      const common = ["--db", PG_URL, "--schema", schema];
      const [migrated, list, show, workers] = await Promise.all([
        taskpool("migrate", ...common),
        taskpool("tasks", "list", "--status", "failed", "--json", ...common),
        taskpool("tasks", "show", String(pending.id), ...common),
        taskpool("workers", ...common),
      ]);
      const retry = await taskpool("tasks", "retry", String(failed.id), ...common);
      expect(migrated.stdout).toBe(`${PG_URL}, schema ${schema} is up to date: no migration to apply\n`);
      expect(JSON.parse(list.stdout).tasks.map((t: { id: number }) => t.id)).toEqual([failed.id]);
      expect(show.stdout).toMatch(/status\s+pending\n[\s\S]*Events \(1, oldest first;/);
      expect(retry.stdout).toMatch(new RegExp(`\\n\\s*${failed.id}  analytics_refresh\\s+pending\\s+retried`));
      expect((await pool.get(failed.id))?.status).toBe("pending");
      expect(workers.stdout).toMatch(/\nw1\s+active\s+product_resync,analytics_refresh\s+\d+s ago\s+1\/4 \(25%\)\s+1\s+2\s+host-a\s+4242\n/);
    } finally {
      await pool.close();
      await dropSchema(schema);
    }
  }, 60_000);

  it("stops quietly, exit 0, when its reader closes the pipe early (taskpool status | head -1)", async () => {
    const schema = `tp_cli_${randomBytes(4).toString("hex")}`;
    const pool = await connect(PG_URL, { schema });
    try {
      // Enough task types that status prints well past what a pipe holds (64 KiB).
      await pool.enqueueMany(Array.from({ length: 3000 }, (_, i) => ({ taskType: `type_${i}_${"x".repeat(20)}` })));
      const child = spawn(process.execPath, [CLI, "status", "--db", PG_URL, "--schema", schema], { stdio: ["ignore", "pipe", "pipe"] });
      let stderr = "";
      child.stderr.on("data", (chunk) => (stderr += chunk));
      // The reader takes the first chunk and goes, as head does.
      child.stdout.once("data", () => child.stdout.destroy());
      const code = await new Promise((resolve) => child.on("close", resolve));
      expect([code, stderr]).toEqual([0, ""]);
    } finally {
      await pool.close();
      await dropSchema(schema);
    }
  }, 60_000);

  it("says in one line, exit 1, that it could not write its output to a full disk (stdout on /dev/full)", async () => {
    const pool = await connect(db);
    await pool.enqueue("crawl", {});
    await pool.close();
    const out = openSync("/dev/full", "w");
    try {
      const child = spawn(process.execPath, [CLI, "tasks", "list", "--db", db], { stdio: ["ignore", out, "pipe"] });
      let stderr = "";
      child.stderr!.on("data", (chunk) => (stderr += chunk));
      const code = await new Promise((resolve) => child.on("close", resolve));
      expect([code, stderr]).toEqual([1, "taskpool: could not write the output: ENOSPC: no space left on device, write\n"]);
    } finally {
      closeSync(out);
    }
  });

  it("workers lists the live workers and folds the gone ones, saying how many it left out and how to see them", async () => {
    const pool = await connect(db);
    try {
      for (let i = 0; i < 5; i++) {
        await pool.protocol.workerHeartbeat({ workerId: `gone-${i}`, roles: ["crawl"] });
        await pool.protocol.shutdownWorker(`gone-${i}`);
      }
      await pool.protocol.workerHeartbeat({ workerId: "live-1", roles: ["crawl"] });
    } finally {
      await pool.close();
    }
    const rows = (stdout: string) => stdout.split("\n").filter((line) => /^(gone|live)-/.test(line)).map((line) => line.split(/\s+/).slice(0, 2).join(" "));
    const first = await taskpool("workers", "--limit", "2", "--db", db);
    // Shut down one after another, within a millisecond or so: the order among them is not asserted.
    expect(rows(first.stdout)).toEqual(["live-1 active", expect.stringMatching(/^gone-\d inactive$/), expect.stringMatching(/^gone-\d inactive$/)]);
    const cursor = /\nMore: run the same command with --cursor (\S+), or one worker: taskpool workers --worker <id>\n$/.exec(first.stdout)?.[1];
    expect(first.stdout).toMatch(/\nListed 2 of 5 gone workers \(0 dead, 5 inactive\), the most recently heard from\.\n/);
    const [rest, one, dead, json, bad] = await Promise.all([
      taskpool("workers", "--limit", "2", "--cursor", String(cursor), "--db", db),
      taskpool("workers", "--worker", "gone-3", "--db", db),
      taskpool("workers", "--status", "dead", "--db", db),
      taskpool("workers", "--status", "inactive", "--limit", "4", "--json", "--db", db),
      taskpool("workers", "--status", "active,gone", "--db", db),
    ]);
    expect(rows(rest.stdout)).toHaveLength(2);
    expect(new Set([...rows(first.stdout), ...rows(rest.stdout)]).size).toBe(5);
    expect(rows(one.stdout)).toEqual(["gone-3 inactive"]);
    expect(one.stdout).not.toMatch(/More:/);
    expect(dead.stdout).toBe("No workers match\n");
    const page = JSON.parse(json.stdout);
    expect([page.workers.length, page.counts, typeof page.nextCursor]).toEqual([4, { active: 1, stale: 0, dead: 0, inactive: 5 }, "string"]);
    expectOneLine(bad, /^taskpool: option '--status <status>' argument 'active,gone' is invalid\. "gone" is not a worker status; use one of active, stale, dead, inactive$/);
  }, 60_000);

  it("workers shutdown gives a gone worker's tasks back now; an active one only with --force; a replaced run's changes nothing", async () => {
    const pool = await connect(db);
    const p = pool.protocol;
    try {
      await p.workerHeartbeat({ workerId: "w1", runId: "run-1", roles: ["crawl"], capacity: 2 });
      await pool.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }]);
      const held = await p.claim({ workerId: "w1", limit: 2 });
      const status = async (id: number) => (await pool.get(id))?.status;

      // Heard from a moment ago: its process may well run on with them.
      const refused = await taskpool("workers", "shutdown", "w1", "--db", db);
      expectOneLine(refused, /^taskpool: Worker w1 is active \(heard \d+ s ago\): if its process still runs, its 2 tasks would run twice\. Stop the process instead \(SIGTERM: it shuts itself down\), or pass --force if it is gone$/);
      expect(await status(held[0].id)).toBe("claimed");

      // A run that is not the current one (a late or repeated call) changes nothing.
      const stale = await taskpool("workers", "shutdown", "w1", "--run-id", "run-0", "--force", "--db", db);
      expect(stale.stdout).toBe("Run run-0 of worker w1 is no longer its current one: nothing changed (the run that replaced it keeps its tasks)\n");
      expect(await status(held[1].id)).toBe("claimed");

      const done = await taskpool("workers", "shutdown", "w1", "--run-id", "run-1", "--force", "--json", "--db", db);
      expect(JSON.parse(done.stdout)).toEqual({ workerId: "w1", shutDown: true, released: held.map((t) => t.id).sort((a, b) => a - b) });
      expect([await status(held[0].id), await status(held[1].id)]).toEqual(["pending", "pending"]);
      expect((await pool.workers()).workers[0]).toMatchObject({ workerId: "w1", status: "inactive", activeTasks: 0 });
      // Inactive now: no --force needed, and nothing changes, whichever run is named (it said "shut down; it held no tasks").
      expect((await taskpool("workers", "shutdown", "w1", "--db", db)).stdout).toBe("Worker w1 was already shut down: nothing changed\n");
      expect((await taskpool("workers", "shutdown", "w1", "--run-id", "run-0", "--db", db)).stdout).toBe("Worker w1 was already shut down: nothing changed\n");
      // A worker gone without tasks is shut down all the same.
      await p.workerHeartbeat({ workerId: "w2", roles: ["crawl"], capacity: 1 });
      expect((await taskpool("workers", "shutdown", "w2", "--force", "--db", db)).stdout).toBe("Worker w2 shut down; it held no tasks\n");
      expectOneLine(await taskpool("workers", "shutdown", "w-typo", "--db", db), /^taskpool: Worker "w-typo" is not in the registry: .*\(taskpool workers lists them\)$/);
    } finally {
      await pool.close();
    }
  });

  it("every operator command's --help ends with an example", async () => {
    let help = "";
    // Subcommands inherit the exit override and the output from the program they are added to.
    const program = new TaskpoolCommand("taskpool").exitOverride().configureOutput({ writeOut: (s) => (help += s) });
    for (const add of [tasksCommand, workersCommand, capacityCommand, reassignmentsCommand, recountCommand]) add(program);
    for (const args of [["tasks", "list"], ["tasks", "show"], ["tasks", "retry"], ["tasks", "cancel"], ["workers"], ["workers", "shutdown"], ["capacity"], ["reassignments"], ["recount"]]) {
      help = "";
      await expect(program.parseAsync([...args, "--help"], { from: "user" })).rejects.toMatchObject({ code: "commander.helpDisplayed" });
      expect(help, args.join(" ")).toMatch(new RegExp(`Usage: taskpool ${args.join(" ")}[\\s\\S]*Example:\\n  \\$ taskpool ${args.join(" ")}`));
    }
    // It said "learns it at its next heartbeat", up to 30 s, where PostgreSQL and the worker's own server tell it at once.
    help = "";
    await expect(program.parseAsync(["tasks", "cancel", "--help"], { from: "user" })).rejects.toMatchObject({ code: "commander.helpDisplayed" });
    expect(help.replace(/\s+/g, " ")).toContain("a worker running one stops it: at once on PostgreSQL or through the worker's own server, --url; else, SQLite from another process, at its next heartbeat");
  });
});
