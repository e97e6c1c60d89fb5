import { afterEach, describe, expect, it } from "vitest";
import { connect } from "../../src/api/taskpool.js";
import { createPostgres, createSqlite, type TestStore } from "../helpers/stores.js";
import type { Target } from "./cluster.js";
import { PrivatePostgres } from "./private-postgres.js";
import { report, scale } from "./settings.js";
import { runSoak, unbounded } from "./soak.js";

/**
 * The soak (issue 13): steady enqueue and drain with worker kills, retention on with a short age,
 * table sizes and every long-lived process's memory sampled. Bounded means: the max of the last
 * quarter of each series is at most FACTOR × the max of the first quarter (plus a little slack for
 * tiny numbers). CI runs 15 s on SQLite; `npm run soak` runs 30 minutes on PostgreSQL: a private
 * server of the test's own when this machine can start one (private-postgres.ts), with PostgreSQL's
 * default settings, autovacuum included (the shared test server runs without it, and without
 * autovacuum a deleted row's space is never reused, whatever retention does).
 */
const SECONDS = scale("SOAK_SECONDS", 15);
const DIALECT = process.env.SOAK_DB === "postgres" ? "postgres" : "sqlite";
const FACTOR = 1.5;
// Below these, growth is noise (a few rows, a few pages, a heap resizing) rather than a leak.
const SLACK = { rows: 50, bytes: 256 * 1024, rss: 24 * 1024 * 1024 };

describe(`soak on ${DIALECT}`, () => {
  let handle: TestStore | null = null;
  let server: PrivatePostgres | null = null;
  afterEach(async () => {
    await handle?.cleanup();
    await server?.stop();
  });

  const database = async (): Promise<Target> => {
    if (DIALECT === "sqlite") return (handle = await createSqlite());
    // SOAK_PG=private|shared picks the server; by default the long run gets a private one.
    const own = (process.env.SOAK_PG ?? (SECONDS > 300 ? "private" : "shared")) === "private";
    if (!own || !PrivatePostgres.available()) return (handle = await createPostgres());
    server = await PrivatePostgres.start();
    await (await connect(server.url, { schema: "soak" })).close(); // migrates
    return { url: server.url, schema: "soak" };
  };

  it(`${SECONDS} s of steady load with worker kills: tables and memory stay bounded, nothing lost or done twice`, { timeout: SECONDS * 1000 + 180_000 }, async () => {
    const soak = await runSoak({
      target: await database(),
      dialect: DIALECT,
      seconds: SECONDS,
      ratePerSecond: scale("SOAK_RATE", 40),
      workers: scale("SOAK_WORKERS", 3),
      killEveryMs: scale("SOAK_KILL_EVERY_MS", 3000),
      sampleEveryMs: scale("SOAK_SAMPLE_MS", SECONDS > 120 ? 15_000 : 1000),
      retainMs: scale("SOAK_RETAIN_MS", SECONDS > 120 ? 60_000 : 2000),
    });
    const first = soak.samples[0];
    const last = soak.samples.at(-1)!;
    const peak = (pick: (s: (typeof soak.samples)[number]) => Record<string, number>) =>
      Object.fromEntries(Object.keys(pick(last)).map((k) => [k, Math.max(...soak.samples.map((s) => pick(s)[k] ?? 0))]));
    report(`soak on ${DIALECT}`, {
      seconds: soak.seconds, enqueued: soak.enqueued, cancelled: soak.cancelled, kills: soak.kills, pruned: soak.pruned, remaining: soak.remaining,
      samples: soak.samples.length, duplicateCompletions: soak.duplicateCompletions, autovacuum: soak.autovacuum,
      rows: { first: first.rows, last: last.rows, peak: peak((s) => s.rows) },
      bytes: { first: first.bytes, last: last.bytes, peak: peak((s) => s.bytes) },
      rssMiB: Object.fromEntries(Object.entries(peak((s) => s.rssBytes)).map(([k, v]) => [k, Math.round(v / 2 ** 20)])),
      ...soak.summary,
    });

    expect(soak.crashed).toEqual([]);
    expect(soak.kills).toBeGreaterThan(0);
    expect(soak.summary.violations.slice(0, 20)).toEqual([]);
    expect(soak.duplicateCompletions).toBe(0);
    // Nothing lost: every task enqueued is either still there (and terminal: the checker) or was pruned.
    expect(soak.remaining + soak.pruned.tasks).toBe(soak.enqueued);
    expect(soak.pruned.tasks).toBeGreaterThan(soak.enqueued / 4);
    expect(unbounded(soak.samples, (s) => s.rows, FACTOR, SLACK.rows)).toEqual([]);
    expect(unbounded(soak.samples, (s) => s.rssBytes, FACTOR, SLACK.rss)).toEqual([]);
    // PostgreSQL reuses a deleted row's space only once autovacuum has been by (a minute apart by
    // default), so its bytes are judged in the long run only, with autovacuum on; SQLite reuses freed
    // pages at once.
    if (DIALECT === "sqlite" || (SECONDS > 300 && soak.autovacuum)) expect(unbounded(soak.samples, (s) => s.bytes, FACTOR, SLACK.bytes)).toEqual([]);
  });
});
