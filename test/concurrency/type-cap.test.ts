import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import type { EnqueueInput } from "../../src/core/task.js";
import type { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import type { Store } from "../../src/store/store.js";
import { createPostgres, createSqlite, type TestStore } from "../helpers/stores.js";
import { claimedOnceEach } from "./audit.js";
import { script, startTogether } from "../helpers/processes.js";

const CLAIMER = fileURLToPath(new URL("./type-cap-claimer.ts", import.meta.url));
const CAP = 3;
const TASKS: EnqueueInput[] = [
  ...Array.from({ length: 60 }, (_, i) => ({ taskType: "capped", params: { i } })),
  ...Array.from({ length: 60 }, (_, i) => ({ taskType: "free", params: { i } })),
];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The most intervals [start, end) open at one time; at a tie an end comes before a start, so touching intervals do not count as overlapping. */
function mostAtOnce(intervals: [number, number][]): number {
  const edges = intervals.flatMap(([start, end]) => [[start, 1] as const, [end, -1] as const]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let most = 0;
  for (const [, step] of edges) most = Math.max(most, (open += step));
  return most;
}

/**
 * Samples the committed number of claimed + running tasks of the capped type every millisecond, on a
 * connection of its own, until stopped; returns the largest number seen.
 */
function watchCapped(count: () => Promise<number>): { stop(): Promise<number> } {
  let max = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      max = Math.max(max, await count());
      await sleep(1);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return max;
    },
  };
}

async function setUp(store: Store): Promise<void> {
  await store.registerTaskType({ name: "capped", maxRunning: CAP });
  await store.enqueueMany(TASKS);
}

describe("max_running under 16 concurrent claimers", () => {
  let handle: TestStore | undefined;
  afterEach(async () => {
    await handle?.cleanup();
    handle = undefined;
  });

  it("PostgreSQL: 16 sessions never hold more than the cap, and drain every task once", async () => {
    const pgHandle = await createPostgres();
    handle = pgHandle;
    // Each claimer is its own pool of one connection: 16 sessions racing in the database.
    const claimers = await Promise.all(Array.from({ length: 16 }, () => pgHandle.another({ poolSize: 1 })));
    const monitor = await pgHandle.another({ poolSize: 1 });
    await setUp(pgHandle.store);

    const watch = watchCapped(async () => {
      const { rows } = await monitor.pool.query("SELECT count(*) AS n FROM tasks WHERE task_type = 'capped' AND status IN ('claimed', 'running')");
      return rows[0].n;
    });
    let held = 0;
    let maxHeld = 0;
    let completed = 0;
    const deadline = Date.now() + 60_000;
    await Promise.all(
      claimers.map(async (store: PostgresStore, n) => {
        while (completed < TASKS.length && Date.now() < deadline) {
          const batch = await store.claim({ workerId: `claimer-${n}`, limit: n % 2 === 0 ? 1 : 3 });
          if (batch.length === 0) {
            await sleep(2);
            continue;
          }
          const capped = batch.filter((t) => t.taskType === "capped").length;
          held += capped;
          maxHeld = Math.max(maxHeld, held);
          await sleep(5);
          // Let go before completing: the database counts the task until the completion commits.
          held -= capped;
          for (const task of batch) {
            await store.complete(task.id, task);
            completed++;
          }
        }
      }),
    );
    const maxSeen = await watch.stop();
    expect(completed).toBe(TASKS.length);
    expect(maxHeld).toBeLessThanOrEqual(CAP);
    expect(maxSeen).toBeLessThanOrEqual(CAP);
    expect(maxSeen).toBe(CAP); // the cap was reached, so the race was real
    await claimedOnceEach(pgHandle.store, TASKS.length);
  }, 90_000);

  it("SQLite: 16 processes on one file never hold more than the cap, and drain every task once", async () => {
    const sqliteHandle = await createSqlite();
    handle = sqliteHandle;
    await setUp(sqliteHandle.store);
    const db = sqliteHandle.store.db;
    const count = db.prepare("SELECT count(*) AS n FROM tasks WHERE task_type = 'capped' AND status IN ('claimed', 'running')");
    const watch = watchCapped(async () => (count.get() as { n: number }).n);

    const lines = await startTogether(Array.from({ length: 16 }, (_, n) => [script(CLAIMER), db.name, `claimer-${n}`]), 120_000);
    const maxSeen = await watch.stop();
    const done = lines.flatMap((line) => JSON.parse(line) as number[]);
    expect(done).toHaveLength(TASKS.length);
    expect(new Set(done).size).toBe(TASKS.length);
    expect(maxSeen).toBeLessThanOrEqual(CAP);
    // Held at once, as the tasks' own claim and completion times record it: on a loaded machine the
    // sampler above, in this process, could miss the few milliseconds three were held.
    const held = db.prepare("SELECT claimed_at, completed_at FROM tasks WHERE task_type = 'capped'").all() as { claimed_at: string; completed_at: string }[];
    expect(mostAtOnce(held.map((t) => [Date.parse(t.claimed_at), Date.parse(t.completed_at)]))).toBe(CAP); // the cap was reached, so the race was real
    await claimedOnceEach(sqliteHandle.store, TASKS.length);
  }, 120_000);
});
