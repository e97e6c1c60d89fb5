import { execFile, spawn } from "node:child_process";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, request as httpRequest } from "node:http";
import { type AddressInfo, connect as connectSocket, createServer } from "node:net";
import { promisify } from "node:util";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { isLoopback } from "../../src/core/loopback.js";
import { eventually } from "../helpers/logs.js";
import { createPostgres, dropSchema, PG_URL, removeSqliteFiles, sqlitePath } from "../helpers/stores.js";
import { request } from "./harness.js";
import { CLI, envWith, taskpool, taskpoolIn, taskpoolRun } from "../helpers/cli.js";

const run = promisify(execFile);

/** `taskpool serve …args` on a free port of 127.0.0.1, logging at info; resolves once it listens. `output()` is all it has printed so far. */
async function startServe(...args: string[]) {
  return startServeAt("info", ...args);
}

async function startServeAt(logLevel: string, ...args: string[]) {
  const child = spawn(process.execPath, [CLI, "serve", "--port", "0", ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, LOG_LEVEL: logLevel } });
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  const stop = () =>
    new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
      child.once("exit", resolve);
      child.kill("SIGTERM");
    });
  try {
    const url = (await eventually(() => /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output), 20_000, "the server to listen"))[1];
    return { child, url, output: () => output, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

describe("taskpool keys and serve", () => {
  const path = sqlitePath();
  const db = `sqlite:${path}`;
  afterEach(() => removeSqliteFiles(path));

  it("keys create prints the key once (only the key with --quiet); list shows keys without them; revoke refuses them", async () => {
    const quiet = (await taskpool("keys", "create", "--scope", "worker", "--quiet", "--db", db)).stdout;
    expect(quiet).toMatch(/^tp_[A-Za-z0-9_-]{43}\n$/);
    const loud = (await taskpool("keys", "create", "--scope", "admin", "--name", "ci", "--rate-limit", "600", "--db", db)).stdout;
    expect(loud).toMatch(/^Created API key 2 \(admin, "ci"\):\ntp_[A-Za-z0-9_-]{43}\nStore it now: only its hash is kept/);
    const list = (await taskpool("keys", "list", "--db", db)).stdout;
    expect(list).toMatch(
      new RegExp(
        `^ID {2}SCOPE {3}NAME {2}KEY {11}CREATED {15}STATE {3}RATE LIMIT\\n 1 {2}worker {2}- {5}${quiet.slice(0, 11)}… {2}\\S+Z {2}active {2}server's\\n 2 {2}admin {3}ci {4}tp_\\S+… {2}\\S+Z {2}active {2}600/min\\n$`,
      ),
    );
    expect(list).not.toContain(quiet.trim());
    expect((await taskpool("keys", "revoke", "1", "--db", db)).stdout).toBe("Revoked API key 1 (worker); running servers refuse it within 5 s\n");
    // Again: said so, with when, and nothing changes (exit 0: repeating is harmless).
    const [revokedList, revokedAgain] = await Promise.all([taskpool("keys", "list", "--db", db), taskpool("keys", "revoke", "1", "--db", db)]);
    expect(revokedList.stdout).toMatch(/^ 1 {2}worker .* revoked \d{4}-\S+Z {2}server's$/m);
    const again = revokedAgain.stdout;
    const revokedAt = /revoked (\S+Z) /.exec(revokedList.stdout)![1];
    expect(again).toBe(`API key 1 (worker) was already revoked, at ${revokedAt}; nothing changed\n`);
    const [listed, unknown, badScope] = await Promise.all([
      taskpool("keys", "list", "--json", "--db", db),
      taskpool("keys", "revoke", "7", "--db", db).catch((e) => e),
      taskpool("keys", "create", "--scope", "root", "--db", db).catch((e) => e),
    ]);
    expect(JSON.parse(listed.stdout).map((k: { id: number; scope: string; revokedAt: string | null }) => [k.id, k.scope, k.revokedAt !== null])).toEqual([
      [1, "worker", true],
      [2, "admin", false],
    ]);
    expect(unknown.stderr).toBe("taskpool: API key 7 does not exist (taskpool keys list shows the ids)\n");
    expect(badScope.stderr).toMatch(/argument 'root' is invalid\. Allowed choices are admin, producer, worker/);
  }, 60_000);

  it("serve refuses a non-loopback address when no key exists", async () => {
    await taskpool("migrate", "--db", db);
    const refused = await taskpool("serve", "--host", "0.0.0.0", "--port", "0", "--db", db).catch((e) => e);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      "taskpool: refusing to listen on 0.0.0.0 with no API key: anyone who can reach it could create, claim and cancel tasks. " +
        "Create one first (taskpool keys create --scope admin), or pass --no-auth on a network you trust\n",
    );
    expect(["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"].every(isLoopback)).toBe(true);
    expect(["0.0.0.0", "::", "10.0.0.1", "192.168.1.1", "example.com"].some(isLoopback)).toBe(false);
  }, 30_000);

  it("serve refuses a non-loopback address for a database not set up, and creates nothing (a mistyped --db or --schema)", async () => {
    const { schema, cleanup } = await createPostgres();
    const typo = `${schema}_typo`;
    try {
      const [refused, pgRefused] = await Promise.all([
        taskpool("serve", "--host", "0.0.0.0", "--port", "0", "--db", db).catch((e) => e),
        taskpool("serve", "--host", "0.0.0.0", "--port", "0", "--db", PG_URL, "--schema", typo).catch((e) => e),
      ]);
      // No file there: it was created, migrated, then refused for want of a key, as if the fix were a key in it.
      expect(refused.code).toBe(1);
      expect(refused.stderr).toBe(
        `taskpool: refusing to listen on 0.0.0.0 with no API key, as there is no database at ${path} (${path}) to hold one: fix --db, ` +
          "or create the database and a key first (taskpool keys create --scope admin), or pass --no-auth on a network you trust\n",
      );
      expect(existsSync(path)).toBe(false);
      expect(pgRefused.code).toBe(1);
      expect(pgRefused.stderr).toMatch(
        new RegExp(`^taskpool: refusing to listen on 0\\.0\\.0\\.0 with no API key, as there is no taskpool schema "${typo}" in postgres://\\S+ \\(taskpool's schemas there: [^)]*\\b${schema}\\b[^)]*\\) to hold one: fix --db or --schema, `),
      );
      const admin = new pg.Client({ connectionString: PG_URL });
      await admin.connect();
      const left = await admin.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [typo]).finally(() => admin.end());
      expect(left.rowCount).toBe(0);
    } finally {
      await dropSchema(typo);
      await cleanup();
    }
  }, 30_000);

  it("serve requires the keys that exist and stops gracefully on SIGTERM, answering a waiting claim first, its coordinator too", async () => {
    const key = (await taskpool("keys", "create", "--scope", "admin", "--quiet", "--db", db)).stdout.trim();
    const { child, url, output } = await startServe("--db", db);
    expect(output()).toMatch(/taskpool requires API keys/);
    // The start names the database it serves: a mistyped --schema or --db shows there.
    expect(output()).toContain(`(docs: ${url}/docs); database ${db}"`);

    expect((await request(url, "GET", "/api/workers", undefined, null)).status).toBe(401);
    expect((await request(url, "POST", "/api/tasks", { task_type: "crawl" }, key)).status).toBe(201);
    const waiting = request(url, "POST", "/api/tasks/claim", { worker_id: "w1", task_types: ["other"], wait_ms: 20_000 }, key);
    const waitingClaims = async () => /^taskpool_waiting_claims (\d+)$/m.exec((await fetch(`${url}/metrics`, { headers: { "x-api-key": key } }).then((r) => r.text())) ?? "")?.[1];
    await eventually(async () => (await waitingClaims()) === "1", 5000, "the claim to arrive");
    const started = performance.now();
    child.kill("SIGTERM");
    expect((await waiting).status).toBe(404);
    const code = await new Promise((resolve) => child.on("exit", resolve));
    expect(code).toBe(0);
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(output()).toMatch(/SIGTERM: no new requests; finishing those in flight/);
    expect(output()).toMatch(/"msg":"Stopped"/);
    // Its coordinator led, swept, and stepped down on the way out: no lease left for others to wait out.
    expect(output()).toMatch(/Leading: this coordinator sweeps/);
    expect(output()).toMatch(/"msg":"Coordinator stopped; leadership handed back: another coordinator leads from its next tick"/);
    expect((await taskpool("status", "--db", db)).stdout).toMatch(/Coordinator: no coordinator leads; last sweep by coordinator-/);
  }, 60_000);

  it("serve: a second signal while it waits for requests in flight exits at once, saying so, with status 1", async () => {
    const { child, url, output } = await startServe("--db", db, "--no-auth");
    // A request whose body is still on its way: in flight, the close waits for it.
    const { port } = new URL(url);
    const slow = connectSocket(Number(port), "127.0.0.1");
    await new Promise((resolve) => slow.once("connect", resolve));
    slow.write("POST /api/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{");
    await new Promise((resolve) => setTimeout(resolve, 200));
    const code = new Promise((resolve) => child.on("exit", resolve));
    child.kill("SIGTERM");
    await eventually(() => output().includes("SIGTERM: no new requests; finishing those in flight"), 5000, "the close to begin");
    child.kill("SIGTERM");
    expect(await code).toBe(1);
    expect(output()).toMatch(/"level":40[^\n]*Second SIGTERM: exiting now, without waiting for the requests in flight/);
    slow.destroy();
  }, 30_000);

  it("serve --shutdown-grace: a request still in flight when the grace ends has its connection dropped, and the server exits 0, said in a warning", async () => {
    const { child, url, output } = await startServe("--db", db, "--no-auth", "--shutdown-grace", "1");
    // A request whose body never comes: in flight until the grace ends.
    const slow = connectSocket(Number(new URL(url).port), "127.0.0.1");
    await new Promise((resolve) => slow.once("connect", resolve));
    slow.write("POST /api/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{");
    const dropped = new Promise((resolve) => slow.once("close", resolve));
    await new Promise((resolve) => setTimeout(resolve, 200));
    const code = new Promise((resolve) => child.on("exit", resolve));
    const started = performance.now();
    child.kill("SIGTERM");
    expect(await code).toBe(0);
    await dropped;
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(output()).toMatch(/SIGTERM: no new requests; finishing those in flight, for up to 1 s/);
    expect(output()).toMatch(/"level":40[^\n]*Closing with 1 request still in flight after 1000 ms/);
  }, 30_000);

  it("serve --shutdown-grace longer than a timer can wait is refused: Node fired such a timer at once, and there was no grace at all", async () => {
    const refused = await taskpool("serve", "--shutdown-grace", "3000000", "--db", db).catch((e) => e);
    expect([refused.code, refused.stderr]).toEqual([1, "taskpool: option '--shutdown-grace <seconds>' argument '3000000' is invalid. expected a whole number from 0 to 2147483\n"]);
  });

  it("serve --shutdown-delay: on SIGTERM it goes on serving while /readyz answers 503 and answers close their connections; a second signal, or the delay's end, stops it", async () => {
    // The second server, for the delay's end, starts beside the first.
    const [started, briefStarted] = await Promise.allSettled([startServe("--db", db, "--no-auth", "--shutdown-delay", "600"), startServe("--db", db, "--no-auth", "--shutdown-delay", "1")]);
    if (started.status === "rejected" || briefStarted.status === "rejected") {
      await Promise.all([started, briefStarted].map((s) => s.status === "fulfilled" && s.value.stop()));
      throw started.status === "rejected" ? started.reason : (briefStarted as PromiseRejectedResult).reason;
    }
    try {
      const { child, url, output } = started.value;
      expect((await request(url, "GET", "/readyz", undefined, null)).status).toBe(200);
      child.kill("SIGTERM");
      await eventually(() => output().includes("SIGTERM: /readyz answers 503 from now; serving 600 s more"), 5000, "the delay to begin");
      const ready = await request(url, "GET", "/readyz", undefined, null);
      expect([ready.status, ready.body, ready.headers.get("connection")]).toEqual([
        503,
        { success: false, error: "not_ready", message: "This server is shutting down; send requests to another" },
        "close",
      ]);
      // The drain is planned: its 503s are said at info, not warned about.
      await eventually(() => output().includes("GET /readyz answered 503: This server is shutting down"), 5000, "the 503 to be logged");
      expect(output()).toMatch(/"level":30[^\n]*GET \/readyz answered 503: This server is shutting down/);
      // Requests a balancer still sends meanwhile are served, not refused.
      const created = await request(url, "POST", "/api/tasks", { task_type: "crawl" }, null);
      expect([created.status, created.headers.get("connection")]).toEqual([201, "close"]);
      const code = new Promise((resolve) => child.on("exit", resolve));
      child.kill("SIGTERM");
      expect(await code).toBe(0);
      expect(output()).toMatch(/SIGTERM: no new requests; finishing those in flight[\s\S]*"msg":"Stopped"/);

      const brief = briefStarted.value;
      const exited = new Promise((resolve) => brief.child.on("exit", resolve));
      brief.child.kill("SIGTERM");
      expect(await exited).toBe(0);
      expect(brief.output()).toMatch(/serving 1 s more[\s\S]*"msg":"Stopped"/);
    } finally {
      // A check failed with a server still up: SIGTERM would have it serve 600 s more.
      for (const { child } of [started.value, briefStarted.value]) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
  }, 60_000);

  it("worker and coordinator refuse a bad LOG_LEVEL before creating their database", async () => {
    const fresh = sqlitePath();
    const handlers = `${fresh}.handlers.mjs`;
    writeFileSync(handlers, "export const handlers = { crawl: async () => null };\n");
    try {
      const env = { ...process.env, LOG_LEVEL: "loud" };
      const refused = await Promise.all([
        run(process.execPath, [CLI, "worker", "--handlers", handlers, "--db", `sqlite:${fresh}`], { env }).catch((e) => e),
        run(process.execPath, [CLI, "coordinator", "--db", `sqlite:${fresh}`], { env }).catch((e) => e),
      ]);
      for (const r of refused) expect([r.code, r.stderr]).toEqual([1, "taskpool: LOG_LEVEL=loud is not a log level: use one of fatal, error, warn, info, debug, trace, silent\n"]);
      // It was created and migrated, then the level refused: a typo left a stray database behind.
      expect(existsSync(fresh)).toBe(false);
    } finally {
      rmSync(handlers, { force: true });
      removeSqliteFiles(fresh);
    }
  });

  it("serve stops on SIGTERM when its stdout has been closed (a log shipper gone), and logs one line per request only at debug", async () => {
    const bogusRun = run(process.execPath, [CLI, "serve", "--port", "0", "--db", db], { env: { ...process.env, LOG_LEVEL: "verbose" } }).catch((e) => e);
    const { child, url, output } = await startServe("--db", db, "--no-auth");
    expect((await request(url, "POST", "/api/tasks", { task_type: "crawl" }, null)).status).toBe(201);
    // At info, requests are not logged: two lines each used to flood the log, probes and scrapes included.
    expect(output()).not.toMatch(/"url":|incoming request|request completed|POST \/api\/tasks/);
    // The reader of its stdout goes away: the next lines hit a broken pipe. It used to retry them for ever at exit.
    child.stdout.destroy();
    const code = new Promise((resolve) => child.on("exit", resolve));
    child.kill("SIGTERM");
    const exited = await Promise.race([code, new Promise((resolve) => setTimeout(() => resolve("still running after 10 s"), 10_000))]);
    if (exited !== 0) child.kill("SIGKILL");
    expect(exited).toBe(0);

    const bogus = await bogusRun;
    expect([bogus.code, bogus.stderr]).toEqual([1, "taskpool: LOG_LEVEL=verbose is not a log level: use one of fatal, error, warn, info, debug, trace, silent\n"]);

    const debug = await startServeAt("debug", "--db", db, "--no-auth");
    try {
      expect((await request(debug.url, "GET", "/api/tasks/counts", undefined, null)).status).toBe(200);
      await eventually(() => /"level":20,.*"msg":"GET \/api\/tasks\/counts 200 \d+\.\d ms"/.test(debug.output()), 5000, "the request's debug line");
    } finally {
      await debug.stop();
    }
  }, 60_000);

  it("serve and dev refuse a port out of range as the option's error, before they open the database", async () => {
    const commands = ["serve", "dev"];
    const refusals = await Promise.all(commands.map((command) => taskpool(command, "--port", "99999", "--db", db).catch((e) => e)));
    for (const [i, command] of commands.entries()) {
      // It was Node's "options.port should be >= 0 and < 65536", after serve had created the database.
      expect([command, refusals[i].code, refusals[i].stderr]).toEqual([command, 1, "taskpool: option '--port <port>' argument '99999' is invalid. expected a port from 0 to 65535 (0: any free one)\n"]);
    }
    expect(existsSync(path)).toBe(false);
  }, 30_000);

  it("serve on a port another process holds says so in one line and exits 1, its coordinator never started: no leadership taken, no sweep", async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const { port } = holder.address() as AddressInfo;
    try {
      const refused = await run(process.execPath, [CLI, "serve", "--port", String(port), "--db", db], { env: { ...process.env, LOG_LEVEL: "info" } }).catch((e) => e);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toBe(`taskpool: cannot listen on 127.0.0.1:${port}: another process is already listening on port ${port}; stop it, or pick another port with --port (--port 0: any free one)\n`);
      expect(refused.stdout).not.toMatch(/Coordinator started|Leading/);
      expect((await taskpool("status", "--db", db)).stdout).toMatch(/^Coordinator: no coordinator leads; no sweep yet$/m);
    } finally {
      holder.close();
    }
  }, 30_000);

  it("serve on an address this machine does not have, or a host name that does not resolve, says so and what --host takes", async () => {
    // Node's words were "listen EADDRNOTAVAIL: address not available 192.0.2.1" and "getaddrinfo ENOTFOUND …".
    const fix = "--host takes an address of this machine: 127.0.0.1 for it alone, 0.0.0.0 for all of its interfaces";
    const [foreign, unknown] = await Promise.all([
      taskpool("serve", "--host", "192.0.2.1", "--port", "0", "--no-auth", "--db", db).catch((e) => e),
      taskpool("serve", "--host", "nowhere.invalid", "--port", "0", "--no-auth", "--db", db).catch((e) => e),
    ]);
    expect([foreign.code, foreign.stderr]).toEqual([1, `taskpool: cannot listen on 192.0.2.1:0: 192.0.2.1 is not an address of this machine; ${fix}\n`]);
    expect([unknown.code, unknown.stderr]).toEqual([1, `taskpool: cannot listen on nowhere.invalid:0: the host name nowhere.invalid does not resolve; ${fix}\n`]);
  }, 30_000);

  it("serve --auth-failure-limit sets how many wrong keys a client address may send a minute", async () => {
    // The refusals of bad values run beside the server's start; they open no database.
    const refusals = Promise.all([taskpool("serve", "--auth-failure-limit", "-1", "--db", db).catch((e) => e), taskpool("serve", "--rate-limit", "-5", "--db", db).catch((e) => e)]);
    const key = (await taskpool("keys", "create", "--scope", "admin", "--quiet", "--db", db)).stdout.trim();
    const { url, stop } = await startServe("--auth-failure-limit", "2", "--db", db);
    try {
      expect((await request(url, "GET", "/api/workers", undefined, key)).status).toBe(200);
      for (let i = 0; i < 2; i++) expect((await request(url, "GET", "/api/workers", undefined, `tp_wrong-${i}`)).status).toBe(401);
      const refused = await request(url, "GET", "/api/workers", undefined, "tp_wrong-2");
      expect([refused.status, refused.body.error]).toEqual([429, "rate_limited"]);
      expect(refused.body.message).toMatch(/^Too many different wrong API keys from this address \(at most 2 a minute\)/);
    } finally {
      await stop();
    }
    const [negative, negativeRate] = await refusals;
    expect([negative.code, negative.stderr]).toEqual([1, expect.stringMatching(/option '--auth-failure-limit <n>' argument '-1' is invalid\. expected 0 or a whole number above it/)]);
    // Nor a negative rate limit, which refused every request with 429.
    expect([negativeRate.code, negativeRate.stderr]).toEqual([1, expect.stringMatching(/option '--rate-limit <n>' argument '-5' is invalid\. expected 0 or a whole number above it/)]);
  }, 60_000);

  it("serve --require-registered refuses tasks of unregistered types from every client; a client cannot ask for it", async () => {
    const key = (await taskpool("keys", "create", "--scope", "admin", "--quiet", "--db", db)).stdout.trim();
    const { url, stop } = await startServe("--require-registered", "--db", db);
    try {
      const typo = await request(url, "POST", "/api/tasks", { task_type: "prodcut_resync" }, key);
      expect([typo.status, typo.body.error]).toEqual([400, "validation_error"]);
      expect(typo.body.message).toMatch(/^Task type "prodcut_resync" is not registered, and this pool requires registered types/);
      // The library's option (requireRegistered) is no name an HTTP caller knows: the server's flag is.
      expect(typo.body.message).toContain("registered types (taskpool serve --require-registered): register it first (POST /api/task-types or `taskpool types register`)");
      expect((await request(url, "POST", "/api/task-types", { name: "product_resync" }, key)).status).toBe(201);
      expect((await request(url, "POST", "/api/tasks", { task_type: "product_resync" }, key)).status).toBe(201);
      const client = await taskpool("enqueue", "product_resync", "--require-registered", "--url", url, "--api-key", key).catch((e) => e);
      expect([client.code, client.stderr]).toEqual([1, expect.stringMatching(/^taskpool: --require-registered .* start the server with `taskpool serve --require-registered`/)]);
    } finally {
      await stop();
    }
  }, 60_000);

  it("serve --statement-timeout sets how long PostgreSQL runs a statement before the request is answered 503; SQLite has none to set", async () => {
    const [refused, tooLong, handle] = await Promise.all([
      taskpool("serve", "--statement-timeout", "5", "--db", db).catch((e) => e),
      taskpool("serve", "--statement-timeout", "26", "--db", db).catch((e) => e),
      createPostgres(),
    ]);
    expect([refused.code, refused.stderr]).toEqual([1, "taskpool: --statement-timeout is PostgreSQL's setting; a SQLite database has no limit to set: leave it out\n"]);
    // An HTTP client waits 30 s for an answer: a statement allowed longer would be started again beside itself.
    expect(tooLong.stderr).toMatch(/--statement-timeout <seconds>' argument '26' is invalid\. expected a whole number from 1 to 25/);
    const { url, stop } = await startServe("--statement-timeout", "1", "--no-coordinator", "--db", handle.url, "--schema", handle.schema as string);
    const holder = new pg.Client({ connectionString: handle.url });
    await holder.connect();
    try {
      const { task } = await handle.store.enqueue({ taskType: "locked" });
      // Another session holds the task's row: the cancel waits for it, past the server's 1 s.
      await holder.query("BEGIN");
      await holder.query(`SELECT 1 FROM "${handle.schema}".tasks WHERE id = $1 FOR UPDATE`, [task.id]);
      const cancellingAt = performance.now();
      const reply = await request(url, "POST", `/api/tasks/${task.id}/cancel`, {}, null);
      const seconds = (performance.now() - cancellingAt) / 1000;
      expect([reply.status, reply.body.error]).toEqual([503, "database_unavailable"]);
      expect(seconds).toBeGreaterThanOrEqual(0.9);
      expect(seconds).toBeLessThan(5);
    } finally {
      await holder.end();
      await stop();
      await handle.cleanup();
    }
  }, 60_000);

  it("enqueue through a server warns of an unregistered type nobody serves, pointing at the server's setting", async () => {
    const key = (await taskpool("keys", "create", "--scope", "admin", "--quiet", "--db", db)).stdout.trim();
    const { url, stop } = await startServe("--db", db);
    try {
      const typo = await taskpool("enqueue", "prodcut_resync", "--url", url, "--api-key", key);
      expect(typo.stderr).toMatch(/^warning: task type "prodcut_resync" is not registered .* or start the server with `taskpool serve --require-registered` to refuse unregistered types\.\n$/);
    } finally {
      await stop();
    }
  }, 60_000);

  it("serve --sweep-interval, --stale-after and --dead-after set how fast its coordinator finds a dead worker, and the heartbeat interval it tells HTTP workers", async () => {
    const refused = taskpool("serve", "--dead-after", "soon", "--db", db).catch((e) => e);
    const { url, stop } = await startServe("--sweep-interval", "200", "--stale-after", "300", "--dead-after", "600", "--db", db);
    try {
      // No key exists: on loopback the server asks for none.
      const beat = await fetch(`${url}/api/workers/heartbeat`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ worker_id: "quiet", roles: ["crawl"] }) });
      expect(beat.status).toBe(200);
      // Twice within --stale-after: told the default 30 s, a worker following it turned stale, then dead, between two beats.
      expect(((await beat.json()) as { next_heartbeat_in: number }).next_heartbeat_in).toBe(0.15);
      // The defaults (a minute to stale, two to dead) would keep it active through this whole test.
      await eventually(async () => (await taskpool("workers", "--json", "--db", db).then((r) => JSON.parse(r.stdout))).workers[0]?.status === "dead", 10_000, "the worker to be found dead");
    } finally {
      await stop();
    }
    expect((await refused).stderr).toMatch(/option '--dead-after <ms>' argument 'soon' is invalid/);
  }, 30_000);

  it("serve with no key, on loopback, answers only requests addressed to loopback (DNS rebinding); with --no-auth it leaves the Host alone", async () => {
    const hostAnswer = (url: string, host: string) =>
      new Promise<number>((resolve, reject) => {
        const { hostname, port } = new URL(url);
        httpRequest({ host: hostname, port, path: "/api/tasks/counts", headers: { host } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        }).on("error", reject).end();
      });
    const [keyless, open] = await Promise.allSettled([startServe("--no-coordinator", "--db", db), startServe("--no-coordinator", "--no-auth", "--db", db)]);
    try {
      if (keyless.status === "rejected") throw keyless.reason;
      if (open.status === "rejected") throw open.reason;
      expect(await hostAnswer(keyless.value.url, "evil.example")).toBe(403);
      expect(await hostAnswer(keyless.value.url, new URL(keyless.value.url).host)).toBe(200);
      expect(await hostAnswer(open.value.url, "taskpool.internal")).toBe(200);
    } finally {
      await Promise.all([keyless, open].map((started) => started.status === "fulfilled" && started.value.stop()));
    }
  }, 40_000);

  it("serve --no-coordinator runs none", async () => {
    const { output, stop } = await startServe("--no-coordinator", "--db", db);
    await stop();
    expect(output()).toMatch(/"msg":"Stopped"/);
    expect(output()).not.toMatch(/Coordinator/);
  }, 30_000);
});

