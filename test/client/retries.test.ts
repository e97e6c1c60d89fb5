import { spawn } from "node:child_process";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { connect, Taskpool } from "../../src/api/taskpool.js";
import { ValidationError } from "../../src/core/errors.js";
import { ServerTimeoutError, ServerUnreachableError } from "../../src/client/errors.js";
import { HttpStore } from "../../src/client/http-store.js";
import { monotonicMs } from "../../src/core/clock.js";
import { buildServer } from "../../src/server/server.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";

describe("connect(http://…, { retryForMs })", () => {
  const store = new SqliteStore({ path: ":memory:" });
  let app: Awaited<ReturnType<typeof buildServer>>;
  let url: string;
  /** While set, every call but /readyz is answered 503, as a server whose database is away answers. */
  let down = false;
  let refused = 0;
  /** Reads of one task (GET /api/tasks/:id) still to answer 429, as a key's rate limit does, with a 0.2 s Retry-After. */
  let limitedReads = 0;
  /** While set, every answer is lost after the server acted: the connection is cut as the answer goes out. */
  let answersLost = false;
  /** The next answers to lose so, one by one. */
  let answersToLose = 0;
  beforeAll(async () => {
    await store.migrate();
    app = await buildServer(new Taskpool(new CheckedStore(store), null), { auth: "none", rateLimitPerMinute: false, dashboard: false });
    app.addHook("onRequest", async (request, reply) => {
      if (limitedReads > 0 && request.method === "GET" && /^\/api\/tasks\/\d+(\?|$)/.test(request.url)) {
        limitedReads--;
        await reply.code(429).header("retry-after", "1").send({ success: false, error: "rate_limited", message: "Rate limit exceeded (simulated)", retry_after: 0.2 });
        return;
      }
      if (!down || request.url === "/readyz") return;
      refused++;
      await reply.code(503).send({ success: false, error: "database_unavailable", message: "down (simulated)" });
    });
    app.addHook("onSend", async (request, _reply, payload) => {
      if (answersLost || (answersToLose > 0 && answersToLose-- > 0)) request.raw.socket.destroy();
      return payload;
    });
    url = await app.listen({ host: "127.0.0.1", port: 0 });
  });
  afterAll(async () => {
    await app.close();
    await store.close();
  });

  it("0 fails at once, a create too (which is otherwise sent for 8 to 15 s)", async () => {
    const pool = await connect(url, { retryForMs: 0 });
    down = true;
    refused = 0;
    try {
      await expect(pool.enqueue("x")).rejects.toMatchObject({ code: "database_unavailable" });
      expect(refused).toBe(1);
    } finally {
      down = false;
      await pool.close();
    }
  });

  it("retries a call for as long as it says, past the default 2 to 3 s", async () => {
    const pool = await connect(url, { retryForMs: 8000 });
    down = true;
    try {
      const counts = pool.counts();
      await new Promise((resolve) => setTimeout(resolve, 4000));
      down = false;
      await expect(counts).resolves.toMatchObject({ byStatus: expect.any(Object) });
    } finally {
      down = false;
      await pool.close();
    }
  });

  it("close() ends a call pausing between attempts: it fails with its last error at once and sends nothing more", async () => {
    const pool = await connect(url, { retryForMs: 10_000 });
    down = true;
    refused = 0;
    try {
      const counts = pool.counts().then(
        () => null,
        (error) => error,
      );
      // Closed during a pause, not while an answer is on its way (closing destroys the socket it travels
      // on, and a loaded CI run once closed there): after the 4th refusal the pause is 400-800 ms, and
      // 150 ms is time enough for that refusal to reach the client.
      while (refused < 4) await new Promise((resolve) => setTimeout(resolve, 5));
      await new Promise((resolve) => setTimeout(resolve, 150));
      const closedAt = performance.now();
      await pool.close();
      const sentBeforeClose = refused;
      expect(await counts).toMatchObject({ code: "database_unavailable" });
      expect(performance.now() - closedAt).toBeLessThan(1000);
      await new Promise((resolve) => setTimeout(resolve, 2500)); // longer than any pause between attempts
      expect(refused).toBe(sentBeforeClose);
    } finally {
      down = false;
    }
  });

  it("a create whose every answer was lost says it may have been applied, with the key that makes it again at most once", async () => {
    const pool = await connect(url, { retryForMs: 1000 });
    const before = (await pool.counts()).byType.lost_answers?.pending ?? 0;
    answersLost = true;
    try {
      const error = await pool.enqueue("lost_answers", { n: 1 }).catch((e: unknown) => e);
      answersLost = false;
      expect(error).toBeInstanceOf(ServerUnreachableError);
      const key = (error as ServerUnreachableError).idempotencyKey;
      expect(key).toMatch(/^[0-9a-f-]{36}$/);
      expect((error as Error).message).toBe(
        `The taskpool server at ${new URL(url).origin} gave no answer (socket hang up) to a call it was sent, on every try: the call may have been applied; make it again with idempotencyKey "${key}" to have it applied at most once`,
      );
      // It was: made again with the key, it answers with the task it created, and makes none.
      expect((await pool.counts()).byType.lost_answers?.pending).toBe(before + 1);
      expect(await pool.enqueue("lost_answers", { n: 1 }, { idempotencyKey: key })).toMatchObject({ taskType: "lost_answers", params: { n: 1 } });
      expect((await pool.counts()).byType.lost_answers?.pending).toBe(before + 1);
    } finally {
      answersLost = false;
      await pool.close();
    }
  });

  it("concurrent creates whose answers were lost each get a key that makes their own task again, at most once", async () => {
    const pool = await connect(url, { retryForMs: 1000 });
    const before = (await pool.counts()).byType.lost_together?.pending ?? 0;
    answersLost = true;
    try {
      // Made together, they once went as one batch under one key: a caller making its own call again with it was refused (422, reused).
      const errors = await Promise.all([1, 2, 3].map((n) => pool.enqueue("lost_together", { n }).then(() => null, (e: unknown) => e as ServerUnreachableError)));
      answersLost = false;
      const keys = errors.map((e) => e?.idempotencyKey);
      expect(new Set(keys).size).toBe(3);
      expect((await pool.counts()).byType.lost_together?.pending).toBe(before + 3);
      const again = await Promise.all(keys.map((key, i) => pool.enqueue("lost_together", { n: i + 1 }, { idempotencyKey: key })));
      expect(again.map((t) => t.params)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
      expect((await pool.counts()).byType.lost_together?.pending).toBe(before + 3);
    } finally {
      answersLost = false;
      await pool.close();
    }
  });

  it("an operator's cancel or retry whose answer was lost, sent again and refused, is answered as applied", async () => {
    const pool = await connect(url, { retryForMs: 5000 });
    try {
      const task = await pool.enqueue("lost_cancel", {}, { maxAttempts: 1 });
      answersToLose = 1;
      // The first try cancelled it; the second was refused: it is cancelled. That was reported a failure.
      expect(await pool.cancel(task.id)).toMatchObject({ id: task.id, status: "cancelled" });
      // A cancel of a task already cancelled, with no answer lost, is still refused.
      await expect(pool.cancel(task.id)).rejects.toMatchObject({ code: "invalid_transition" });

      const failing = await pool.enqueue("lost_retry", {}, { maxAttempts: 1 });
      const [held] = await pool.protocol.claim({ workerId: "w-lost", taskTypes: ["lost_retry"] });
      await pool.protocol.fail(held.id, held, { error: "boom", retryable: false });
      answersToLose = 1;
      expect(await pool.retry(failing.id)).toMatchObject({ id: failing.id, status: "pending" });
    } finally {
      answersToLose = 0;
      await pool.close();
    }
  });

  it("waitFor() waits out a rate limit's Retry-After and asks again, rather than failing", async () => {
    const pool = await connect(url);
    try {
      const { id } = await pool.enqueue("x");
      limitedReads = 3;
      const waiting = pool.waitFor(id);
      while (limitedReads > 0) await new Promise((resolve) => setTimeout(resolve, 5));
      await pool.cancel(id);
      expect(await waiting).toMatchObject({ id, status: "cancelled" });
    } finally {
      limitedReads = 0;
      await pool.close();
    }
  });

  it.each([-1, 1.5, Number.POSITIVE_INFINITY, "60s", 86_400_001])("refuses %s, naming the option, before any request", async (value) => {
    const refusal = connect("http://127.0.0.1:1", { retryForMs: value as number });
    await expect(refusal).rejects.toBeInstanceOf(ValidationError);
    await expect(refusal).rejects.toThrow(/^Invalid retryForMs .*: a whole number of milliseconds from 0 \(no retries\) to 86400000/);
  });
});

/** Listens on a free port with a backlog of 0, fills the queue, never accepts; prints the port. */
const BACKLOG_FULL = `
import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(0)
port = s.getsockname()[1]
fill = []
for i in range(3):
    c = socket.socket(); c.setblocking(False)
    try: c.connect(("127.0.0.1", port))
    except BlockingIOError: pass
    fill.append(c)
print(port, flush=True)
time.sleep(60)
`;

describe("connect(http://…, { callTimeoutMs })", () => {
  it("ends a call to a server that takes the connection and never answers at its time, saying a read changed nothing", async () => {
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const origin = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    try {
      const started = monotonicMs();
      // Connecting asks GET /readyz: without a time, six tries of 30 s each.
      const error = await connect(origin, { callTimeoutMs: 700 }).catch((e: unknown) => e);
      expect(monotonicMs() - started).toBeLessThan(3000);
      expect(error).toBeInstanceOf(ServerTimeoutError);
      expect(error).toMatchObject({ code: "server_unreachable", origin, maybeApplied: false, message: `The taskpool server at ${origin} gave no answer within 0.7 s; is it overloaded or stuck?` });
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  // A port whose queue of connections is full: SYNs go unanswered, as from a host that swallows
  // packets. The call timed out before it was sent, and said it "may have been applied".
  it("says a call whose connection was never made was not sent, not that it may have been applied", async () => {
    const filler = spawn("python3", ["-c", BACKLOG_FULL], { stdio: ["ignore", "pipe", "inherit"] });
    try {
      const port = await new Promise<string>((resolve) => filler.stdout.once("data", (line: Buffer) => resolve(line.toString().trim())));
      const origin = `http://127.0.0.1:${port}`;
      const http = new HttpStore(origin, { callTimeoutMs: 700 });
      const error = await http.cancel(7).catch((e: unknown) => e);
      await http.close();
      expect(error).not.toBeInstanceOf(ServerTimeoutError);
      expect(error).toBeInstanceOf(ServerUnreachableError);
      expect((error as Error).message).toMatch(/^Cannot reach the taskpool server at http:\/\/127\.0\.0\.1:\d+ \(no answer within \d+ ms\)/);
    } finally {
      filler.kill();
    }
  });

  // A worker's wake-up wait is a long-poll the server holds up to 25 s: a call time under that cut it
  // every callTimeoutMs, and the worker asked again and again.
  it("leaves a worker's wake-up long-poll its wait, beyond the call's time", async () => {
    const store = new SqliteStore({ path: ":memory:" });
    await store.migrate();
    const app = await buildServer(new Taskpool(new CheckedStore(store), null), { auth: "none", rateLimitPerMinute: false, dashboard: false });
    let waits = 0;
    app.addHook("onRequest", async (request) => void (request.url === "/api/tasks/wait" && waits++));
    const pool = await connect(await app.listen({ host: "127.0.0.1", port: 0 }), { callTimeoutMs: 500 });
    try {
      const worker = pool.worker({ roles: ["probe"], handlers: { probe: async () => {} }, pollIntervalMs: 60_000, heartbeatThread: false });
      await worker.start();
      await new Promise((resolve) => setTimeout(resolve, 2500));
      // The subscription's first wait, of 0 ms, then one long-poll, still held.
      expect(waits).toBe(2);
    } finally {
      await pool.close();
      await app.close();
      await store.close();
    }
  });

  it.each([0, 1.5, "30s", 86_400_001])("refuses %s, naming the option, before any request", async (value) => {
    await expect(connect("http://127.0.0.1:1", { callTimeoutMs: value as number })).rejects.toThrow(/^Invalid callTimeoutMs .*: a whole number of milliseconds from 1 to 86400000/);
  });
});
