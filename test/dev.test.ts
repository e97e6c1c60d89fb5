import { hostname } from "node:os";
import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { PassThrough } from "node:stream";
import { promisify } from "node:util";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { connect } from "../src/api/taskpool.js";
import { LiveStatus, renderStatus, type StatusFrame } from "../src/cli/dev-status.js";
import { ManualClock } from "../src/core/clock.js";
// @ts-expect-error: the example is plain JavaScript, without type declarations
import { handlers as crawl } from "../examples/dispensary-crawl/handlers.js";
// @ts-expect-error: the example is plain JavaScript, without type declarations
import { schedules } from "../examples/dispensary-crawl/schedules.js";
import { eventually } from "./helpers/logs.js";
import { dropSchema, PG_SCHEMA_PREFIX, PG_URL, removeSqliteFiles, sqlitePath } from "./helpers/stores.js";
import { CLI, envWith, taskpool, taskpoolIn } from "./helpers/cli.js";

const CRASHING = "dev-product_discovery-crashing";
const EXAMPLE_HANDLERS = "examples/dispensary-crawl/handlers.js";
const ROLES = ["store_discovery", "entry_point_discovery", "product_discovery", "product_resync", "analytics_refresh"];

/** `taskpool …` as a real process (the build in dist/), its stdout and stderr gathered in `output()`. */
function start(args: string[], env: Record<string, string> = {}): { child: ChildProcess; output: () => string; exit: Promise<number | null> } {
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout?.on("data", (d) => (output += d));
  child.stderr?.on("data", (d) => (output += d));
  const exit = new Promise<number | null>((resolve) => child.on("exit", resolve));
  return { child, output: () => output, exit };
}

