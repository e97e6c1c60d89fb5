import { describe, expect, it } from "vitest";
import { retryDelayMs } from "../src/core/backoff.js";
import { ManualClock } from "../src/core/clock.js";
import { SqliteStore } from "../src/store/sqlite/sqlite-store.js";

/** A small seeded generator (mulberry32), so a failing case can be replayed. */
function seeded(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("SQLite fail", () => {
  // The delay is computed in SQL there (so the lease check and the decision are one UPDATE); it must
  // stay retryDelayMs to the millisecond, whatever the policy, attempt and jitter draw.
  it("schedules the retry exactly retryDelayMs after now, for arbitrary policies and draws", async () => {
    const next = seeded(20261123);
    let draw = 0;
    const clock = new ManualClock(new Date("2030-01-01T00:00:00.123Z"));
    const store = new SqliteStore({ path: ":memory:", clock, random: () => draw });
    await store.migrate();
    try {
      for (let n = 0; n < 200; n++) {
        const backoff = {
          baseSeconds: n % 10 === 0 ? Math.round(next() * 60) : next() * 600,
          factor: n % 7 === 0 ? 2 : 1 + next() * 9,
          maxSeconds: n % 5 === 0 ? 30 * 86400 : next() * 86400,
          jitter: n % 4 === 0 ? 0 : next(),
        };
        const { task } = await store.enqueue({ taskType: "backoff", maxAttempts: 10, backoff });
        for (let attempt = 1; attempt < 10; attempt++) {
          clock.advance(Math.floor(next() * 100_000));
          draw = next();
          const lease = await store.claimById(task.id, { workerId: "w1" });
          const failed = await store.fail(task.id, lease, { error: "again" });
          const expected = retryDelayMs(failed.backoff, attempt, () => draw);
          expect(failed.scheduledFor.getTime() - clock.now().getTime(), JSON.stringify({ backoff: failed.backoff, attempt, draw })).toBe(expected);
        }
      }
    } finally {
      await store.close();
    }
  });
});
