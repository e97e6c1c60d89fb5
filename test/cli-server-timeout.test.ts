import http from "node:http";
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { monotonicMs } from "../src/core/clock.js";
import { envWith, taskpoolIn } from "./helpers/cli.js";

/** When the command now running first connected to the server (set by listen below). */
let connectedAt: number | null = null;

/**
 * A command run against the server, with how long it took to end from its first connection: --timeout
 * bounds the calls, not the start of node, which on a loaded 2-core machine took up to 8 s before the
 * first request went out. Killed after 20 s (taskpoolIn).
 */
async function timed(...args: string[]): Promise<{ code: number | string; stderr: string; seconds: number | null }> {
  connectedAt = null;
  const ended = await taskpoolIn(process.cwd(), envWith({}), ...args).then(
    ({ stderr }) => ({ code: 0, stderr }),
    (e: { code: number | string; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
  );
  return { ...ended, seconds: connectedAt === null ? null : (monotonicMs() - connectedAt) / 1000 };
}

/** Well under the 3 minutes a call took before (6 tries of 30 s), with room for a loaded machine between the timeout and the exit. */
const BOUND_S = 8;

describe("a CLI command against a server that never answers", () => {
  const sockets = new Set<net.Socket>();
  let close: () => Promise<void> = async () => {};
  afterEach(async () => {
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    await close();
  });

  /** Listens on a free port; each connection is kept, for afterEach to end. */
  async function listen(server: net.Server): Promise<string> {
    server.on("connection", (socket) => {
      sockets.add(socket);
      connectedAt ??= monotonicMs();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    close = () => new Promise((resolve) => server.close(() => resolve()));
    return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  }

  it("fails a read within --timeout, in one line naming the server and saying nothing was changed", async () => {
    // Takes the connection and never says a word, as a stuck server or a half-open proxy does.
    const url = await listen(net.createServer());
    for (const command of [["status"], ["tasks", "list"]]) {
      const run = await timed(...command, "--url", url, "--timeout", "1");
      expect(run.code).toBe(1);
      expect(run.seconds).toBeLessThan(BOUND_S);
      expect(run.stderr).toBe(
        `taskpool: the taskpool server at ${url} did not answer within 1 s (a read: nothing was changed); is it overloaded or stuck? Check its logs, or wait longer with --timeout <seconds>\n`,
      );
    }
  });

  it("says a read that every try lost the connection of changed nothing, and asks whether the URL is right", async () => {
    // Hangs up on every request, as PostgreSQL's port does on HTTP (--url given the database's port).
    // With time for all the tries: given 1 s, the last try began just before the deadline, and on a
    // loaded machine (CI of 2026-11-29) the deadline came before the hang-up did, so the command said
    // it timed out instead.
    const url = await listen(net.createServer((socket) => socket.once("data", () => socket.destroy())));
    const run = await timed("status", "--url", url, "--timeout", "5");
    expect(run.code).toBe(1);
    expect(run.seconds).toBeLessThan(BOUND_S);
    expect(run.stderr).toBe(
      `taskpool: The taskpool server at ${url} gave no answer (socket hang up) to a read, on every try (nothing was changed); is \`taskpool serve\` running there, and is the URL right?\n`,
    );
  });

  it("says a write's outcome is unknown, and how to look, and stops there", async () => {
    // Ready, then silent on everything else: the write is sent, and its answer never comes.
    const writes: string[] = [];
    const sentKeys: string[] = [];
    const server = http.createServer((request, response) => {
      if (request.url === "/api/tasks") sentKeys.push(String(request.headers["idempotency-key"]));
      if (request.url !== "/readyz") return void writes.push(`${request.method} ${request.url}`);
      const coordinator = { holder: null, lease_expires_at: null, last_swept_by: null, last_swept_at: null, seconds_since_sweep: null, sweep_interval_seconds: null, sweep_overdue: false };
      response.setHeader("content-type", "application/json").end(JSON.stringify({ success: true, status: "ready", database: "sqlite", coordinator }));
    });
    const url = await listen(server);

    const cancel = await timed("tasks", "cancel", "7", "8", "--url", url, "--timeout", "1");
    expect(cancel.code).toBe(1);
    expect(cancel.seconds).toBeLessThan(BOUND_S);
    expect(cancel.stderr).toMatch(
      new RegExp(`^taskpool: the taskpool server at ${url} did not answer within 1 s to a change it was sent: whether task 7 was cancelled is unknown; check with \`taskpool tasks show 7\` before repeating it, .*\\n$`),
    );
    // Task 8 would have waited as long again, for the same silence.
    expect(writes).toEqual(["POST /api/tasks/7/cancel"]);

    const enqueue = await timed("enqueue", "crawl", "--url", url, "--timeout", "1");
    expect(enqueue.code).toBe(1);
    expect(enqueue.seconds).toBeLessThan(BOUND_S);
    // The key the client made for the call, which makes a repeat as safe as one of the user's would have.
    const sent = [...new Set(sentKeys)];
    expect(sent).toHaveLength(1);
    expect(enqueue.stderr).toBe(
      `taskpool: the taskpool server at ${url} did not answer within 1 s to a change it was sent: whether the task was enqueued is unknown; check with \`taskpool tasks list --type crawl\` before repeating it, ` +
        `or repeat it adding --idempotency-key ${sent[0]} (the key it was sent with: the change is made at most once); pass --idempotency-key <key> next time to make repeating it safe, ` +
        "and see the server's logs for why it is stuck (--timeout <seconds> waits longer)\n",
    );

    const earlier = sentKeys.length;
    const keyed = await timed("enqueue", "crawl", "--idempotency-key", "crawl-1", "--url", url, "--timeout", "1");
    expect(keyed.code).toBe(1);
    expect(keyed.seconds).toBeLessThan(BOUND_S);
    expect(new Set(sentKeys.slice(earlier))).toEqual(new Set(["crawl-1"]));
    expect(keyed.stderr).toBe(
      `taskpool: the taskpool server at ${url} did not answer within 1 s to a change it was sent: whether the task was enqueued is unknown; ` +
        "repeating the same command with the same --idempotency-key is safe (the change is made at most once); see the server's logs for why it is stuck (--timeout <seconds> waits longer)\n",
    );
  });

  it("refuses --timeout with a database, which it would not bound", async () => {
    const run = await timed("status", "--db", "sqlite:./no-such.db", "--timeout", "5");
    expect(run).toMatchObject({ code: 1, stderr: expect.stringMatching(/^taskpool: --timeout is how long to wait for a taskpool server \(--url\); leave it out with --db/) });
  });
});