describe("taskpool dev and the dispensary-crawl example", () => {
  const path = sqlitePath();
  const db = `sqlite:${path}`;
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
    removeSqliteFiles(path);
  });

  it("dev prints the dashboard, API and a working admin key once, runs the example's pipeline and schedules, stages a worker crash it recovers, and stops cleanly on Ctrl-C", async () => {
    const dev = start(["dev", "--db", db, "--status-every", "0"]);
    children.push(dev.child);
    const banner = await eventually(() => /Dashboard\s+(http:\/\/127\.0\.0\.1:\d+)\/[\s\S]*API key\s+(tp_\S+)[\s\S]*Database\s+(\S+)/.exec(dev.output()), 20_000, "the banner");
    const [, url, key, database] = banner;
    expect(database).toBe(path);
    expect(dev.output().split(key)).toHaveLength(2); // printed once
    expect(dev.output()).toMatch(new RegExp(`API\\s+${url}/api/…\\s+reference: ${url}/docs`));
    expect(dev.output()).toMatch(/Schedules\s+store_discovery \(\d+ \d-59\/2 \* \* \* \*\), product_resync \(\*\/20 \* \* \* \* \*\), analytics_refresh/);

    const get = (route: string, apiKey?: string) => fetch(`${url}${route}`, { headers: apiKey ? { "x-api-key": apiKey } : {} });
    expect((await get("/api/tasks/counts")).status).toBe(401);
    const page = await get("/");
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/<title>taskpool<\/title>[\s\S]*app\.js/);
    expect(await (await get("/api/whoami", key)).json()).toMatchObject({ success: true, scope: "admin" });

    // Every role completes: the discovery chain from the schedule's first tick, the resync's staggered fan-out
    // over the stores that discovery found, and the daily analytics (a day is 20 s at dev pace).
    const counts = await eventually(
      async () => {
        const body = (await (await get("/api/tasks/counts", key)).json()) as { by_type: Record<string, Record<string, number>> };
        return ROLES.every((role) => (body.by_type[role]?.completed ?? 0) > 0) ? body : null;
      },
      30_000,
      "a completed task of every role",
    );
    expect(counts.by_type.entry_point_discovery.completed).toBeGreaterThanOrEqual(12);
    const resync = await eventually(
      async () => {
        const { schedules } = (await (await get("/api/schedules", key)).json()) as { schedules: { name: string; last_result: { tasks_created: number; message: string } | null }[] };
        return schedules.find((s) => s.name === "product_resync" && (s.last_result?.tasks_created ?? 0) > 0);
      },
      25_000,
      "a resync run over the discovered stores",
    );
    expect(resync.last_result?.message).toMatch(/^created 12 tasks in 6 batches/);
    expect(dev.output()).toMatch(/Task \d+ failed \(attempt 1\); retry scheduled \(menu URL of store 3 timed out \(simulated\)\)/);

    // The staged crash: an extra worker process, killed after its crawl's second checkpoint, is declared dead;
    // its task goes back to the pool and dev's own worker of the role resumes it from that checkpoint.
    expect(dev.output()).toMatch(new RegExp(`Crash\\s+worker ${CRASHING} \\(its own process\\) will be killed mid-crawl`));
    const [, crashedId] = await eventually(() => /Recovered: task (\d+) completed by dev-product_discovery on attempt 2/.exec(dev.output()), 30_000, "the crashed worker's task to be recovered");
    const killed = new RegExp(`Simulating a worker crash: killed worker ${CRASHING} mid-task ${crashedId} \\(product_discovery, checkpoint \\{"page":(\\d),"items":\\d+\\}\\); watch the coordinator recover it`);
    const [, killedAtPage] = killed.exec(dev.output()) ?? [];
    expect(Number(killedAtPage)).toBeGreaterThanOrEqual(2);
    expect(dev.output().indexOf(`Dead worker detected: ${CRASHING}`)).toBeGreaterThan(dev.output().search(killed));
    const { reassignments } = (await (await get("/api/reassignments", key)).json()) as { reassignments: Record<string, unknown>[] };
    expect(reassignments.filter((r) => r.from_worker_id === CRASHING)).toEqual([expect.objectContaining({ task_id: Number(crashedId), reason: "Worker died unexpectedly" })]);

    dev.child.kill("SIGINT");
    expect(await dev.exit).toBe(0);
    expect(dev.output()).toMatch(/dev-product_resync\s+inactive[\s\S]*Stopped\n$/);
    expect(dev.output()).not.toMatch(/will not run here/); // each of dev's workers has its role's handler, and only it
    const pool = await connect(db);
    try {
      const keys = await pool.apiKeys();
      expect(keys).toHaveLength(1);
      expect(keys[0].revokedAt).not.toBeNull();
      const crashed = await pool.get(Number(crashedId));
      expect(crashed).toMatchObject({ status: "completed", workerId: "dev-product_discovery", attempts: 2, checkpoint: { page: 5 }, result: { pages: 5, resumedFromPage: Number(killedAtPage) } });
      const moves = (await pool.events(Number(crashedId))).map((e) => [e.event, e.fromWorkerId]);
      expect(moves).toContainEqual(["requeued", CRASHING]);
      expect((await pool.workers()).workers.find((w) => w.workerId === CRASHING)?.status).toBe("dead");
    } finally {
      await pool.close();
    }
  }, 60_000);

  it("taskpool worker runs the example's handlers against a database: a store_discovery chain to the end, with checkpoints, a retry and per-store keys", async () => {
    const pool = await connect(db);
    try {
      const discovery = await pool.enqueue("store_discovery", { region: "CA", stores: 3 });
      const worker = start(["worker", "--handlers", EXAMPLE_HANDLERS, "--concurrency", "4", "--id", "crawler-1", "--db", db], { POLL_INTERVAL_MS: "100" });
      children.push(worker.child);
      const done = await eventually(
        async () => {
          const { byType } = await pool.counts();
          const finished = ["entry_point_discovery", "product_discovery", "product_resync"].every((role) => byType[role]?.completed === 3);
          return finished && byType.store_discovery?.completed === 1 ? byType : null;
        },
        20_000,
        "the chain of 3 stores to complete",
      );
      expect(Object.values(done).every((byStatus) => Object.keys(byStatus).join() === "completed")).toBe(true);
      worker.child.kill("SIGTERM");
      expect(await worker.exit).toBe(0);

      expect((await pool.get(discovery.id))?.result).toEqual({ region: "CA", storeIds: [1, 2, 3] });
      const tasks = (await pool.list({}, { limit: 100 })).tasks;
      for (const task of tasks.filter((t) => t.taskType !== "store_discovery")) expect(task.concurrencyKey).toBe(`store:${task.params.storeId}`);
      const flaky = tasks.find((t) => t.taskType === "entry_point_discovery" && t.params.storeId === 3);
      expect(flaky?.attempts).toBe(2);
      expect((await pool.events(flaky!.id)).map((e) => e.event)).toContain("retry_scheduled");
      const crawl = tasks.find((t) => t.taskType === "product_discovery" && t.params.storeId === 2);
      expect(crawl?.checkpoint).toEqual({ page: 5, items: (crawl?.result as { products: number }).products });
      expect(crawl?.result).toMatchObject({ storeId: 2, pages: 5, resumedFromPage: 0 });
    } finally {
      await pool.close();
    }
  }, 40_000);

  it("the staged crash's worker gives its task back when dev stops before the crash, and stops when dev is killed (SIGKILL)", async () => {
    const other = sqlitePath();
    try {
      // Two devs at once, on files of their own: one stopped with Ctrl-C, one killed, each while its extra worker holds its task.
      const runs = [{ db, signal: "SIGINT" }, { db: `sqlite:${other}`, signal: "SIGKILL" }] as const;
      const devs = runs.map((run) => ({ ...run, dev: start(["dev", "--db", run.db, "--status-every", "0"]) }));
      children.push(...devs.map((d) => d.dev.child));
      // Each frozen as soon as it says so, before its second checkpoint (800 ms of crawling), which would
      // have it killed as staged: dev is then stopped or killed with the extra worker holding its task,
      // whatever this machine's pace. Frozen once both had said so, the first was sometimes gone already.
      const held = await Promise.all(
        devs.map(async ({ dev }) => {
          const [, pid, taskId] = await eventually(() => new RegExp(`Crash simulation: worker ${CRASHING} \\(its own process, pid (\\d+)\\) runs task (\\d+)`).exec(dev.output()), 30_000, "the extra worker's task");
          process.kill(Number(pid), "SIGSTOP");
          return { pid: Number(pid), taskId: Number(taskId) };
        }),
      );
      const alive = (pid: number) => {
        try {
          process.kill(pid, 0);
          return true;
        } catch {
          return false;
        }
      };
      expect(held.map(({ pid }) => alive(pid))).toEqual([true, true]);
      // The database reaches it through its environment: a URL's password on a command line is any local user's to read (ps).
      for (const [i, { pid }] of held.entries()) expect(readFileSync(`/proc/${pid}/cmdline`, "utf8")).not.toContain(devs[i].db.replace(/^sqlite:/, ""));
      for (const { dev, signal } of devs) dev.child.kill(signal);
      await new Promise((resolve) => setTimeout(resolve, 300));
      for (const { pid } of held) process.kill(pid, "SIGCONT");
      expect(await devs[0].dev.exit).toBe(0);
      for (const [i, { db: where }] of devs.entries()) {
        await eventually(() => !alive(held[i].pid), 10_000, `the extra worker (pid ${held[i].pid}) to stop`);
        const pool = await connect(where);
        try {
          // Released by the worker as it stopped: not left running under a worker nobody will declare dead.
          expect(await pool.get(held[i].taskId)).toMatchObject({ status: "pending", workerId: null });
          expect((await pool.events(held[i].taskId)).at(-1)).toMatchObject({ event: "released", fromWorkerId: CRASHING });
          expect((await pool.workers()).workers.find((w) => w.workerId === CRASHING)?.status).toBe("inactive");
        } finally {
          await pool.close();
        }
      }
    } finally {
      removeSqliteFiles(other);
    }
  }, 60_000);

  it("dev refuses what it cannot run in one line, before starting anything", async () => {
    const taskpool = (...args: string[]) => promisify(execFile)(process.execPath, [CLI, ...args]).catch((e) => e);
    const [missing, remote] = await Promise.all([taskpool("dev", "--handlers", `${path}.nothing.js`, "--db", db), taskpool("dev", "--db", "http://127.0.0.1:8080")]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^taskpool: cannot load handlers from .*nothing\.js: /);
    expect(remote.stderr).toMatch(/^taskpool: dev runs its own server: give it a database \(sqlite:\.\/taskpool\.db or postgres:\/\/…\), not http:\/\/127\.0\.0\.1:8080\n$/);
  }, 20_000);

  it("dev on PostgreSQL names the schema it runs in, which the commands beside it need (--schema)", async () => {
    const schema = `${PG_SCHEMA_PREFIX}dev_${process.pid}`;
    const dev = start(["dev", "--db", PG_URL, "--schema", schema, "--no-demo", "--status-every", "0"]);
    children.push(dev.child);
    try {
      const line = await eventually(() => /^ {2}Database {4}(.*)$/m.exec(dev.output())?.[1], 20_000, "the banner");
      expect(line).toBe(`${PG_URL}, schema ${schema}`);
      dev.child.kill("SIGINT");
      expect(await dev.exit).toBe(0);
    } finally {
      await dropSchema(schema);
    }
  }, 40_000);

  it("dev removes the schedules it saved and revokes its key when its terminal closes (SIGHUP), and refuses to replace a schedule of the same name it did not save", async () => {
    const dev = start(["dev", "--db", db, "--status-every", "0", "--no-crash"]);
    children.push(dev.child);
    await eventually(() => /Schedules\s+store_discovery/.test(dev.output()), 20_000, "the banner");
    expect((await taskpool("schedules", "list", "--db", db)).stdout).toMatch(/\nproduct_resync\s+product_resync\s+\*\/20 \* \* \* \* \*\s+running/);
    // A second dev beside it would share its workers' ids: it warned, started with --no-demo, and on
    // stopping shut the first one's workers down under it.
    const twin = await taskpoolIn(".", envWith({}), "dev", "--db", db, "--no-demo", "--port", "0").catch((e) => e);
    expect([twin.code, twin.stderr]).toEqual([
      1,
      expect.stringMatching(/^taskpool: another taskpool dev runs on .* \(its worker dev-\w+, pid \d+ on .*, was heard \d+ s ago\): two would share their workers' ids and take each other's tasks\. Stop that one first, or run this one on another database/),
    ]);
    dev.child.kill("SIGHUP");
    expect(await dev.exit).toBe(0);
    const [keysLeft, schedulesLeft] = await Promise.all([taskpool("keys", "list", "--db", db), taskpool("schedules", "list", "--db", db)]);
    expect(keysLeft.stdout).toMatch(/ admin {2}taskpool dev on .* tp_\S+… +\S+Z {2}revoked \S+Z {2}1000\/min\n$/);
    // Left behind, they would go on making demo tasks every few seconds under any later serve or coordinator.
    expect(schedulesLeft.stdout).toMatch(/^No schedules/);
    expect(dev.output()).toMatch(/Schedules\s+store_discovery .* from examples\/dispensary-crawl\/schedules\.js: for this session, removed when dev stops\n/);
    expect(dev.output()).toMatch(/Removed the schedules dev saved: store_discovery, product_resync, analytics_refresh\n[\s\S]*Stopped\n$/);

    // The user's own (here the example's real cadence): dev neither puts it on a 20-s day nor deletes it when it stops.
    // A killed dev's key (no process has that pid: above pid_max) is revoked even by a dev that is then refused.
    await Promise.all([
      taskpool("schedules", "add", "product_resync", "--type", "product_resync", "--cron", "0 0 * * *", "--db", db),
      taskpool("keys", "create", "--scope", "admin", "--name", `taskpool dev on ${hostname()}, pid 4194305`, "--db", db),
    ]);
    const refused = await taskpoolIn(".", envWith({}), "dev", "--db", db).catch((e) => e);
    expect([refused.code, refused.stderr]).toEqual([
      1,
      "taskpool: the database already has a schedule named product_resync that dev did not save (yours, or left by a dev that was killed): " +
        "dev would replace it with its own and delete it when it stops. Run dev on another database (--db sqlite:./tour.db), with --no-demo, " +
        `or remove it first (npx taskpool schedules remove product_resync --cancel-pending --db ${db})\n`,
    ]);
    const [schedulesKept, keysListed] = await Promise.all([taskpool("schedules", "list", "--json", "--db", db), taskpool("keys", "list", "--json", "--db", db)]);
    expect(JSON.parse(schedulesKept.stdout)).toEqual([expect.objectContaining({ name: "product_resync", cron: "0 0 * * *", timezone: "UTC", fanOut: null })]);
    const left = JSON.parse(keysListed.stdout).find((k: { name: string }) => k.name.endsWith("pid 4194305"));
    expect(left.revokedAt).not.toBeNull();
  }, 60_000);

  it("dev given Ctrl-C while it starts (its database just created) stops once started, leaving no schedule and no working key; asked twice, it quits at once", async () => {
    const dev = start(["dev", "--db", db, "--status-every", "0", "--no-crash"]);
    children.push(dev.child);
    await eventually(() => existsSync(path), 20_000, "dev to create its database");
    dev.child.kill("SIGINT");
    expect(await dev.exit).toBe(0);
    expect(dev.output()).toMatch(/Stopping once started, so nothing dev saves is left behind \(Ctrl-C again to quit at once\)\n[\s\S]*Removed the schedules dev saved: store_discovery, product_resync, analytics_refresh\n[\s\S]*Stopped\n$/);
    const [schedulesLeft, keysLeft] = await Promise.all([taskpool("schedules", "list", "--db", db), taskpool("keys", "list", "--db", db)]);
    expect(schedulesLeft.stdout).toMatch(/^No schedules/);
    expect(keysLeft.stdout).toMatch(/ admin {2}taskpool dev on .* revoked \S+Z {2}1000\/min\n$/);

    removeSqliteFiles(path);
    const impatient = start(["dev", "--db", db, "--status-every", "0", "--no-crash"]);
    children.push(impatient.child);
    await eventually(() => existsSync(path), 20_000, "dev to create its database");
    impatient.child.kill("SIGINT");
    await eventually(() => impatient.output().includes("Stopping once started"), 10_000, "dev to say it stops once started");
    impatient.child.kill("SIGINT");
    expect(await impatient.exit).toBe(130);
  }, 60_000);

  it("dev whose output's reader goes away (taskpool dev | head -3) stops as on Ctrl-C: its schedules removed, its key revoked, its workers shut down", async () => {
    const dev = spawn(process.execPath, [CLI, "dev", "--db", db, "--no-live", "--no-crash"], { stdio: ["ignore", "pipe", "inherit"] });
    children.push(dev);
    const exit = new Promise<number | null>((resolve) => dev.on("exit", resolve));
    // Three lines read, the pipe closed: dev is still starting its workers.
    let read = "";
    await new Promise<void>((resolve) =>
      dev.stdout.on("data", (d) => {
        read += d;
        if (read.split("\n").length > 3) resolve();
      }),
    );
    dev.stdout.destroy();
    expect(await exit).toBe(0);
    const [schedulesLeft, keysLeft, workersLeft] = await Promise.all([taskpool("schedules", "list", "--db", db), taskpool("keys", "list", "--db", db), taskpool("workers", "--json", "--db", db)]);
    expect(schedulesLeft.stdout).toMatch(/^No schedules/);
    expect(keysLeft.stdout).toMatch(/ admin {2}taskpool dev on .* revoked \S+Z {2}1000\/min\n$/);
    const { workers }: { workers: { workerId: string; status: string }[] } = JSON.parse(workersLeft.stdout);
    expect(workers.map((w) => [w.workerId, w.status])).toEqual(expect.arrayContaining(ROLES.map((role) => [`dev-${role}`, "inactive"])));
  }, 30_000);

  it.skipIf(!existsSync("/usr/bin/script"))("dev on a terminal redraws a live status in place below the banner, and shows the cursor again on Ctrl-C", async () => {
    // script(1) gives dev a terminal (its child execs into dev); once two frames are drawn, dev gets
    // Ctrl-C's SIGINT. A fixed 15 s before it was not always enough on a loaded machine: dev, still
    // starting, died of the signal.
    const command = `stty cols 100 rows 40; exec ${process.execPath} ${CLI} dev --db sqlite:${path} --no-demo`;
    const script = spawn("script", ["-qfec", command, "/dev/null"], { stdio: ["ignore", "pipe", "inherit"] });
    children.push(script);
    let out = "";
    script.stdout.on("data", (d) => (out += d));
    const exited = new Promise((resolve) => script.on("exit", resolve));
    await eventually(() => out.split("live status, redrawn every second").length > 2, 30_000, `two frames of dev's live status; it printed: ${out.slice(-500)}`);
    const dev = Number(execFileSync("pgrep", ["-P", String(script.pid)], { encoding: "utf8" }).trim());
    process.kill(dev, "SIGINT");
    expect([await exited, out.slice(-300)]).toEqual([0, expect.stringMatching(/Stopped\r?\n$/)]);
    const banner = out.indexOf("Dashboard");
    const frames = out.split("live status, redrawn every second");
    expect(frames.length).toBeGreaterThan(2); // two frames at least: the second drawn over the first
    expect(out.split("Dashboard")).toHaveLength(2); // printed once, never scrolled away
    expect(out.slice(0, banner)).not.toMatch(/Starting worker/); // log lines go to the frame's events, not above the banner
    const csi = "\u001b[";
    expect(out.indexOf(`${csi}?25l`)).toBeGreaterThan(banner); // the cursor hidden while redrawing
    expect(out).toMatch(/\[\d+A\r {2}\d{4}-\d\d-\d\dT[\d:]+Z {2}live status/); // back up over the last frame, then over it
    expect(frames.at(-1)).toMatch(/LAST EVENTS.\[K\r?\n {2}\d\d:\d\d:\d\d Starting worker dev-/);
    expect(out.lastIndexOf(`${csi}?25h`)).toBeLessThan(out.indexOf("Stopping: the server closes"));
    expect(out).toMatch(/Stopped\r?\n$/);
  }, 40_000);

  it("the example's real schedules: a weekly discovery, then every store it found resynced in 6 batches 4 hours apart", async () => {
    // Monday 2030-01-07, 13:00 UTC: 05:00 in Los Angeles, an hour before the weekly discovery.
    const clock = new ManualClock(new Date("2030-01-07T13:00:00.000Z"));
    const pool = await connect(db, { clock });
    const silent = pino({ level: "silent" });
    const coordinator = pool.coordinator({ logger: silent });
    try {
      for (const definition of schedules) await pool.schedule(definition);
      clock.set(new Date("2030-01-07T14:00:00.000Z"));
      expect((await coordinator.fireSchedules()).find((f) => f.name === "store_discovery")?.taskIds).toHaveLength(1);
      const worker = pool.worker({ roles: ["store_discovery"], handlers: crawl, pollIntervalMs: 50, logger: silent });
      await worker.start();
      await eventually(async () => (await pool.counts()).byType.store_discovery?.completed === 1, 10_000, "the discovery to complete");
      await worker.stop();

      clock.set(new Date("2030-01-08T08:00:00.000Z")); // midnight in Los Angeles
      const [resync] = (await coordinator.fireSchedules()).filter((f) => f.name === "product_resync");
      expect(resync.taskIds).toHaveLength(12);
      const tasks = (await pool.list({ taskType: "product_resync" }, { limit: 100 })).tasks;
      const batches = new Map<string, unknown[]>();
      for (const t of tasks) batches.set(t.scheduledFor.toISOString(), [...(batches.get(t.scheduledFor.toISOString()) ?? []), t.params.key]);
      expect([...batches.keys()].sort()).toEqual(["08", "12", "16", "20"].map((h) => `2030-01-08T${h}:00:00.000Z`).concat(["00", "04"].map((h) => `2030-01-09T${h}:00:00.000Z`)));
      expect([...batches.values()].flat().sort((a, b) => Number(a) - Number(b))).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
      expect(tasks.every((t) => t.concurrencyKey === `store:${t.params.key}`)).toBe(true);
    } finally {
      await coordinator.stop();
      await pool.close();
    }
  });
});

