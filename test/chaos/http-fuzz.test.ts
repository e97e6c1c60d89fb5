import type { TObject } from "@sinclair/typebox";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/core/clock.js";
import { toSnake } from "../../src/core/wire.js";
import { ROUTES } from "../../src/server/server.js";
import { createPostgres, createSqlite, type TestStore } from "../helpers/stores.js";
import { startServer } from "../server/harness.js";
import { scale } from "./settings.js";
import { snapshotter } from "./snapshot.js";

/**
 * Scenario 6, hostile HTTP input: fast-check builds requests to every route of ROUTES (wrong types,
 * huge and deeply nested JSON, unicode and lone surrogates, negative and huge numbers, missing and
 * extra fields, malformed JSON, bad ids, tokens and content types) and sends them to a real server.
 * No answer may be a 5xx or hang, every refusal must be the error envelope, and a refused request
 * must leave every table of the database exactly as it was. CI sends FUZZ_REQUESTS (default 600 on
 * SQLite, a third of that on PostgreSQL); `npm run chaos` sends 10,000.
 */
const REQUESTS = scale("FUZZ_REQUESTS", 600);

/** Values that break assumptions: edges of number ranges, odd strings, wrong types. */
const hostile: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer({ min: -(2 ** 31), max: 2 ** 31 }),
  fc.constantFrom(-1, 0, 1, 2 ** 31, 2 ** 53, -(2 ** 53), 1e308, -1e308, 0.5, Number.MAX_SAFE_INTEGER + 2),
  fc.double(),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.constantFrom("", "\u0000", "\ud800", "🙂".repeat(2000), "x".repeat(70_000), "-1", "1e400", "true", "null", "2026-13-45T99:99:99Z", "../../etc/passwd", "' OR 1=1 --"),
  fc.boolean(),
  fc.constant(null),
  fc.jsonValue({ maxDepth: 3 }),
  fc.integer({ min: 50, max: 400 }).map((depth) => JSON.parse("[".repeat(depth) + "]".repeat(depth))),
);

/** A body or query built from a schema's wire field names (some missing, some wrong) plus, sometimes, extra ones. */
function fieldsOf(schema: TObject | undefined, known: Record<string, unknown[]>): fc.Arbitrary<Record<string, unknown>> {
  const names = Object.keys(schema?.properties ?? {}).map(toSnake);
  const value = (name: string) => (known[name] ? fc.oneof(fc.constantFrom(...known[name]), hostile) : hostile);
  const fields = fc.record(Object.fromEntries(names.map((n) => [n, value(n)])), { requiredKeys: [] });
  return fc.tuple(fields, fc.option(fc.dictionary(fc.string({ maxLength: 12 }), hostile, { maxKeys: 3 }), { nil: undefined })).map(([f, extra]) => ({ ...extra, ...f }));
}

/** Raw bodies that are not the JSON a schema would see. */
const rawBody = fc.constantFrom(
  "{",
  "nul",
  "[]",
  '{"a":1,"a":2}',
  '{"__proto__":{"polluted":true}}',
  '{"constructor":{"prototype":{"x":1}}}',
  "[".repeat(100_000) + "]".repeat(100_000),
  '{"x":"' + "y".repeat(5 * 1024 * 1024) + '"}',
  "\u0000",
);

