import { request as httpRequest } from "node:http";
import { createConnection } from "node:net";
import { describe, expect, it, vi } from "vitest";
import type { ApiKeyScope } from "../../src/core/api-key.js";
import { connect, Taskpool } from "../../src/api/taskpool.js";
import { ROUTES } from "../../src/server/server.js";
import { captureLogs, eventually } from "../helpers/logs.js";
import { postgresKind, sqliteKind } from "../helpers/stores.js";
import { useServer } from "./harness.js";

/** A concrete path for a route's URL pattern. */
const pathOf = (url: string) => url.replace(":id", "1").replace(":task_type", "crawl").replace(":name", "crawl");
const guarded = ROUTES.filter((r) => r.access !== "public");

describe.each([sqliteKind, postgresKind])("API keys, scopes and limits on $name", (kind) => {
  const s = useServer(kind, { auth: "keys", bodyLimit: 4096 });
  const keyOf = async (scope: ApiKeyScope, rateLimitPerMinute?: number) => (await s.pool.createApiKey({ scope, rateLimitPerMinute })).key;

  it("every route but health and docs asks for a key: 401 without one, with a bad one or a revoked one, and nothing is written", async () => {
    for (const route of guarded) {
      const answer = await s.call(route.method, pathOf(route.url), route.method === "POST" ? {} : undefined);
      expect(answer.status, `${route.method} ${route.url}`).toBe(401);
      expect(answer.body).toEqual({ success: false, error: "unauthorized", message: "Missing API key: send it in the X-API-Key header (`taskpool keys create` makes one)" });
    }
    // A key sent as a bearer token is not looked for on /api: the answer says where it is.
    const bearer = await s.call("POST", "/api/tasks", { task_type: "crawl" }, { headers: { authorization: `Bearer ${await keyOf("producer")}` } });
    expect(bearer).toMatchObject({ status: 401, body: { message: "Missing API key: send it in the X-API-Key header (`taskpool keys create` makes one); the Authorization header is read on /metrics only" } });
    const invalid = await s.call("POST", "/api/tasks", { task_type: "crawl" }, { key: "tp_not-a-key-at-all" });
    expect(invalid).toMatchObject({ status: 401, body: { success: false, error: "unauthorized", message: "Invalid or revoked API key" } });

    const { key, apiKey } = await s.pool.createApiKey({ scope: "admin", name: "ci" });
    expect((await s.call("POST", "/api/tasks", { task_type: "crawl" }, { key })).status).toBe(201);
    await s.pool.revokeApiKey(apiKey.id);
    const revoked = await s.call("POST", "/api/tasks", { task_type: "crawl" }, { key });
    expect(revoked).toMatchObject({ status: 401, body: { success: false, error: "unauthorized", message: "Invalid or revoked API key" } });
    expect((await s.pool.counts()).byStatus.pending).toBe(1);

    expect((await s.call("GET", "/healthz")).status).toBe(200);
    expect((await s.call("GET", "/readyz")).status).toBe(200);
    expect((await s.call("GET", "/openapi.json")).status).toBe(200);
    expect((await fetch(`${s.url}/docs/`).then(async (r) => (await r.text(), r.status)))).toBe(200);
  });

  it("each scope reaches its routes and gets 403 elsewhere; admin reaches everything", async () => {
    const keys = { admin: await keyOf("admin"), producer: await keyOf("producer"), worker: await keyOf("worker") };
    for (const route of guarded) {
      for (const scope of ["admin", "producer", "worker"] as const) {
        const allowed = scope === "admin" || (route.access as readonly string[]).includes(scope);
        const answer = await s.call(route.method, pathOf(route.url), route.method === "POST" ? {} : undefined, { key: keys[scope] });
        const what = `${scope} ${route.method} ${route.url}`;
        if (allowed) {
          expect([401, 403], what).not.toContain(answer.status);
          expect(answer.status, what).toBeLessThan(500);
        } else {
          expect(answer.status, what).toBe(403);
          const needs = [...new Set([...(route.access as readonly string[]), "admin"])].join(" or ");
          expect(answer.body, what).toEqual({ success: false, error: "forbidden", message: `This API key's scope is ${scope}; ${route.method} ${route.url} needs ${needs}` });
        }
      }
    }
    expect((await s.call("POST", "/api/tasks", { task_type: "crawl" }, { key: keys.worker })).body.message).toBe("This API key's scope is worker; POST /api/tasks needs producer or admin");
    expect((await s.call("POST", "/api/tasks/recover-stale", undefined, { key: keys.worker })).body.message).toBe("This API key's scope is worker; POST /api/tasks/recover-stale needs admin");
  });

  it("rate-limits each key: 429 with Retry-After in the header and the envelope; other keys are not affected", async () => {
    const slow = await keyOf("producer", 3);
    for (let i = 0; i < 3; i++) expect((await s.call("GET", "/api/tasks/counts", undefined, { key: slow })).status).toBe(200);
    const limited = await s.call("GET", "/api/tasks/counts", undefined, { key: slow });
    expect(limited.status).toBe(429);
    const retryAfter = Number(limited.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(limited.body).toEqual({
      success: false,
      error: "rate_limited",
      message: `Rate limit exceeded: this API key may make 3 requests per minute; retry in ${retryAfter} s`,
      retry_after: retryAfter,
    });
    // Refused before it ran: nothing written.
    expect((await s.call("POST", "/api/tasks", { task_type: "crawl" }, { key: slow })).status).toBe(429);
    expect((await s.pool.counts()).byStatus.pending).toBe(0);
    expect((await s.call("GET", "/api/tasks/counts", undefined, { key: await keyOf("producer") })).status).toBe(200);
  });

  it("times a key's window on the monotonic clock: a wall-clock step back on the server's host does not lengthen it", async () => {
    const key = await keyOf("producer", 1);
    expect((await s.call("GET", "/api/tasks/counts", undefined, { key })).status).toBe(200);
    // Only Date is faked: the server's host clock stepped 5 minutes back (NTP, an operator).
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() - 300_000, shouldAdvanceTime: true });
    try {
      const limited = await s.call("GET", "/api/tasks/counts", undefined, { key });
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get("retry-after"))).toBeLessThanOrEqual(60);
    } finally {
      vi.useRealTimers();
    }
  });

  it("refuses a body over the limit with 413 in the envelope, and creates nothing", async () => {
    const key = await keyOf("producer");
    const big = await s.call("POST", "/api/tasks", { task_type: "crawl", params: { blob: "x".repeat(5000) } }, { key });
    expect(big.status).toBe(413);
    expect(big.body).toEqual({
      success: false,
      error: "payload_too_large",
      message: "Request body is larger than the server's limit of 4096 bytes; send less (e.g. split a batch) or raise the limit (taskpool serve --body-limit)",
    });
    expect((await s.pool.counts()).byStatus.pending).toBe(0);
  });

  it("answers 413 to a client that sends its whole body before it reads (as Python's urllib does), rather than breaking its connection", async () => {
    const key = await keyOf("producer");
    const body = Buffer.from(JSON.stringify({ task_type: "crawl", params: { blob: "x".repeat(8 * 2 ** 20) } }));
    const head = `POST /api/tasks HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\nx-api-key: ${key}\r\ncontent-length: ${body.length}\r\n\r\n`;
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = createConnection(Number(new URL(s.url).port), "127.0.0.1");
      const received: Buffer[] = [];
      socket.on("error", reject);
      socket.on("data", (chunk: Buffer) => received.push(chunk));
      socket.on("end", () => resolve(Buffer.concat(received).toString()));
      // Nothing is read until the whole body is written: a refusal that closes the connection first fails the write.
      socket.pause();
      socket.write(head);
      socket.write(body, () => socket.resume());
    });
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))).toMatchObject({ success: false, error: "payload_too_large" });
    expect((await s.pool.counts()).byStatus.pending).toBe(0);
  });
});