describe("dev's live status on a terminal", () => {
  const frame: StatusFrame = {
    now: new Date("2030-01-07T12:00:05.000Z"),
    byType: { store_discovery: { completed: 1 }, product_resync: { pending: 4, completed: 20 }, product_discovery: { running: 1, completed: 11 } },
    workers: [
      { workerId: "dev-product_discovery", status: "active", currentLoad: 1, capacity: 4, tasksProcessed: 11, secondsSinceHeartbeat: 0 },
      { workerId: CRASHING, status: "dead", currentLoad: 1, capacity: 1, tasksProcessed: 0, secondsSinceHeartbeat: 9 },
    ],
    events: ["12:00:01 ! Simulating a worker crash", "12:00:02 Claimed task 7\u001b[2J (product_resync)", "12:00:03 ✖ Dead worker detected"],
  };

  it("renders counts by role and status (the statuses some task is in), the workers and the last events", () => {
    expect(renderStatus(frame, 100, 40)).toEqual([
      "  2030-01-07T12:00:05Z  live status, redrawn every second; Ctrl-C stops",
      "",
      "  ROLE               PENDING  RUNNING  COMPLETED",
      "  product_discovery        0        1         11",
      "  product_resync           4        0         20",
      "  store_discovery          0        0          1",
      "",
      "  WORKER                          STATUS  LOAD  DONE  HEARTBEAT",
      "  dev-product_discovery           active  1/4     11  0s ago",
      `  ${CRASHING}  dead    1/1      0  9s ago`,
      "",
      "  LAST EVENTS",
      "  12:00:01 ! Simulating a worker crash",
      "  12:00:02 Claimed task 7 [2J (product_resync)", // a terminal escape in a log line cannot garble the frame
      "  12:00:03 ✖ Dead worker detected",
    ]);
    expect(renderStatus({ ...frame, byType: {}, workers: [], events: [] }, 100, 40).slice(2, 5)).toEqual(["  No tasks yet", "", "  No workers yet"]);
  });

  it("fits the terminal: lines cut to its width; when it is short, the tables become a line each before the last events give way", () => {
    const narrow = renderStatus(frame, 30, 40);
    expect(Math.max(...narrow.map((line) => line.length))).toBe(30);
    expect(narrow[9]).toBe("  dev-product_discovery-crash…");
    const short = renderStatus(frame, 100, 13);
    expect(short).toHaveLength(13);
    expect(short[7]).toBe("  Workers: 2 (1 active, 1 dead); taskpool workers lists them");
    expect(short.slice(9)).toEqual(["  LAST EVENTS", "  12:00:01 ! Simulating a worker crash", "  12:00:02 Claimed task 7 [2J (product_resync)", "  12:00:03 ✖ Dead worker detected"]);
    // 80×24 leaves 11 lines below dev's banner: the events were cut first, and the crash went unseen.
    const events = Array.from({ length: 8 }, (_, i) => `12:00:0${i} event ${i}`);
    const standard = renderStatus({ ...frame, events }, 80, 11);
    expect(standard.slice(0, 7)).toEqual([
      "  2030-01-07T12:00:05Z  live status, redrawn every second; Ctrl-C stops",
      "",
      "  Tasks of 3 roles: 4 pending, 1 running, 32 completed",
      "",
      "  Workers: 2 (1 active, 1 dead); taskpool workers lists them",
      "",
      "  LAST EVENTS",
    ]);
    expect(standard.slice(7)).toEqual(events.slice(-4).map((e) => `  ${e}`));
  });
  it("a terminal that reports a size of 0×0 (a pty nobody sized) gets the frame at 80×24, not every line cut to '…'", async () => {
    const pool = await connect("sqlite::memory:");
    const screen = Object.assign(new PassThrough(), { columns: 0, rows: 0 }) as unknown as NodeJS.WriteStream;
    let out = "";
    screen.on("data", (d) => (out += d));
    try {
      await pool.enqueue("product_discovery", { storeId: 1 });
      const live = new LiveStatus(screen);
      live.start(pool, ["", "  banner", ""]);
      await eventually(() => out.includes("\u001b[J"), 5000, "a first frame");
      await live.stop();
      expect(out).toContain("LAST EVENTS");
      expect(out).toMatch(/product_discovery\s+1/);
    } finally {
      await pool.close();
    }
  });

  it("the live loop draws frames of the pool's status over each other, keeps a crash in view through a burst of task moves, and prints plainly once stopped", async () => {
    // Routine lines fill the events; when they are full, the newest other lines keep at least half of them.
    const pool = await connect("sqlite::memory:");
    const screen = Object.assign(new PassThrough(), { columns: 120, rows: 30 }) as unknown as NodeJS.WriteStream;
    let out = "";
    screen.on("data", (d) => (out += d));
    try {
      await pool.enqueue("product_discovery", { storeId: 1 });
      const live = new LiveStatus(screen);
      live.print("12:00:01 ! Simulating a worker crash: killed worker dev-x mid-task 1", 40);
      for (let n = 1; n <= 10; n++) live.print(`12:00:02 Claimed task ${n} (product_resync)`, 20);
      for (let n = 1; n <= 3; n++) live.print(`12:00:02 Schedule ${n} fired`, 30);
      live.start(pool, ["", "  banner", ""]);
      await eventually(() => out.includes("\u001b[?25l") && out.includes("LAST EVENTS"), 5000, "a first frame");
      await live.stop();
      live.print("12:00:03 Stopping", 30);
      const frames = out.split("live status, redrawn every second");
      const [previous, last] = frames.slice(-2);
      expect(frames.length).toBeGreaterThanOrEqual(3); // a first frame, and the last drawn over the one before
      expect(last.startsWith("; Ctrl-C stops\u001b[K\n")).toBe(true);
      expect(out).toContain(`\u001b[${previous.split("\n").length - 1}A\r`);
      const events = last.split("LAST EVENTS")[1].split("\u001b[J")[0].split("\n").slice(1, -1).map((line) => line.replace("\u001b[K", ""));
      expect(events).toEqual([
        "  12:00:01 ! Simulating a worker crash: killed worker dev-x mid-task 1",
        ...[7, 8, 9, 10].map((n) => `  12:00:02 Claimed task ${n} (product_resync)`),
        ...[1, 2, 3].map((n) => `  12:00:02 Schedule ${n} fired`),
      ]);
      expect(last).toMatch(/product_discovery\s+1/);
      expect(out.endsWith("\u001b[?25h12:00:03 Stopping\n")).toBe(true);
    } finally {
      await pool.close();
    }
  });
});