describe.each([
  ["sqlite", createSqlite, 1],
  ["postgres", createPostgres, 3],
] as const)("hostile HTTP input on %s", (name, create, divisor) => {
  let handle: TestStore;
  let close: () => Promise<void> = async () => {};
  afterEach(async () => {
    await close();
    await handle?.cleanup();
  });

  it(`${Math.ceil(REQUESTS / divisor)} generated requests to every route: no 5xx, and a refused request changes nothing`, { timeout: 30_000 + REQUESTS * 30 }, async () => {
    handle = await create({ clock: new ManualClock() });
    const { app, pool, url } = await startServer(handle, new ManualClock(), { auth: "none", rateLimitPerMinute: false, dashboard: false });
    const snapshots = await snapshotter(handle);
    close = async () => {
      await app.close();
      await snapshots.close();
    };
    // Something to aim at: tasks in several states, a held lease, a worker, a task type.
    const tasks = await pool.enqueueMany(Array.from({ length: 4 }, (_, i) => ({ taskType: "fuzz", params: { i } })));
    const [held] = await pool.protocol.claim({ workerId: "fuzz-worker", taskTypes: ["fuzz"], limit: 1, leaseSeconds: 600 });
    await pool.registerTaskType({ name: "typed", paramsSchema: { type: "object", properties: { n: { type: "integer" } } } });
    const ids = [...tasks.map((t) => t.task.id), 0, -1, 2 ** 53, 999_999];
    const known: Record<string, unknown[]> = {
      worker_id: ["fuzz-worker", "other"],
      lease_token: [held.leaseToken, "00000000-0000-0000-0000-000000000000"],
      task_type: ["fuzz", "typed"],
      id: ids,
      task_id: ids,
      name: ["typed", "nightly"],
    };
    const pathValue = fc.oneof(fc.constantFrom(...ids.map(String), "typed", "fuzz-worker", "nightly"), hostile.map((v) => (typeof v === "string" ? v : JSON.stringify(v) ?? "x")));

    const request = fc.integer({ min: 0, max: ROUTES.length - 1 }).chain((index) => {
      const route = ROUTES[index];
      const params = (route.url.match(/:\w+/g) ?? []).map(() => pathValue);
      return fc.record({
        index: fc.constant(index),
        params: fc.tuple(...params),
        query: fieldsOf(route.query as TObject | undefined, known),
        body: fc.oneof({ weight: 6, arbitrary: fieldsOf(route.body as TObject | undefined, known) }, { weight: 2, arbitrary: hostile }, { weight: 1, arbitrary: rawBody.map((raw) => ({ raw })) }),
        contentType: fc.constantFrom("application/json", "application/json", "application/json", "text/plain", "application/json; charset=latin1", "multipart/form-data"),
      });
    });

    let before = await snapshots.take();
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(request, async ({ index, params, query, body, contentType }) => {
        const route = ROUTES[index];
        let i = 0;
        // A lone surrogate cannot be put in a URL as UTF-8: sent as U+FFFD, as a browser would.
        const path = route.url.replace(/:\w+/g, () => encodeURIComponent((params[i++] as string).toWellFormed()));
        const search = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, typeof v === "string" ? v : (JSON.stringify(v) ?? "")])).toString();
        // A valid long-poll would wait its full time: keep generated waits short.
        if (body !== null && typeof body === "object" && typeof (body as { wait_ms?: unknown }).wait_ms === "number") (body as { wait_ms: number }).wait_ms %= 50;
        const payload = route.method === "GET" ? undefined : body !== null && typeof body === "object" && "raw" in body ? String(body.raw) : JSON.stringify(body);
        const response = await fetch(`${url}${path}${search ? `?${search}` : ""}`, {
          method: route.method,
          headers: { "content-type": contentType, "x-api-key": "tp_bogus" },
          body: payload,
          signal: AbortSignal.timeout(15_000),
        });
        const text = await response.text();
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        const what = `${route.method} ${path}${search ? `?${search.slice(0, 200)}` : ""} ${String(payload).slice(0, 300)} → ${response.status} ${text.slice(0, 300)}`;
        expect(response.status, what).toBeLessThan(500);
        if (response.status >= 400) {
          const answer = JSON.parse(text);
          // Outside the envelope: Node's HTTP parser answers a request line over 16 KiB (431) before Fastify sees it.
          if (response.status !== 431) expect(answer, what).toMatchObject({ success: false, error: expect.any(String), message: expect.any(String) });
          expect(await snapshots.take(), `the database changed after a refused request: ${what}`).toEqual(before);
        } else {
          before = await snapshots.take();
        }
      }),
      { numRuns: Math.ceil(REQUESTS / divisor), endOnFailure: true },
    );
    console.log(JSON.stringify({ scenario: `http fuzz on ${name}`, requests: Math.ceil(REQUESTS / divisor), statuses: Object.fromEntries(statuses) }));
  });

  // Fastify's router refuses a path parameter over 100 characters before any route runs.
  it("a path parameter over 100 characters gets the error envelope", async () => {
    handle = await create();
    const { app, url } = await startServer(handle, new ManualClock(), { auth: "none", dashboard: false });
    close = () => app.close();
    const response = await fetch(`${url}/api/tasks/${"1".repeat(101)}`);
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ success: false, error: expect.any(String), message: expect.any(String) });
  });
});