describe("the server's default rate limit", () => {
  const s = useServer(sqliteKind, { auth: "keys", rateLimitPerMinute: 2 });

  it("applies to keys that set none; requests without auth are not counted", async () => {
    const { key } = await s.pool.createApiKey({ scope: "producer" });
    expect((await s.call("GET", "/api/workers", undefined, { key })).status).toBe(200);
    expect((await s.call("GET", "/api/workers", undefined, { key })).status).toBe(200);
    const limited = await s.call("GET", "/api/workers", undefined, { key });
    expect(limited.status).toBe(429);
    expect(limited.body.message).toMatch(/^Rate limit exceeded: this API key may make 2 requests per minute; retry in \d+ s$/);
    for (let i = 0; i < 5; i++) expect((await s.call("GET", "/healthz")).status).toBe(200);
  });
});

describe.each([sqliteKind, postgresKind])("failed authentications per client address on $name", (kind) => {
  const s = useServer(kind, { auth: "keys", authFailuresPerMinute: 3 });

  it("past the limit an address gets 429 with Retry-After before any lookup; keys the server accepted still work; successes are not counted", async () => {
    const accepted = (await s.pool.createApiKey({ scope: "producer" })).key;
    const unseen = (await s.pool.createApiKey({ scope: "producer" })).key;
    // Successes first: they must not use up the failures' allowance.
    for (let i = 0; i < 5; i++) expect((await s.call("GET", "/api/tasks/counts", undefined, { key: accepted })).status).toBe(200);
    const lookups = vi.spyOn(s.pool, "authenticate");
    for (let i = 0; i < 3; i++) expect((await s.call("POST", "/api/tasks", { task_type: "crawl" }, { key: `tp_guess-${i}` })).status).toBe(401);
    expect(lookups).toHaveBeenCalledTimes(3);

    const refused = await s.call("POST", "/api/tasks", { task_type: "crawl" }, { key: "tp_guess-3" });
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(refused.status).toBe(429);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.body).toEqual({
      success: false,
      error: "rate_limited",
      message: `Too many different wrong API keys from this address (at most 3 a minute); retry in ${retryAfter} s with a valid key`,
      retry_after: retryAfter,
    });
    expect(lookups).toHaveBeenCalledTimes(3);
    // A key this server accepted is let through (a worker behind the same NAT); one it never saw waits like a guess.
    expect((await s.call("POST", "/api/tasks", { task_type: "crawl" }, { key: accepted })).status).toBe(201);
    expect((await s.call("GET", "/api/tasks/counts", undefined, { key: unseen })).status).toBe(429);
    expect((await s.pool.counts()).byStatus.pending).toBe(1);
  });

  it("X-API-Key sent twice is a 400 saying to send one, not a wrong key: it counts for no address's limit", async () => {
    const key = (await s.pool.createApiKey({ scope: "producer" })).key;
    const other = (await s.pool.createApiKey({ scope: "producer" })).key;
    const { port } = new URL(s.url);
    /** Two header lines, as `curl -H` twice sends them (fetch would join them into one). */
    const twice = (keys: string[]) =>
      new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
        const req = httpRequest({ host: "127.0.0.1", port, method: "GET", path: "/api/tasks/counts", headers: { "x-api-key": keys } }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString()) }));
        });
        req.on("error", reject);
        req.end();
      });
    const expected = {
      status: 400,
      body: { success: false, error: "bad_request", message: "Send one X-API-Key header, with one key: this request sent 2 (a header repeated, or keys joined with a comma)" },
    };
    for (let i = 0; i < 5; i++) expect(await twice([key, `tp_guess-${i}`])).toEqual(expected);
    expect(await twice([key, key])).toEqual(expected);
    // Joined in one header, as fetch sends two values: the same.
    expect(await s.call("GET", "/api/tasks/counts", undefined, { key: `${key}, ${other}` })).toMatchObject(expected);
    // None of them counted as a failed key (3 a minute here): a wrong key is still told so, not rate limited.
    expect((await s.call("GET", "/api/tasks/counts", undefined, { key: "tp_guess-x" })).status).toBe(401);
    expect((await s.call("GET", "/api/tasks/counts", undefined, { key })).status).toBe(200);
  });

  it("a wrong key sent again and again counts once: a worker left running with its revoked key locks no one out", async () => {
    const revoked = await s.pool.createApiKey({ scope: "worker" });
    const unseen = (await s.pool.createApiKey({ scope: "producer" })).key;
    await s.pool.revokeApiKey(revoked.apiKey.id);
    for (let i = 0; i < 10; i++) expect((await s.call("POST", "/api/tasks/claim", { worker_id: "w1" }, { key: revoked.key })).status).toBe(401);
    expect((await s.call("GET", "/api/tasks/counts", undefined, { key: unseen })).status).toBe(200);
    // Different wrong keys still count, the revoked one among them.
    for (let i = 0; i < 2; i++) expect((await s.call("GET", "/api/workers", undefined, { key: `tp_guess-${i}` })).status).toBe(401);
    expect((await s.call("GET", "/api/workers", undefined, { key: "tp_guess-2" })).status).toBe(429);
  });

  it("times the window on the monotonic clock: a wall-clock step back does not lengthen it, and it reopens a minute later", async () => {
    const key = (await s.pool.createApiKey({ scope: "producer" })).key;
    vi.useFakeTimers({ toFake: ["Date", "hrtime"], shouldAdvanceTime: true });
    try {
      for (let i = 0; i < 3; i++) expect((await s.call("GET", "/api/workers", undefined, { key: `tp_wrong-${i}` })).status).toBe(401);
      // The server's host clock steps 5 minutes back (NTP, an operator); the monotonic one does not.
      vi.setSystemTime(Date.now() - 300_000);
      const refused = await s.call("GET", "/api/workers", undefined, { key });
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get("retry-after"))).toBeLessThanOrEqual(60);
      vi.advanceTimersByTime(60_000);
      expect((await s.call("GET", "/api/workers", undefined, { key })).status).toBe(200);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("failed authentications behind a reverse proxy", () => {
  const forwarded = (address: string) => ({ "x-forwarded-for": address });

  describe("trusted (trustProxy: loopback, where the test's requests come from)", () => {
    const s = useServer(sqliteKind, { auth: "keys", authFailuresPerMinute: 3, trustProxy: "loopback" });

    it("counts each client by the address the proxy forwards: one guessing locks out only itself", async () => {
      for (let i = 0; i < 3; i++) expect((await s.call("GET", "/api/workers", undefined, { key: `tp_guess-${i}`, headers: forwarded("203.0.113.7") })).status).toBe(401);
      expect((await s.call("GET", "/api/workers", undefined, { key: "tp_guess-3", headers: forwarded("203.0.113.7") })).status).toBe(429);
      const key = (await s.pool.createApiKey({ scope: "producer" })).key;
      expect((await s.call("GET", "/api/workers", undefined, { key, headers: forwarded("203.0.113.8") })).status).toBe(200);
      expect((await s.call("GET", "/api/workers", undefined, { key: "tp_guess-4", headers: forwarded("203.0.113.8") })).status).toBe(401);
    });
  });

  describe("not trusted (the default)", () => {
    const s = useServer(sqliteKind, { auth: "keys", authFailuresPerMinute: 3 });

    it("ignores X-Forwarded-For: a client cannot get a fresh allowance by naming another address", async () => {
      for (let i = 0; i < 3; i++) expect((await s.call("GET", "/api/workers", undefined, { key: `tp_guess-${i}`, headers: forwarded(`203.0.113.${i}`) })).status).toBe(401);
      expect((await s.call("GET", "/api/workers", undefined, { key: "tp_guess-3", headers: forwarded("203.0.113.99") })).status).toBe(429);
    });
  });
});

describe("a server with no default rate limit", () => {
  const s = useServer(sqliteKind, { auth: "keys", rateLimitPerMinute: false });

  it("still holds a key that sets its own limit to it; keys that set none are not limited", async () => {
    const limited = (await s.pool.createApiKey({ scope: "producer", rateLimitPerMinute: 2 })).key;
    const free = (await s.pool.createApiKey({ scope: "producer" })).key;
    for (let i = 0; i < 2; i++) expect((await s.call("GET", "/api/workers", undefined, { key: limited })).status).toBe(200);
    const refused = await s.call("GET", "/api/workers", undefined, { key: limited });
    expect(refused.status).toBe(429);
    expect(refused.body.message).toMatch(/^Rate limit exceeded: this API key may make 2 requests per minute; retry in \d+ s$/);
    for (let i = 0; i < 5; i++) expect((await s.call("GET", "/api/workers", undefined, { key: free })).status).toBe(200);
  });
});

describe("a server without keys", () => {
  const s = useServer(sqliteKind, { auth: "none" });

  it("refuses what a page on another site sends through a visitor's browser; scripts, clients and the dashboard's own calls go through", async () => {
    // A page anywhere may POST to 127.0.0.1 with no body and no header a browser asks the server about first
    // (fetch in no-cors mode): without this, any site its operator opened could cancel their tasks.
    const task = await s.pool.enqueue("crawl", {});
    for (const site of ["cross-site", "same-site"]) {
      const refused = await s.call("POST", `/api/tasks/${task.id}/cancel`, undefined, { headers: { "sec-fetch-site": site, origin: "http://evil.example" } });
      expect(refused).toMatchObject({ status: 403, body: { success: false, error: "forbidden", message: `A page on another site may not call this server's API (Sec-Fetch-Site: ${site})` } });
    }
    // A browser that sends no Sec-Fetch-Site still says where the page is from.
    for (const origin of ["http://evil.example", "null", "http://127.0.0.1:1"]) {
      const refused = await s.call("POST", `/api/tasks/${task.id}/cancel`, undefined, { headers: { origin } });
      expect(refused).toMatchObject({ status: 403, body: { success: false, error: "forbidden", message: `A page on another site may not call this server's API (Origin: ${origin})` } });
    }
    expect((await s.pool.get(task.id))?.status).toBe("pending");
    expect((await s.call("GET", "/healthz", undefined, { headers: { "sec-fetch-site": "cross-site" } })).status).toBe(200);
    // The dashboard's own POSTs carry its origin: this server's.
    expect((await s.call("POST", `/api/tasks/${task.id}/retry`, undefined, { headers: { origin: new URL(s.url).origin } })).status).not.toBe(403);
    expect((await s.call("GET", "/api/tasks/counts", undefined, { headers: { "sec-fetch-site": "same-origin" } })).status).toBe(200);
    expect((await s.call("POST", `/api/tasks/${task.id}/cancel`)).body.task.status).toBe("cancelled");
  });
});

/** A request with headers fetch will not send (Host among them), through node:http. */
function rawCall(base: string, method: string, path: string, headers: Record<string, string>): Promise<{ status: number; body: Record<string, unknown> }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, method, path, headers }, (res) => {
      let text = "";
      res.on("data", (chunk) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("a server keyless for listening on loopback", () => {
  const s = useServer(sqliteKind, { auth: "none", loopbackOnly: true });

  it("answers only requests addressed to a loopback host: a page that points its own name at 127.0.0.1 (DNS rebinding) is refused", async () => {
    const task = await s.pool.enqueue("crawl", {});
    const { port } = new URL(s.url);
    // After the rebind the attacker's page is the same origin, so the browser sends same-origin.
    const rebound = await rawCall(s.url, "POST", `/api/tasks/${task.id}/cancel`, { host: `evil.example:${port}`, "sec-fetch-site": "same-origin" });
    expect(rebound).toEqual({
      status: 403,
      body: {
        success: false,
        error: "forbidden",
        message:
          `This server has no API key, so it answers only requests addressed to this machine (Host: 127.0.0.1, localhost or [::1]), not to "evil.example:${port}": ` +
          "a page can point a name of its own at this machine. Use http://127.0.0.1:<port>, or create a key (taskpool keys create) and restart",
      },
    });
    expect((await rawCall(s.url, "GET", "/api/tasks", { host: `evil.example:${port}` })).status).toBe(403);
    expect((await s.pool.get(task.id))?.status).toBe("pending");
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, "localhost"]) {
      expect((await rawCall(s.url, "GET", "/api/tasks/counts", { host })).status, host).toBe(200);
    }
    expect((await rawCall(s.url, "GET", "/healthz", { host: "evil.example" })).status).toBe(200);
  });
});

