import { execFile, spawn } from "node:child_process";
import { promisify } from "node:util";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { connect } from "../src/api/taskpool.js";
import { printStatus } from "../src/cli/status.js";
import { ManualClock } from "../src/core/clock.js";
import { eventually } from "./helpers/logs.js";
import { createPostgres, PG_URL, removeSqliteFiles, sqlitePath } from "./helpers/stores.js";
import { CLI, envWith, taskpool, taskpoolIn, taskpoolRun, taskpoolWithStdin } from "./helpers/cli.js";

const MiB = 1024 * 1024;

describe("taskpool CLI", () => {
  const path = sqlitePath();
  const db = `sqlite:${path}`;
  afterEach(() => removeSqliteFiles(path));

  it("enqueue and status work against a database; bad input is refused with a clear message", async () => {
    // It says what it did: the first run sets the file up, a second has nothing to do.
    expect((await taskpool("migrate", "--db", db)).stdout).toMatch(new RegExp(`^Migrated ${db}: applied migrations 001 to 0\\d\\d\n$`));
    expect((await taskpool("migrate", "--db", db)).stdout).toBe(`${db} is up to date: no migration to apply\n`);
    expect((await taskpool("enqueue", "product_resync", '{"storeId":42}', "--priority", "5", "--db", db)).stdout).toMatch(/Enqueued task 1 \(product_resync\)/);
    const status = (await taskpool("status", "--db", db)).stdout;
    expect(status).toMatch(/product_resync\s+pending 1/);
    expect(status).toMatch(/Coordinator: WARNING no coordinator leads and none has ever swept/);
    // For scripts: the created task, and the status as records.
    const enqueued = JSON.parse((await taskpool("enqueue", "product_resync", '{"storeId":7}', "--json", "--db", db)).stdout);
    expect(enqueued).toMatchObject({ created: true, task: { id: 2, taskType: "product_resync", params: { storeId: 7 }, status: "pending" } });
    const records = JSON.parse((await taskpool("status", "--json", "--db", db)).stdout);
    expect(records).toMatchObject({ counts: { byStatus: { pending: 2 }, byType: { product_resync: { pending: 2 } } }, workers: [], coordinator: { holder: null, sweepOverdue: false } });
    // The refusals are independent of each other: started together, as each costs a process start.
    const [bad, rounded, badType, attempts, delay, limit, badUrl] = await Promise.all([
      taskpool("enqueue", "product_resync", "{not json", "--db", db).catch((e) => e),
      taskpool("enqueue", "product_resync", '{"storeId":12345678901234567890}', "--db", db).catch((e) => e),
      taskpool("enqueue", "bad type", "--db", db).catch((e) => e),
      taskpool("enqueue", "crawl", "--max-attempts", "0", "--db", db).catch((e) => e),
      taskpool("enqueue", "crawl", "--delay", "-5", "--db", db).catch((e) => e),
      taskpool("tasks", "list", "--limit", "5000", "--db", db).catch((e) => e),
      taskpool("status", "--db", "mysql://x").catch((e) => e),
    ]);
    expect(bad.code).toBe(1);
    // JSON.parse's reason (its wording varies with Node), and the likely cause: the shell ate the quotes.
    expect(bad.stderr).toMatch(/^taskpool: params is not valid JSON \(.+\): \{not json; quote it for the shell, e\.g\. '\{"storeId":42\}'\n$/);
    expect(rounded.stderr).toMatch(/^taskpool: params\.storeId: 12345678901234567890 is an integer beyond ±9007199254740991, .*stored as 12345678901234567000: send it as a string\n$/);
    expect(badType.stderr).toMatch(/taskpool: Invalid task: taskType: must be a letter, then letters/);
    // Named as the flag typed, not as the library's field (maxAttempts, delaySeconds); --limit by its option.
    expect(attempts.stderr).toMatch(/^taskpool: Invalid task: --max-attempts: Expected integer to be greater or equal to 1/);
    expect(delay.stderr).toMatch(/^taskpool: Invalid task: --delay: Expected number to be greater or equal to 0/);
    expect(limit.stderr).toBe("taskpool: option '--limit <n>' argument '5000' is invalid. expected a whole number from 1 to 1000\n");
    expect(badUrl.stderr).toMatch(/Unsupported database URL "mysql:\/\/x"/);
  }, 60_000);

  it("commander's refusals are one line like the others: the suggestion on it, or the help to read; exit 1", async () => {
    const cases: [string[], string][] = [
      [["statsu"], "taskpool: unknown command 'statsu'; did you mean status?"],
      [["frob"], "taskpool: unknown command 'frob'; see `taskpool --help`"],
      [["tasks", "lst"], "taskpool: unknown command 'lst'; did you mean list?"],
      // `workers list` is the group's default: the word reached it as an argument ("too many arguments for 'list'").
      [["workers", "frob"], "taskpool: unknown command 'frob'; see `taskpool workers --help`"],
      [["enqueue"], "taskpool: missing required argument 'taskType'; see `taskpool enqueue --help`"],
      [["enqueue", "crawl", "--priorty", "1"], "taskpool: unknown option '--priorty'; did you mean --priority?"],
      [["status", "extra"], "taskpool: too many arguments for 'status'. Expected 0 arguments but got 1; see `taskpool status --help`"],
      [["keys", "create"], "taskpool: required option '--scope <scope>' not specified; see `taskpool keys create --help`"],
    ];
    // Each was commander's "error: …", a suggestion on a second line, and no way forward for "frob".
    const runs = await Promise.all(cases.map(([args]) => taskpool(...args, "--db", db).catch((e) => e)));
    expect(runs.map((run) => [run.code, run.stderr])).toEqual(cases.map(([, line]) => [1, `${line}\n`]));
  }, 60_000);

  it("status says who leads and when it last swept, and warns when no coordinator has swept for a while", async () => {
    const clock = new ManualClock(new Date("2030-01-01T00:00:00.000Z"));
    const pool = await connect(db, { clock });
    const coordinatorLine = async () => {
      const out: string[] = [];
      await printStatus(pool, (line) => out.push(line));
      return out.find((line) => line.startsWith("Coordinator:"));
    };
    try {
      expect(await coordinatorLine()).toBe("Coordinator: no coordinator leads; no sweep yet");
      await pool.enqueue("greet");
      expect(await coordinatorLine()).toBe(
        "Coordinator: WARNING no coordinator leads and none has ever swept: dead workers are not being detected and expired leases not recovered (start one: taskpool coordinator)",
      );
      await pool.protocol.tryLead("coordinator", "c1", 180);
      await pool.protocol.recordSweep("coordinator", "c1", 60);
      clock.advance(30_000);
      expect(await coordinatorLine()).toBe("Coordinator: c1 leads (lease until 2030-01-01T00:03:00.000Z); last sweep by c1 at 2030-01-01T00:00:00.000Z, 30 s ago");
      clock.advance(91_000); // 2 × the default 60 s interval without a sweep: the leader is stuck
      expect(await coordinatorLine()).toBe(
        "Coordinator: WARNING no coordinator has swept for 121 s (c1 leads (lease until 2030-01-01T00:03:00.000Z); last sweep by c1 at 2030-01-01T00:00:00.000Z): dead workers are not being detected and expired leases not recovered",
      );
    } finally {
      await pool.close();
    }
  });

  it("an empty TASKPOOL_DATABASE_URL or TASKPOOL_URL, or a --schema with no schema to name, is refused by name, creating nothing", async () => {
    const dir = mkdtempSync(join(tmpdir(), "taskpool-cli-"));
    try {
      const run = (env: Record<string, string>, ...args: string[]): Promise<{ code?: number; stdout: string; stderr: string }> =>
        taskpoolIn(dir, envWith(env), ...args).catch((e) => e);
      // --schema typed for a file, which has none, or for a server, which has its own, would be ignored.
      const [emptyDb, emptyUrl, sqliteSchema, serverSchema] = await Promise.all([
        run({ TASKPOOL_DATABASE_URL: "" }, "serve", "--port", "0"),
        run({ TASKPOOL_URL: "" }, "status"),
        run({}, "status", "--db", "sqlite:./pool.db", "--schema", "other"),
        run({}, "tasks", "list", "--url", "http://127.0.0.1:9", "--schema", "other"),
      ]);
      expect([emptyDb.code, emptyDb.stderr]).toEqual([1, "taskpool: TASKPOOL_DATABASE_URL is set but empty: set it to what --db <url> takes, or unset it (or pass --db …, which wins over it)\n"]);
      expect(emptyUrl.stderr).toMatch(/^taskpool: TASKPOOL_URL is set but empty: set it to what --url <url> takes/);
      expect([sqliteSchema.code, sqliteSchema.stderr]).toEqual([1, "taskpool: --schema names a PostgreSQL schema, and a SQLite database has none: leave it out, or keep another pool in another file (--db sqlite:./other.db)\n"]);
      expect(serverSchema.stderr).toMatch(/^taskpool: --schema is the server's setting/);
      expect(readdirSync(dir)).toEqual([]);
      expect((await run({ TASKPOOL_DATABASE_URL: "" }, "migrate", "--db", db)).stdout).toMatch(/^Migrated /);
      // TASKPOOL_SCHEMA exported for the environment's PostgreSQL URLs does not stop a SQLite command, empty or not.
      const statuses = await Promise.all([run({ TASKPOOL_SCHEMA: "other" }, "status", "--db", db), run({ TASKPOOL_SCHEMA: "" }, "status", "--db", db)]);
      for (const status of statuses) expect(status.stdout).toMatch(/^Tasks/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a coordinator says when a signal stops it, and hands back its leadership", async () => {
    await taskpool("migrate", "--db", db);
    const child = spawn(process.execPath, [CLI, "coordinator", "--db", db, "--sweep-interval", "200"], { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    const exited = new Promise((resolve) => child.once("exit", resolve));
    await eventually(() => output.includes("Leading"), 15_000, "the coordinator to lead");
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(output).toMatch(/SIGTERM: stopping after the sweep under way, if any \(a second signal exits at once\)[\s\S]*Coordinator stopped; leadership handed back/);
  }, 30_000);

  it("explains a database it cannot open in one line, with the password hidden; the stack only with --verbose", async () => {
    const failures: [string[], RegExp][] = [
      [["status", "--db", "postgres://postgres:s3cret@127.0.0.1:1/postgres"], /^taskpool: cannot connect to postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:1\/postgres: connection refused; is PostgreSQL running/],
      // pg takes the password as a query parameter too.
      [["status", "--db", "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&password=s3cret"], /^taskpool: cannot connect to postgres:\/\/postgres@127\.0\.0\.1:1\/postgres\?sslmode=disable&password=\*\*\*: connection refused/],
      // An @ left unencoded in the password (pg takes the last @ as the separator), no user name, libpq's keyword form: the rest of the password showed.
      [["status", "--db", "postgres://postgres:s3cret@Hunter2@127.0.0.1:1/postgres"], /^taskpool: cannot connect to postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:1\/postgres: connection refused/],
      [["status", "--db", "postgres://:s3cret@127.0.0.1:1/postgres"], /^taskpool: cannot connect to postgres:\/\/:\*\*\*@127\.0\.0\.1:1\/postgres: connection refused/],
      [["status", "--db", "host=127.0.0.1 password=s3cret dbname=postgres"], /^taskpool: Unsupported database URL "host=127\.0\.0\.1 password=\*\*\* dbname=postgres"/],
      [["status", "--db", "postgres://postgres@127.0.0.1:5432/no_such_database_here"], /^taskpool: cannot connect to .*: database "no_such_database_here" does not exist; create it \(createdb\)/],
      [["migrate", "--db", "sqlite:./no/such/dir/tp.db"], /^taskpool: cannot open sqlite:\.\/no\/such\/dir\/tp\.db: the directory \.\/no\/such\/dir does not exist; create it \(mkdir -p/],
    ];
    // A directory: SQLite says only "unable to open database file".
    const dir = tmpdir();
    for (const command of ["status", "enqueue"]) {
      failures.push([[command, ...(command === "enqueue" ? ["crawl"] : []), "--db", `sqlite:${dir}`], new RegExp(`^taskpool: cannot open sqlite:${dir}: ${dir} is a directory, not a database file; name a file in it, e.g. --db sqlite:${join(dir, "taskpool.db")}\n$`)]);
    }
    // An HTTP server's port (taskpool serve's, given as --db): it hangs up on PostgreSQL's startup message.
    const web = createServer((_req, res) => res.end());
    await new Promise<void>((resolve) => web.listen(0, "127.0.0.1", resolve));
    const webPort = (web.address() as AddressInfo).port;
    failures.push([
      ["status", "--db", `postgres://postgres@127.0.0.1:${webPort}/postgres`],
      new RegExp(`^taskpool: cannot open .*: Connection terminated unexpectedly; is PostgreSQL listening at 127\\.0\\.0\\.1:${webPort}\\? \\(A taskpool server is reached with --url http://host:port, not --db\\)\n$`),
    ]);
    try {
      const [verbose, ...errors] = await Promise.all([
        taskpool("status", "--verbose", "--db", "postgres://postgres:s3cret@127.0.0.1:1/postgres").catch((e) => e),
        ...failures.map(([args]) => taskpool(...args).catch((e) => e)),
      ]);
      for (const [i, [, message]] of failures.entries()) {
        const error = errors[i];
        expect(error.code).toBe(1);
        expect(error.stderr).toMatch(message);
        expect(error.stderr).not.toMatch(/s3cret|\n\s+at /);
        expect(error.stderr.trim().split("\n")).toHaveLength(1);
      }
      expect(verbose.stderr).toMatch(/\n\s+at /);
    } finally {
      web.close();
    }
  }, 60_000);

  it("refuses what would lose or misplace its work, creating nothing: bad input, an in-memory database for a one-shot command, sqlite://, an unclear TASKPOOL_REQUIRE_REGISTERED, conflicting or bad flags", async () => {
    const dir = mkdtempSync(join(tmpdir(), "taskpool-cli-"));
    try {
      const run = (env: Record<string, string>, ...args: string[]): Promise<{ code?: number; stdout: string; stderr: string }> =>
        taskpoolIn(dir, envWith(env), ...args).catch((e) => e);
      writeFileSync(join(dir, "type.json"), JSON.stringify({ name: "crawl", maxAttempts: 0 }));
      // Refused by the library's own checks, before the database they name is created.
      const refusedFirst = await Promise.all([
        run({}, "enqueue", "bad type!", "--db", "sqlite:./a.db"),
        run({}, "enqueue", "crawl", "[1]", "--db", "sqlite:./b.db"),
        run({}, "schedules", "add", "nightly", "--type", "crawl", "--cron", "not a cron", "--db", "sqlite:./c.db"),
        run({}, "types", "register", "type.json", "--db", "sqlite:./d.db"),
      ]);
      expect(refusedFirst.map((r) => [r.code, r.stderr.split(":").slice(0, 2).join(":")])).toEqual([
        [1, "taskpool: Invalid task"],
        [1, "taskpool: Invalid task"],
        [1, "taskpool: Invalid --cron"],
        [1, "taskpool: Invalid task type"],
      ]);
      const [memory, slashes, unclear, off, on, retention, statusEvery] = await Promise.all([
        // Enqueued into a database that ended with the command, it said the task waited for a worker.
        run({}, "enqueue", "crawl", "--db", "sqlite::memory:"),
        // SQLite read //./stray.db as /stray.db.
        run({}, "enqueue", "crawl", "--db", "sqlite://./stray.db"),
        run({ TASKPOOL_REQUIRE_REGISTERED: "maybe" }, "enqueue", "crawl", "--db", "sqlite:./pool.db"),
        // =0 turned the check on.
        run({ TASKPOOL_REQUIRE_REGISTERED: "0" }, "enqueue", "crawl", "--db", "sqlite:./other.db"),
        run({ TASKPOOL_REQUIRE_REGISTERED: "1" }, "enqueue", "crawl", "--db", "sqlite:./other.db"),
        run({}, "coordinator", "--db", "sqlite:./pool.db", "--no-retention", "--retain-completed", "7d"),
        run({}, "dev", "--db", "sqlite:./pool.db", "--status-every", "abc"),
      ]);
      expect([memory.code, memory.stderr]).toEqual([1, expect.stringMatching(/^taskpool: sqlite::memory: is a database that lasts as long as the process that opened it: .* Give a file \(--db sqlite:\.\/taskpool\.db\)/)]);
      expect([slashes.code, slashes.stderr]).toEqual([1, expect.stringMatching(/^taskpool: Unsupported database URL "sqlite:\/\/\.\/stray\.db": use sqlite:\.\/path\.db/)]);
      expect([unclear.code, unclear.stderr]).toEqual([1, "taskpool: TASKPOOL_REQUIRE_REGISTERED=maybe is neither on nor off: set it to 1 (or true) to require registered task types, to 0 (or false) or unset it not to\n"]);
      expect([retention.code, retention.stderr]).toEqual([1, "taskpool: option '--no-retention' cannot be used with option '--retain-completed <age>'\n"]);
      expect([statusEvery.code, statusEvery.stderr]).toEqual([1, "taskpool: option '--status-every <seconds>' argument 'abc' is invalid. expected a whole number, such as 10\n"]);
      expect(readdirSync(dir).sort()).toEqual(["other.db", "type.json"]);
      expect(off.stdout).toMatch(/^Enqueued task \d \(crawl\)/);
      expect([on.code, on.stderr]).toEqual([1, expect.stringMatching(/^taskpool: Task type "crawl" is not registered, and this pool requires registered types/)]);
      expect(existsSync("/stray.db")).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // Run as nobody: root writes whatever the file's mode says. Only where the suite runs as root (CI does).
  it.skipIf(process.getuid?.() !== 0)("a SQLite file the process may not write is said so by a one-shot command and a worker, which exit rather than retry for good", async () => {
    const dir = mkdtempSync(join(tmpdir(), "taskpool-ro-"));
    try {
      const file = join(dir, "ro.db");
      await taskpool("enqueue", "job", "--db", `sqlite:${file}`);
      writeFileSync(join(dir, "h.mjs"), "export const handlers = { async job() { return {}; } };\n");
      const asNobody = (...args: string[]) =>
        promisify(execFile)("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, CLI, ...args], { timeout: 20_000 }).catch((e) => e);
      await promisify(execFile)("chown", ["-R", "nobody", dir]);
      await promisify(execFile)("chmod", ["444", file]);
      // The worker said "Cannot reach the database" and retried its claims every 500 ms until killed.
      const [enqueue, worker] = await Promise.all([asNobody("enqueue", "job", "--db", `sqlite:${file}`), asNobody("worker", "--handlers", join(dir, "h.mjs"), "--db", `sqlite:${file}`)]);
      for (const run of [enqueue, worker]) {
        expect(run.code).toBe(1);
        expect(run.stderr).toMatch(new RegExp(`taskpool: The SQLite file ${file} cannot be written by this process .*; nothing was written: give this process's user write access`));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a refusal names the flag or argument typed, not the library's field: keys create --name, workers shutdown <worker-id> and --run-id", async () => {
    await taskpool("migrate", "--db", db);
    const [name, worker, run] = await Promise.all([
      taskpool("keys", "create", "--scope", "worker", "--name", "", "--db", db).catch((e) => e),
      taskpool("workers", "shutdown", "", "--db", db).catch((e) => e),
      taskpool("workers", "shutdown", "w1", "--run-id", "", "--db", db).catch((e) => e),
    ]);
    expect(name.stderr).toBe('taskpool: Invalid API key options: --name: Expected string length greater or equal to 1 (got "")\n');
    expect(worker.stderr).toBe('taskpool: Invalid <worker-id>: <worker-id>: must be letters, digits, _ . - (1 to 128), e.g. worker-1 (got "")\n');
    expect(run.stderr).toBe('taskpool: Invalid worker shutdown: --run-id: Expected string length greater or equal to 1 (got "")\n');
  });

  it("enqueue warns when nobody serves an unregistered type, and --require-registered refuses it", async () => {
    const typo = await taskpool("enqueue", "prodcut_resync", "--db", db);
    expect(typo.stdout).toMatch(/Enqueued task 1 \(prodcut_resync\)/);
    expect(typo.stderr).toMatch(/^warning: task type "prodcut_resync" is not registered and no live worker has that role/);
    const strict = await taskpool("enqueue", "prodcut_resync", "--require-registered", "--db", db).catch((e) => e);
    expect(strict.code).toBe(1);
    // The setting named as the flag that set it, not the library's option (requireRegistered).
    expect(strict.stderr).toMatch(/^taskpool: Task type "prodcut_resync" is not registered, and this pool requires registered types \(--require-registered\)/);
    expect((await taskpool("status", "--db", db)).stdout).toMatch(/prodcut_resync\s+pending 1\n/);
  }, 60_000);

  it("enqueue --idempotency-key: the same command again creates nothing and prints the first task; the key with other params, or a bad key, is refused in one line", async () => {
    const first = await taskpoolRun("enqueue", "crawl", '{"page":1}', "--idempotency-key", "crawl-page-1", "--db", db);
    expect([first.code, first.stdout]).toEqual([0, "Enqueued task 1 (crawl)\n"]);
    // A repeat after an answer lost (a timeout), written the other way round: the same request.
    const again = await taskpoolRun("enqueue", "crawl", '{ "page": 1 }', "--idempotency-key", "crawl-page-1", "--db", db);
    expect([again.code, again.stdout]).toEqual([0, 'Task 1 (crawl) already enqueued by an earlier call with idempotency key "crawl-page-1": nothing new created; it is pending now\n']);
    // Refused as the library and the server refuse it, before the database is opened: no file appears.
    const fresh = `${path}.fresh.db`;
    const [replayed, reused, bad] = await Promise.all([
      taskpool("enqueue", "crawl", '{"page":1}', "--idempotency-key", "crawl-page-1", "--json", "--db", db),
      taskpoolRun("enqueue", "crawl", '{"page":2}', "--idempotency-key", "crawl-page-1", "--db", db),
      taskpoolRun("enqueue", "crawl", "--idempotency-key", "crawl page 1", "--db", `sqlite:${fresh}`),
    ]);
    expect(JSON.parse(replayed.stdout)).toMatchObject({ created: false, replayed: true, task: { id: 1, params: { page: 1 } } });
    expect([reused.code, reused.stdout, reused.stderr]).toEqual([
      1,
      "",
      'taskpool: Idempotency key "crawl-page-1" was already used for a different enqueue request; a key may only be sent again with the same request (a retry): use a new key for new tasks\n',
    ]);
    expect([bad.code, bad.stderr]).toEqual([1, 'taskpool: Invalid options: --idempotency-key: must be 1 to 255 visible ASCII characters, no spaces (a UUID is the usual choice) (got "crawl page 1")\n']);
    expect(existsSync(fresh)).toBe(false);
    const tasks = JSON.parse((await taskpool("tasks", "list", "--json", "--db", db)).stdout).tasks;
    expect(tasks.map((t: { id: number; params: unknown }) => [t.id, t.params])).toEqual([[1, { page: 1 }]]);
  }, 60_000);

  it("enqueue --file: one task per line of a file or stdin, all or nothing; a bad line, too many lines or a unique key enqueue nothing; the key replays the file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "taskpool-file-"));
    try {
      const file = join(dir, "stores.jsonl");
      // A byte order mark, a blank line and Windows line ends, as editors leave them.
      writeFileSync(file, '\uFEFF{"storeId":1}\r\n\r\n{"storeId":2}\r\n{"storeId":3}');
      const made = await taskpoolRun("enqueue", "crawl", "--file", file, "--priority", "4", "--idempotency-key", "stores-1", "--db", db);
      expect([made.code, made.stdout]).toEqual([0, "Enqueued 3 tasks (crawl): tasks 1 to 3\n"]);
      const again = await taskpoolRun("enqueue", "crawl", "--file", file, "--priority", "4", "--idempotency-key", "stores-1", "--db", db);
      expect([again.code, again.stdout]).toEqual([0, 'Enqueued nothing: 3 tasks (crawl, tasks 1 to 3) were enqueued by an earlier call with idempotency key "stores-1"\n']);
      const piped = await taskpoolWithStdin('{"storeId":4}\n', "enqueue", "crawl", "--file", "-", "--json", "--db", db);
      expect(JSON.parse(piped.stdout)).toMatchObject([{ created: true, task: { id: 4, params: { storeId: 4 }, priority: 0 } }]);

      // Every bad line named by its number, and none of the good ones enqueued. The refusals, each
      // of a file of its own, run together.
      writeFileSync(file, ['{"storeId":5}', "storeId: 6", "[7]", '{"storeId":12345678901234567890}', ""].join("\n"));
      const big = join(dir, "big.jsonl");
      writeFileSync(big, '{"n":1}\n'.repeat(10_001));
      const [bad, tooMany, uniqueKey, both, emptyStdin] = await Promise.all([
        taskpoolRun("enqueue", "crawl", "--file", file, "--db", db),
        taskpoolRun("enqueue", "crawl", "--file", big, "--db", db),
        taskpoolRun("enqueue", "crawl", "--file", big, "--unique-key", "k", "--db", db),
        taskpoolRun("enqueue", "crawl", "{}", "--file", big, "--db", db),
        taskpoolWithStdin("\n", "enqueue", "crawl", "--file", "-", "--db", db),
      ]);
      expect(bad.code).toBe(1);
      expect(bad.stderr).toMatch(/^taskpool: \S+stores\.jsonl has lines that are not a task's params \(a JSON object on one line\), so nothing was enqueued: line 2: not valid JSON \(.*\); line 3: expected a JSON object, got an array; line 4: params\.storeId: 12345678901234567890 is an integer beyond/);
      expect(tooMany.stderr).toMatch(/holds 10001 tasks, more than the 10000 one enqueue takes \(all or nothing, in one transaction\), so nothing was enqueued: split it, e\.g\. split -l 10000 /);
      expect(uniqueKey.stderr).toMatch(/^taskpool: --unique-key names one task; with --file/);
      expect(both.stderr).toBe("taskpool: give params or --file, not both: with --file, each line of the file is one task's params\n");
      expect(emptyStdin.stderr).toBe('taskpool: stdin holds no tasks: give one params object per line, e.g. {"storeId":42}\n');

      const tasks = JSON.parse((await taskpool("tasks", "list", "--order", "oldest", "--json", "--db", db)).stdout).tasks;
      expect(tasks.map((t: { params: unknown; priority: number }) => [t.params, t.priority])).toEqual([
        [{ storeId: 1 }, 4],
        [{ storeId: 2 }, 4],
        [{ storeId: 3 }, 4],
        [{ storeId: 4 }, 0],
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("enqueue --file: a refusal of the task type, which every line shares, names no line", async () => {
    const dir = mkdtempSync(join(tmpdir(), "taskpool-file-"));
    try {
      const file = join(dir, "stores.jsonl");
      writeFileSync(file, '{"storeId":1}\n{"storeId":2}\n');
      const [unregistered, badName] = await Promise.all([
        taskpoolRun("enqueue", "prodcut_resync", "--file", file, "--require-registered", "--db", db),
        taskpoolRun("enqueue", "bad type!", "--file", file, "--db", db),
      ]);
      expect(unregistered.code).toBe(1);
      expect(unregistered.stderr).toMatch(/^taskpool: Task type "prodcut_resync" is not registered, and this pool requires registered types/);
      expect(badName.code).toBe(1);
      expect(badName.stderr).toMatch(/^taskpool: Invalid task: taskType: /);
      expect(JSON.parse((await taskpool("tasks", "list", "--json", "--db", db)).stdout).tasks).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  it("a value over a size limit is refused naming the limit as the CLI has it (the default), not the library's limits.paramsBytes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "taskpool-limit-"));
    try {
      // Too long for a command line: a params file line and a type's params schema, each just over 1 MiB.
      const file = join(dir, "big.jsonl");
      writeFileSync(file, `{"storeId":1}\n${JSON.stringify({ blob: "x".repeat(MiB) })}\n`);
      const definition = join(dir, "big-type.json");
      writeFileSync(definition, JSON.stringify({ name: "crawl", paramsSchema: { type: "object", description: "x".repeat(MiB) } }));
      const [params, schema] = await Promise.all([taskpoolRun("enqueue", "crawl", "--file", file, "--db", db), taskpoolRun("types", "register", definition, "--db", db)]);
      const limit = "over the limit of 1,048,576 bytes (taskpool's default, which the CLI does not change); store large data elsewhere and pass a reference";
      expect([params.code, params.stderr]).toEqual([1, `taskpool: ${file} line 2: Invalid params: params is 1,048,587 bytes as JSON, ${limit}; nothing was enqueued\n`]);
      expect([schema.code, schema.stderr]).toEqual([1, `taskpool: Invalid paramsSchema: paramsSchema is 1,048,610 bytes as JSON, ${limit}\n`]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  it("enqueue --file on PostgreSQL: a params schema refusing one line enqueues none of the others", async () => {
    const { store, cleanup } = await createPostgres();
    const dir = mkdtempSync(join(tmpdir(), "taskpool-file-"));
    try {
      const on = ["--db", PG_URL, "--schema", store.schema];
      const definition = join(dir, "crawl.json");
      writeFileSync(definition, JSON.stringify({ name: "crawl", paramsSchema: { type: "object", properties: { storeId: { type: "integer" } }, required: ["storeId"] } }));
      await taskpool("types", "register", definition, ...on);
      const file = join(dir, "stores.jsonl");
      writeFileSync(file, '{"storeId":1}\n{"storeId":"two"}\n');
      const [refused, badOption] = await Promise.all([taskpoolRun("enqueue", "crawl", "--file", file, ...on), taskpoolRun("enqueue", "crawl", "--file", file, "--max-attempts", "0", ...on)]);
      expect([refused.code, refused.stderr]).toEqual([1, `taskpool: ${file} line 2: Invalid params for crawl v1: params.storeId: must be integer; nothing was enqueued\n`]);
      // An option every line shares is refused as the option, with no line.
      expect(badOption.stderr).toBe("taskpool: Invalid task: --max-attempts: Expected integer to be greater or equal to 1 (got 0)\n");
      expect(JSON.parse((await taskpool("tasks", "list", "--json", ...on)).stdout).tasks).toEqual([]);
      writeFileSync(file, '{"storeId":1}\n{"storeId":2}\n');
      expect((await taskpool("enqueue", "crawl", "--file", file, ...on)).stdout).toMatch(/^Enqueued 2 tasks \(crawl\): tasks \d+ to \d+\n$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await cleanup();
    }
  }, 60_000);

  it("tasks cancel on PostgreSQL stops the worker running the task at once, not at its next heartbeat", async () => {
    const { store, cleanup } = await createPostgres();
    const module = `${path}.waits.mjs`;
    writeFileSync(module, "export const handlers = { waits: (params, ctx) => new Promise((resolve, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('stopped')))) };\n");
    const on = ["--db", PG_URL, "--schema", store.schema];
    const child = spawn(process.execPath, [CLI, "worker", "--handlers", module, "--id", "waiter", "--heartbeat-interval", "60000", ...on], {
      env: { ...process.env, POLL_INTERVAL_MS: "100", LOG_LEVEL: "debug" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    try {
      const { id } = JSON.parse((await taskpool("enqueue", "waits", "{}", "--json", ...on)).stdout).task;
      await eventually(() => output.includes(`Claimed task ${id} (waits)`), 30_000, "the task to be claimed");
      const sent = Date.now();
      await taskpool("tasks", "cancel", String(id), ...on);
      await eventually(() => output.includes(`Task ${id} stopped: it was cancelled`), 25_000, "the worker to stop the task");
      // Its heartbeat was a minute away; the bound leaves room for starting the CLI on a loaded machine.
      expect(Date.now() - sent).toBeLessThan(20_000);
    } finally {
      child.kill("SIGTERM");
      await new Promise((resolve) => child.once("exit", resolve));
      rmSync(module, { force: true });
      await cleanup();
    }
  }, 60_000);

  it("types register, list and show the registry; enqueue then checks params against it", async () => {
    const file = `${path}.type.json`;
    writeFileSync(file, JSON.stringify({ name: "product_resync", paramsSchema: { type: "object", properties: { storeId: { type: "integer" } }, required: ["storeId"] }, maxRunning: 3 }));
    try {
      expect((await taskpool("types", "register", file, "--db", db)).stdout).toMatch(/Registered product_resync v1 .*at most 3 running, params schema/);
      expect((await taskpool("types", "register", file, "--db", db)).stdout).toMatch(/Unchanged: product_resync v1/);
      const [list, listJson, show, bad, none, missing] = await Promise.all([
        taskpool("types", "list", "--db", db),
        taskpool("types", "list", "--json", "--db", db),
        taskpool("types", "show", "product_resync", "--db", db),
        taskpool("enqueue", "product_resync", '{"storeId":"x"}', "--db", db).catch((e) => e),
        taskpool("migrate", "--db", `sqlite:${path}.empty`).then(() => taskpool("types", "show", "nope", "--db", `sqlite:${path}.empty`).catch((e) => e)),
        taskpool("types", "show", "nope", "--db", db).catch((e) => e),
      ]);
      expect(list.stdout).toMatch(/^product_resync v1/);
      // docs/upgrading.md has operators look for patterns RE2 does not run in it.
      expect(JSON.parse(listJson.stdout)).toMatchObject([{ name: "product_resync", version: 1, paramsSchema: { required: ["storeId"] } }]);
      expect(JSON.parse(show.stdout)[0]).toMatchObject({ name: "product_resync", version: 1, maxRunning: 3 });
      expect(bad.stderr).toMatch(/taskpool: Invalid params for product_resync v1: params.storeId: must be integer/);
      expect(none.stderr).toBe('taskpool: task type "nope" is not registered; no type is registered (taskpool types register <file> registers one)\n');
      expect(missing.stderr).toBe('taskpool: task type "nope" is not registered; registered: product_resync (taskpool types list shows them)\n');
    } finally {
      rmSync(file, { force: true });
      removeSqliteFiles(`${path}.empty`);
    }
  }, 60_000);

  /** `taskpool worker …args` until it has completed task 1, then SIGTERM: it must exit 0. Its stdout. */
  async function workUntilTask1(...args: string[]): Promise<string> {
    const child = spawn(process.execPath, [CLI, "worker", ...args], { env: { ...process.env, POLL_INTERVAL_MS: "100", LOG_LEVEL: "debug" }, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    await eventually(() => output.includes("Task 1 completed"), 30_000, "the task to complete");
    child.kill("SIGTERM");
    expect(await new Promise((resolve) => child.on("exit", resolve))).toBe(0);
    return output;
  }

  it("worker runs the handlers a module exports until SIGTERM", async () => {
    const module = `${path}.handlers.mjs`;
    writeFileSync(module, "export const handlers = { greet: async (params) => ({ hello: params.name }) };\n");
    try {
      await taskpool("enqueue", "greet", '{"name":"taskpool"}', "--db", db);
      // TypeScript, as the README's handlers are written: Node 20 said only "Unknown file extension".
      writeFileSync(`${path}.handlers.ts`, "export const handlers = { greet: async (params: { name: string }) => ({ hello: params.name }) };\n");
      // The refusals alongside the worker that runs: each is a process start of its own.
      const [missing, typescript] = await Promise.all([
        taskpool("worker", "--handlers", `${path}.nothing.mjs`, "--db", db).catch((e) => e),
        taskpool("worker", "--handlers", `${path}.handlers.ts`, "--db", db).catch((e) => e),
        workUntilTask1("--handlers", module, "--id", "cli-worker", "--db", db),
      ]);
      expect((await taskpool("status", "--db", db)).stdout).toMatch(/greet\s+completed 1[\s\S]*cli-worker\s+inactive/);
      expect([missing.code, missing.stderr]).toEqual([1, `taskpool: cannot load handlers from ${path}.nothing.mjs: there is no file ${path}.nothing.mjs\n`]);
      expect([typescript.code, typescript.stderr]).toEqual([
        1,
        `taskpool: cannot load handlers from ${path}.handlers.ts: taskpool loads JavaScript, not TypeScript: compile it (tsc) and pass the .js it makes\n`,
      ]);
    } finally {
      rmSync(module, { force: true });
      rmSync(`${path}.handlers.ts`, { force: true });
    }
  }, 60_000);

  it("worker --role runs some of a module's handlers without warning of the others, and refuses a role with none", async () => {
    // The example's deployment splits one module's roles over machines; each start warned
    // "Handlers for … will not run here: not among this worker's roles".
    const module = `${path}.roles.mjs`;
    writeFileSync(module, "export const handlers = { crawl: async () => ({ crawled: true }), parse: async () => ({}) };\n");
    try {
      await taskpool("enqueue", "crawl", "{}", "--db", db);
      const [output, typo] = await Promise.all([
        workUntilTask1("--handlers", module, "--role", "crawl", "--db", db),
        taskpool("worker", "--handlers", module, "--role", "crawl,prase", "--db", db).catch((e) => e),
      ]);
      expect(output).toMatch(/Starting worker \S+ for roles: crawl"/);
      expect(output.split("\n").filter((line) => line.includes('"level":40'))).toEqual([]);
      expect([typo.code, typo.stderr]).toEqual([1, 'taskpool: No handler for role "prase": add handlers.prase = async (params, ctx) => { ... }\n']);
    } finally {
      rmSync(module, { force: true });
    }
  }, 60_000);

  it("worker --shutdown-grace: on SIGTERM a task still running after it is aborted and released", async () => {
    const module = `${path}.slow.mjs`;
    writeFileSync(module, "export const handlers = { slow: (params, ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', resolve)) };\n");
    try {
      const [enqueued, bad] = await Promise.all([
        taskpool("enqueue", "slow", "{}", "--json", "--db", db),
        taskpool("worker", "--handlers", module, "--shutdown-grace", "5s", "--db", db).catch((e) => e),
      ]);
      expect(bad.stderr).toMatch(/--shutdown-grace <seconds>.*expected a whole number, without a unit/);
      const { id } = JSON.parse(enqueued.stdout).task;
      const child = spawn(process.execPath, [CLI, "worker", "--handlers", module, "--id", "graceful", "--shutdown-grace", "1", "--db", db], {
        env: { ...process.env, POLL_INTERVAL_MS: "100", LOG_LEVEL: "debug" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let output = "";
      child.stdout.on("data", (d) => (output += d));
      await eventually(() => output.includes(`Claimed task ${id} (slow)`), 30_000, "the task to be claimed");
      const sent = Date.now();
      child.kill("SIGTERM");
      expect(await new Promise((resolve) => child.on("exit", resolve))).toBe(0);
      // The default grace (25 s) would have held it far longer.
      expect(Date.now() - sent).toBeLessThan(10_000);
      expect(output).toContain("grace 1000 ms");
      const { task } = JSON.parse((await taskpool("tasks", "show", String(id), "--json", "--db", db)).stdout);
      expect(task).toMatchObject({ status: "pending", attempts: 0 });
    } finally {
      rmSync(module, { force: true });
    }
  }, 60_000);

  it("a command that works on the database directly refuses a server: TASKPOOL_URL with no database given, --db http://…, --url; it writes nothing", async () => {
    // In an empty directory, where a fallback to the default sqlite:./taskpool.db would leave its file.
    const dir = mkdtempSync(join(tmpdir(), "taskpool-cli-"));
    const server = "http://127.0.0.1:9";
    const run = (env: Record<string, string>, args: string[]) => taskpoolIn(dir, envWith(env), ...args).then(() => ({ code: 0, stderr: "" }), (e: { code: number; stderr: string }) => e);
    // Each refusal says where to run it instead, as the library's does for a pool over HTTP.
    const keys = "Managing API keys is not available over HTTP: use taskpool keys --db … on the server's database, not";
    const commands: [string, string[], string][] = [
      ["keys create", ["--scope", "admin"], keys],
      ["keys list", [], keys],
      ["keys revoke", ["1"], keys],
      ["coordinator", [], "A coordinator is not available over HTTP: run it where the database is (taskpool serve runs one, or taskpool coordinator --db …), not through"],
      ["migrate", [], "Migrating is not available over HTTP: a server migrates its database as it starts; run taskpool migrate --db … with the database's URL, not"],
      ["serve", ["--port", "0"], "serve is the server: give it a database (sqlite:./taskpool.db or postgres://…), not"],
      ["dev", ["--no-demo", "--port", "0"], "dev runs its own server: give it a database (sqlite:./taskpool.db or postgres://…), not"],
    ];
    try {
      // Every run awaited before any check: one that did not refuse ends only at its timeout, and a
      // check failing first would end the test with it still running. A command's three runs at a
      // time, not all 21 processes at once: on a loaded 2-core machine those outlasted the timeout.
      const outcomes = [];
      for (const [command, rest, refusal] of commands) {
        const args = [...command.split(" "), ...rest];
        const [viaEnv, ...given] = await Promise.all([
          run({ TASKPOOL_URL: server, TASKPOOL_API_KEY: "tp_x" }, args),
          ...[["--db", server], ["--url", server, "--api-key", "tp_x"]].map((flags) => run({}, [...args, ...flags])),
        ]);
        outcomes.push({ command, refusal, viaEnv, given });
      }
      for (const { command, refusal, viaEnv, given } of outcomes) {
        expect([viaEnv.code, viaEnv.stderr]).toEqual([
          1,
          `taskpool: TASKPOOL_URL is set (${server}), but taskpool ${command} works on the database directly, not through a server: pass --db with the server's database URL (or set TASKPOOL_DATABASE_URL) rather than fall back to sqlite:./taskpool.db\n`,
        ]);
        for (const refused of given) expect([refused.code, refused.stderr]).toEqual([1, `taskpool: ${refusal} ${server}\n`]);
      }
      expect(readdirSync(dir)).toEqual([]);
      // A database named (--db, or TASKPOOL_DATABASE_URL) is what such a command works on, TASKPOOL_URL or not.
      // A key id that is none is refused before any database is opened.
      const [migrated, typo] = await Promise.all([
        taskpoolIn(dir, envWith({ TASKPOOL_URL: server, TASKPOOL_DATABASE_URL: db }), "migrate"),
        run({}, ["keys", "revoke", "abc", "--db", `sqlite:${join(dir, "keys.db")}`]),
      ]);
      expect(migrated.stdout).toMatch(/^Migrated .*: applied migrations 001 to /);
      expect((await taskpoolIn(dir, envWith({ TASKPOOL_URL: server }), "keys", "list", "--db", db)).stdout).toMatch(/^No API keys/);
      expect([typo.code, typo.stderr]).toEqual([1, 'taskpool: "abc" is not a key id: pass the number `taskpool keys list` shows first, e.g. 3\n']);
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("a database a newer taskpool migrated is refused in one line, exit 1, by every command that opens it (serve does not start)", async () => {
    await taskpool("migrate", "--db", db);
    const file = new Database(path);
    const known = file.pragma("user_version", { simple: true }) as number;
    file.pragma(`user_version = ${known + 1}`);
    file.close();
    const handlers = `${path}.handlers.mjs`;
    writeFileSync(handlers, "export const handlers = { greet: async () => null };\n");
    try {
      const commands = [["status"], ["migrate"], ["serve", "--port", "0"], ["worker", "--handlers", handlers]];
      const refusals = await Promise.all(commands.map((args) => taskpool(...args, "--db", db).catch((e) => e)));
      for (const [i, args] of commands.entries()) {
        const refused = refusals[i];
        expect([args[0], refused.code, refused.stderr]).toEqual([
          args[0],
          1,
          `taskpool: The SQLite file ${path} was migrated by a newer taskpool (schema ${known + 1}, this build knows ${known}): ` +
            "upgrade taskpool to the version that migrated it, or restore a backup taken before that migration; this build will not use it\n",
        ]);
      }
    } finally {
      rmSync(handlers, { force: true });
    }
  }, 60_000);

  it("a command that reads the database refuses a SQLite file that is not there, rather than create it empty and report nothing; one that writes creates it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "taskpool-cli-"));
    const run = (...args: string[]) => taskpoolIn(dir, envWith({}), ...args).then(() => ({ code: 0, stderr: "" }), (e: { code: number; stderr: string }) => e);
    try {
      const commands = [["status"], ["tasks", "list"], ["workers"], ["keys", "list"], ["tasks", "cancel", "1"], ["capacity"]];
      const refusals = await Promise.all(commands.map((args) => run(...args)));
      for (const [i, args] of commands.entries()) {
        const refused = refusals[i];
        expect([args.join(" "), refused.code, refused.stderr]).toEqual([
          args.join(" "),
          1,
          `taskpool: no database at ./taskpool.db (${join(dir, "taskpool.db")}): run this where the database is, or pass --db sqlite:/path/to/taskpool.db; taskpool dev, serve, migrate, enqueue, keys create, types register or schedules add create one\n`,
        ]);
      }
      expect(readdirSync(dir)).toEqual([]);
      expect((await taskpoolIn(dir, envWith({}), "enqueue", "crawl")).stdout).toMatch(/^Enqueued task 1 \(crawl\)/);
      expect((await taskpoolIn(dir, envWith({}), "status")).stdout).toMatch(/crawl/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("a command that reads refuses a PostgreSQL schema taskpool never set up (a mistyped --schema), naming the ones it did, and creates nothing", async () => {
    const { store, cleanup } = await createPostgres();
    const { schema } = store;
    const typo = `${schema}_typo`;
    const schemaNamed = async (name: string) => {
      const admin = new pg.Client({ connectionString: PG_URL });
      await admin.connect();
      try {
        return (await admin.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [name])).rowCount;
      } finally {
        await admin.end();
      }
    };
    try {
      await Promise.all(
        [["status"], ["tasks", "list"], ["workers"], ["keys", "list"]].map(async (args) => {
          const refused = await taskpool(...args, "--db", PG_URL, "--schema", typo).catch((e) => e);
          expect([args.join(" "), refused.code]).toEqual([args.join(" "), 1]);
          expect(refused.stderr).toMatch(
            new RegExp(`^taskpool: no taskpool schema "${typo}" in ${PG_URL} \\(taskpool's schemas there: .*\\b${schema}\\b.*\\): fix --schema or TASKPOOL_SCHEMA, or --db; taskpool dev, serve, migrate, enqueue, keys create, types register or schedules add create one\n$`),
          );
        }),
      );
      expect(await schemaNamed(typo)).toBe(0);
      expect((await taskpool("status", "--db", PG_URL, "--schema", schema)).stdout).toMatch(/Tasks/);
    } finally {
      await cleanup();
    }
  }, 60_000);
});