describe("the CLI over HTTP (--url, --api-key)", () => {
  const path = sqlitePath();
  const db = `sqlite:${path}`;
  afterEach(() => removeSqliteFiles(path));

  it("enqueue --idempotency-key through a server: the same command again creates nothing and prints the first task; the key with other params (422), or a bad key, is refused in one line", async () => {
    const producer = (await taskpool("keys", "create", "--scope", "producer", "--quiet", "--db", db)).stdout.trim();
    const { url, stop } = await startServe("--no-coordinator", "--db", db);
    try {
      const remote = ["--url", url, "--api-key", producer];
      const first = await taskpoolRun("enqueue", "crawl", '{"page":1}', "--idempotency-key", "crawl-page-1", ...remote);
      expect([first.code, first.stdout]).toEqual([0, "Enqueued task 1 (crawl)\n"]);
      const again = await taskpoolRun("enqueue", "crawl", '{"page":1}', "--idempotency-key", "crawl-page-1", ...remote);
      expect([again.code, again.stdout]).toEqual([0, 'Task 1 (crawl) already enqueued by an earlier call with idempotency key "crawl-page-1": nothing new created; it is pending now\n']);
      const [replayed, reused, bad] = await Promise.all([
        taskpool("enqueue", "crawl", '{"page":1}', "--idempotency-key", "crawl-page-1", "--json", ...remote),
        taskpoolRun("enqueue", "crawl", '{"page":2}', "--idempotency-key", "crawl-page-1", ...remote),
        taskpoolRun("enqueue", "crawl", "--idempotency-key", "x".repeat(256), ...remote),
      ]);
      expect(JSON.parse(replayed.stdout)).toMatchObject({ created: false, replayed: true, task: { id: 1, params: { page: 1 } } });
      expect([reused.code, reused.stdout, reused.stderr]).toEqual([
        1,
        "",
        'taskpool: Idempotency key "crawl-page-1" was already used for a different enqueue request; a key may only be sent again with the same request (a retry): use a new key for new tasks\n',
      ]);
      expect([bad.code, bad.stderr]).toEqual([1, `taskpool: Invalid options: --idempotency-key: Expected string length less or equal to 255 (got "${"x".repeat(56)}...)\n`]);
      // Read from the database, not the server: one task, the first call's.
      const tasks = JSON.parse((await taskpool("tasks", "list", "--json", "--db", db)).stdout).tasks;
      expect(tasks.map((t: { id: number; params: unknown }) => [t.id, t.params])).toEqual([[1, { page: 1 }]]);
    } finally {
      await stop();
    }
  }, 60_000);

  it("a refusal only the server makes (it reads the database) names the command's flags, word for word as the same command on the database", async () => {
    const admin = (await taskpool("keys", "create", "--scope", "admin", "--quiet", "--db", db)).stdout.trim();
    const definition = `${path}.type.json`;
    writeFileSync(definition, JSON.stringify({ name: "product_resync", paramsSchema: { type: "object", properties: { key: { type: "integer" }, full: { type: "boolean" } }, required: ["key"] } }));
    await taskpool("types", "register", definition, "--db", db);
    rmSync(definition);
    const { url, stop } = await startServe("--no-coordinator", "--db", db);
    try {
      const add = ["schedules", "add", "resync", "--type", "product_resync", "--cron", "0 0 * * *"];
      // A fan-out reading a schedule that does not exist; keys the registered type refuses.
      const commands = [
        [...add, "--from-results", "discovry:storeIds"],
        [...add, "--keys", "1,x"],
        [...add, "--keys", "1,2,3,4,5,6,7,8,9,10,y"],
        // A params field refused whatever the key: the params' fault, not the first key's.
        [...add, "--keys", "1,2", "--params", '{"full":"yes"}'],
      ];
      const [viaServer, onDatabase] = await Promise.all(
        [["--url", url, "--api-key", admin], ["--db", db]].map((target) => Promise.all(commands.map((command) => taskpoolRun(...command, ...target)))),
      );
      // The server's message named the wire's fields (fan_out.from_results.schedule): no flag of the command's.
      expect(viaServer.map((r) => [r.code, r.stderr])).toEqual([
        [1, expect.stringMatching(/^taskpool: Invalid --from-results: there is no schedule "discovry" whose last run's results could hold the keys; create "discovry" first/)],
        // The value of --keys the registered type refused, counted from 1 as typed.
        [1, 'taskpool: --keys value 2 ("x"): Invalid params for product_resync v1: params.key: must be integer\n'],
        [1, 'taskpool: --keys value 11 ("y"): Invalid params for product_resync v1: params.key: must be integer\n'],
        [1, "taskpool: Invalid params for product_resync v1: params.full: must be boolean\n"],
      ]);
      expect(viaServer.map((r) => r.stderr)).toEqual(onDatabase.map((r) => r.stderr));
    } finally {
      await stop();
    }
  }, 60_000);

  it("a schedule the server does not know: the CLI through it points to its own command, as on the database; an HTTP caller, to the route", async () => {
    const admin = (await taskpool("keys", "create", "--scope", "admin", "--quiet", "--db", db)).stdout.trim();
    const { url, stop } = await startServe("--no-coordinator", "--db", db);
    try {
      const [http, viaServer, onDatabase] = await Promise.all([
        request(url, "POST", "/api/schedules/nope/pause", undefined, admin),
        taskpoolRun("schedules", "pause", "nope", "--url", url, "--api-key", admin),
        taskpoolRun("schedules", "pause", "nope", "--db", db),
      ]);
      expect([http.status, http.body.message]).toEqual([404, 'Schedule "nope" does not exist (GET /api/schedules shows them)']);
      expect([viaServer.code, viaServer.stderr]).toEqual([1, 'taskpool: Schedule "nope" does not exist (taskpool schedules list shows them)\n']);
      expect(viaServer.stderr).toBe(onDatabase.stderr);
    } finally {
      await stop();
    }
  }, 60_000);

  it("a --db typed on the command line wins over an exported TASKPOOL_URL; --url and --db both typed are refused, changing nothing", async () => {
    const own = sqlitePath();
    const ownDb = `sqlite:${own}`;
    const [admin] = await Promise.all([
      taskpool("keys", "create", "--scope", "admin", "--quiet", "--db", db).then(async ({ stdout }) => {
        await taskpool("enqueue", "served", "--db", db);
        return stdout.trim();
      }),
      taskpool("enqueue", "mine", "--db", ownDb),
    ]);
    const { url, stop } = await startServe("--no-coordinator", "--db", db);
    try {
      const env = envWith({ TASKPOOL_URL: url, TASKPOOL_API_KEY: admin });
      // Task 1 of the database named, not of the server's.
      const [cancel, both] = await Promise.all([
        taskpoolIn(process.cwd(), env, "tasks", "cancel", "1", "--db", ownDb),
        taskpoolRun("tasks", "cancel", "1", "--db", ownDb, "--url", url, "--api-key", admin),
      ]);
      expect(cancel.stdout).toMatch(/^ 1 +mine +cancelled +cancelled$/m);
      expect([both.code, both.stderr]).toEqual([1, "taskpool: --url and --db both name a pool: give one (--url http://host:port goes through a taskpool server; --db opens a database)\n"]);
      // TASKPOOL_URL alone still goes through the server.
      const [served, viaServer] = await Promise.all([taskpool("tasks", "show", "1", "--json", "--db", db), taskpoolIn(process.cwd(), env, "tasks", "show", "1")]);
      expect([JSON.parse(served.stdout).task.taskType, JSON.parse(served.stdout).task.status]).toEqual(["served", "pending"]);
      expect(viaServer.stdout).toMatch(/type +served/);
    } finally {
      await stop();
      removeSqliteFiles(own);
    }
  });

  it("a URL whose server is not taskpool's (another web server's HTML page) is one line asking whether the URL is right", async () => {
    const page = "<!DOCTYPE HTML>\n<html lang=\"en\">\n  <head>\n    <title>Error response</title>\n  </head>\n  <body>\n    <h1>Not Found</h1>\n  </body>\n</html>\n";
    const other = createHttpServer((_request, response) => response.writeHead(404, { "content-type": "text/html" }).end(page));
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
    try {
      const refusals = await Promise.all([["status"], ["tasks", "cancel", "7"]].map((command) => taskpoolRun(...command, "--url", url, "--api-key", "tp_x")));
      for (const refused of refusals) {
        expect(refused.code).toBe(1);
        expect(refused.stderr).toMatch(
          new RegExp(`^taskpool: .*the server at ${url} answered 404 with something that is not taskpool's JSON \\("<!DOCTYPE HTML> <html lang="en"> <head> <title>Error response</title>.*"\\); is it a taskpool server \\(taskpool serve\\), and is the URL right\\?\n$`),
        );
      }
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it("enqueues, lists, shows and reports status through a server; a bad URL or key is one clear line", async () => {
    const admin = (await taskpool("keys", "create", "--scope", "admin", "--quiet", "--db", db)).stdout.trim();
    const { url, output, stop } = await startServe("--db", db);
    try {
      const remote = ["--url", url, "--api-key", admin];
      expect((await taskpool("enqueue", "crawl", '{"page":1}', ...remote)).stdout).toMatch(/^Enqueued task 1 \(crawl\)/);
      const [listed, shown] = await Promise.all([taskpool("tasks", "list", "--json", ...remote), taskpool("tasks", "show", "1", ...remote)]);
      expect(JSON.parse(listed.stdout).tasks.map((t: { id: number; params: unknown }) => [t.id, t.params])).toEqual([[1, { page: 1 }]]);
      expect(shown.stdout).toMatch(/created/);
      // serve runs a coordinator unless told not to: it leads and has swept (its first sweep runs at start).
      const status = await eventually(async () => {
        const { stdout } = await taskpool("status", ...remote);
        return /Coordinator: coordinator-\S+ leads \(lease until [^)]+\); last sweep by coordinator-/.test(stdout) ? stdout : null;
      }, 10_000, "serve's coordinator to lead and sweep");
      expect(status).toMatch(/Tasks: pending 1/);
      expect(output()).toMatch(/Coordinator started/);
      const handlers = `${path}.handlers.mjs`;
      writeFileSync(handlers, "export const handlers = { crawl: async () => null };\n");
      // Each its own process, none changing what the others see: started together.
      const producer = (await taskpool("keys", "create", "--scope", "producer", "--quiet", "--db", db)).stdout.trim();
      const [viaEnv, badKey, noKey, worker, notServer, tls, nobody, scoped] = await Promise.all([
        // Over TASKPOOL_URL / TASKPOOL_API_KEY as well.
        run(process.execPath, [CLI, "tasks", "list"], { env: { ...process.env, TASKPOOL_URL: url, TASKPOOL_API_KEY: admin } }),
        taskpool("tasks", "list", "--url", url, "--api-key", "tp_wrong-key-0000000000").catch((e) => e),
        taskpool("tasks", "list", "--url", url).catch((e) => e),
        taskpool("worker", "--handlers", handlers, "--url", url).catch((e) => e),
        taskpool("tasks", "list", "--url", "postgres://x@localhost/db").catch((e) => e),
        taskpool("tasks", "list", "--url", url.replace("http:", "https:"), "--api-key", admin).catch((e) => e),
        taskpool("tasks", "list", "--url", "http://127.0.0.1:9").catch((e) => e),
        // Its first call (the workers' list) a producer key may make; its second (the shutdown) not.
        taskpool("workers", "shutdown", "gone-1", "--url", url, "--api-key", producer).catch((e) => e),
      ]);
      rmSync(handlers);
      expect(viaEnv.stdout).toMatch(/crawl/);

      // In the CLI's terms (--api-key), not the server's (the X-API-Key header), for a query and a worker alike.
      expect([badKey.code, badKey.stderr]).toEqual([
        1,
        "taskpool: the taskpool server refused the API key (not one of its keys, or revoked): check --api-key or TASKPOOL_API_KEY; `taskpool keys list --db …` on its database shows its keys\n",
      ]);
      const missing = "taskpool: the taskpool server asks for an API key: pass --api-key K (or set TASKPOOL_API_KEY); `taskpool keys create --scope admin --db …` on its database makes one\n";
      expect([noKey.code, noKey.stderr]).toEqual([1, missing]);
      expect([worker.code, worker.stderr]).toEqual([1, missing]);
      expect(notServer.stderr).toBe('taskpool: --url takes a taskpool server\'s address (http://host:port), not "postgres://x@localhost/db"; a database goes in --db\n');
      // https:// for the plain-HTTP server: one line saying so, not OpenSSL's two with its source file.
      expect([tls.code, tls.stderr]).toEqual([
        1,
        `taskpool: Cannot reach the taskpool server at ${url.replace("http:", "https:")} (TLS handshake failed: the server does not speak TLS; taskpool serve answers plain http://); is \`taskpool serve\` running there, and is the URL right?\n`,
      ]);
      // Said with the key that makes every call: asked for the scope one call needs, the user met the next call's refusal.
      expect([scoped.code, scoped.stderr]).toEqual([
        1,
        "taskpool: the taskpool server refused a call taskpool workers shutdown makes for this key's scope (This API key's scope is producer; POST /api/workers/:id/shutdown needs worker or admin); " +
          "an admin key may make every call: `taskpool keys create --scope admin --db …` on its database makes one\n",
      ]);
      expect(nobody.code).toBe(1);
      expect(nobody.stderr).toMatch(/^taskpool: Cannot reach the taskpool server at http:\/\/127\.0\.0\.1:9 \(.*\); is `taskpool serve` running there, and is the URL right\?\n$/);
    } finally {
      await stop();
    }
  }, 90_000);
});
