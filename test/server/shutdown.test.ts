/**
 * Closing a server with requests in flight, on a started server and real HTTP: the store the caller
 * closes after close() must outlive every request, a client that hung up included; requests that
 * arrive meanwhile are refused with 503; a request stuck past the grace period does not hold the
 * close for good.
 */
import { connect as connectSocket } from "node:net";
import Database from "better-sqlite3";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { Taskpool } from "../../src/api/taskpool.js";
import { buildServer, type ServerOptions } from "../../src/server/server.js";
import { captureLogs, eventually } from "../helpers/logs.js";
import { PG_URL, postgresKind, sqliteKind, type StoreKind, type TestStore } from "../helpers/stores.js";
import { request } from "./harness.js";

/**
 * Another session holding the write lock on the task's row (PostgreSQL) or on the whole file
 * (SQLite), as an operator's cancel would; released, it commits that cancel. A cancel of the server
 * waiting on the lock then finds no row to change, and reads why in a second statement.
 */
async function holdLock(kind: StoreKind, handle: TestStore, taskId: number): Promise<() => Promise<void>> {
  const cancel = `UPDATE tasks SET status = 'cancelled', completed_at = CURRENT_TIMESTAMP WHERE id = ${taskId}`;
  if (kind.name === "postgres") {
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    await client.query(`SET search_path TO "${handle.schema}"; BEGIN; SELECT 1 FROM tasks WHERE id = ${taskId} FOR UPDATE`);
    return async () => {
      await client.query(`${cancel}; COMMIT`);
      await client.end();
    };
  }
  const db = new Database(handle.url.slice("sqlite:".length));
  db.exec("BEGIN IMMEDIATE");
  return async () => {
    db.exec(`${cancel}; COMMIT`);
    db.close();
  };
}

/** `fn` the first time, nothing after: a lock the test releases, and the cleanup too if the test failed first. */
function once(fn: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | null = null;
  return () => (done ??= fn());
}

describe("closeGraceMs", () => {
  it("out of a timer's range, or not whole, is refused when the server is built: Node fired a longer timer at once, and there was no grace", async () => {
    const handle = await sqliteKind.create();
    const pool = new Taskpool(new CheckedStore(handle.store), null);
    try {
      for (const closeGraceMs of [3_000_000_000, -1, 1.5]) {
        await expect(buildServer(pool, { auth: "none", closeGraceMs })).rejects.toThrow(`Invalid server option closeGraceMs ${closeGraceMs}: a whole number of milliseconds from 0 to 2147483647`);
      }
    } finally {
      await pool.close();
      await handle.cleanup();
    }
  });
});

describe.each([sqliteKind, postgresKind])("closing a server on $name", (kind) => {
  const opened: { handle: TestStore; pool: Taskpool }[] = [];
  /** The locks a test took: released first if it failed before it released them, else closing its pool waits on them. */
  const locks: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const release of locks.splice(0)) await release();
    for (const { handle, pool } of opened.splice(0)) {
      await pool.close().catch(() => {});
      await handle.cleanup();
    }
  });

  async function start(options: ServerOptions = {}) {
    const handle = await kind.create();
    const pool = new Taskpool(new CheckedStore(handle.store), null);
    opened.push({ handle, pool });
    const logs = captureLogs();
    const app = await buildServer(pool, { auth: "none", logger: logs.logger, ...options });
    const url = await app.listen({ host: "127.0.0.1", port: 0 });
    const task = await pool.enqueue("crawl");
    return { handle, pool, app, url, logs, taskId: task.id };
  }

  it("a request whose client hung up finishes before close() resolves, so the store closed next outlives it", async () => {
    const { handle, pool, app, url, logs, taskId } = await start();
    const release = once(await holdLock(kind, handle, taskId));
    locks.push(release);
    // A worker stopping, or a client's own timeout, hangs up while the server still runs its request.
    const hangUp = new AbortController();
    const hungUp = fetch(`${url}/api/tasks/${taskId}/cancel`, { method: "POST", signal: hangUp.signal }).catch((e: Error) => e);
    await eventually(() => app.taskpool.requestsInFlight() === 1, 5000, "the request to reach the server");
    hangUp.abort();
    expect(await hungUp).toBeInstanceOf(Error);
    let closed = false;
    // What `taskpool serve` does on SIGTERM.
    const stopped = app.close().then(async () => ((closed = true), await pool.close()));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(closed).toBe(false);
    await release();
    await stopped;
    // It ran to its end on an open store (refused: the task was cancelled meanwhile), not on a closed one, 500.
    const failures = logs.lines().filter((line) => line.level >= 50);
    expect(failures.map((line) => line.msg)).toEqual([]);
  });

  it("a request in flight is answered; one arriving while it finishes gets 503 shutting_down with Retry-After and Connection: close", async () => {
    const { handle, pool, app, url, logs, taskId } = await start();
    const release = once(await holdLock(kind, handle, taskId));
    locks.push(release);
    const inFlight = request(url, "POST", `/api/tasks/${taskId}/cancel`, undefined, null);
    await eventually(() => app.taskpool.requestsInFlight() === 1, 5000, "the request to reach the server");
    // A connection whose next request has begun (its first header line sent) when the close starts: not idle, so not dropped.
    const socket = connectSocket(Number(new URL(url).port), "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write("GET /api/tasks HTTP/1.1\r\n");
    let answer = "";
    socket.on("data", (chunk) => (answer += chunk));
    const ended = new Promise((resolve) => socket.once("close", resolve));
    const connections = () => new Promise<number>((resolve) => app.server.getConnections((_, n) => resolve(n)));
    await eventually(async () => (await connections()) === 2, 5000, "the server to take the connection");
    const closed = app.close();
    await eventually(() => !app.server.listening, 5000, "the server to stop listening");
    socket.write("Host: 127.0.0.1\r\n\r\n");
    await ended;
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4));
    expect(body).toMatchObject({ success: false, error: "shutting_down", retry_after: 1 });
    expect(body.message).toMatch(/^This server is shutting down; nothing was done: send the request again/);
    // Planned, as a drain's 503s are: said at info, not warned about.
    expect(logs.lines().find((line) => line.msg.startsWith("GET /api/tasks answered 503: This server is shutting down"))?.level).toBe(30);
    // A new connection is refused outright.
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
    await release();
    expect((await inFlight).status).toBe(409);
    await closed;
    await pool.close();
  });

  it("a request stuck past the grace period does not hold the close: its connection is dropped, said in a warning", async () => {
    const { handle, app, url, logs, taskId } = await start({ closeGraceMs: 300 });
    const release = once(await holdLock(kind, handle, taskId));
    locks.push(release);
    const stuck = request(url, "POST", `/api/tasks/${taskId}/cancel`, undefined, null).catch((e: Error) => e);
    await eventually(() => app.taskpool.requestsInFlight() === 1, 5000, "the request to reach the server");
    const started = performance.now();
    await app.close();
    expect(performance.now() - started).toBeLessThan(3000);
    expect(await stuck).toBeInstanceOf(Error);
    expect(logs.messages()).toContain("Closing with 1 request still in flight after 300 ms; their connections are dropped, and what they still do fails");
    await release();
  });
});