describe("a worker over HTTP on a rate-limited key", () => {
  const s = useServer(sqliteKind, { auth: "keys", rateLimitPerMinute: 10_000, dashboard: false });

  it("waits as long as the 429 says before claiming again, whatever wakes it meanwhile", async () => {
    const { key } = await s.pool.createApiKey({ scope: "worker", rateLimitPerMinute: 4 });
    const logs = captureLogs();
    const remote = await connect(s.url, { apiKey: key });
    // Its start beats once and opens a wake-up wait; its claims then use up the key's minute.
    const worker = remote.worker({ roles: ["later"], handlers: { later: async () => {} }, pollIntervalMs: 50, heartbeatIntervalMs: 30_000, heartbeatThread: false, logger: logs.logger });
    try {
      await worker.start();
      const refusals = () => logs.lines().filter((l) => l.msg.startsWith("Claim failed"));
      await eventually(() => refusals().length > 0, 5000, "a claim refused by the rate limit");
      const [first] = refusals();
      expect(first.msg).toMatch(/^Claim failed; not claiming for (\d+) ms$/);
      expect(Number(/for (\d+) ms/.exec(first.msg)![1])).toBeGreaterThan(30_000); // the window's remainder, not 500 ms
      // Finished tasks and notifications wake the loop; none of it may bring the next claim forward.
      await s.pool.enqueue("later", {});
      await new Promise((r) => setTimeout(r, 1500));
      expect(refusals()).toHaveLength(1);
    } finally {
      await worker.stop(0);
      await remote.close();
    }
  });
});

describe.each([sqliteKind, postgresKind])("the API key cache on $name", (kind) => {
  const s = useServer(kind, { auth: "keys", apiKeyCacheMs: 400 });

  it("trusts a looked-up key for the cache time: a revocation made elsewhere applies after it, one made through the server's pool at once", async () => {
    const elsewhere = new Taskpool(s.pool.protocol, null); // another process's pool, as far as the server can tell
    const { key, apiKey } = await s.pool.createApiKey({ scope: "admin" });
    expect((await s.call("GET", "/api/tasks/counts", undefined, { key })).status).toBe(200);
    await elsewhere.revokeApiKey(apiKey.id);
    expect((await s.call("GET", "/api/tasks/counts", undefined, { key })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 450));
    expect((await s.call("GET", "/api/tasks/counts", undefined, { key })).status).toBe(401);

    const second = await s.pool.createApiKey({ scope: "admin" });
    expect((await s.call("GET", "/api/tasks/counts", undefined, { key: second.key })).status).toBe(200);
    await s.pool.revokeApiKey(second.apiKey.id);
    expect((await s.call("GET", "/api/tasks/counts", undefined, { key: second.key })).status).toBe(401);
  });
});
