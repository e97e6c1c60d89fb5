import { afterEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import type { Store } from "../../src/store/store.js";
import { createPostgres, type TestStore } from "../helpers/stores.js";

const TASKS = 2_000;
const COMPLETERS = 6;
const SWEEP = { staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 };

/**
 * The completed totals of migration 011 and the throughput minutes of migration 014 under
 * concurrency: completions from several connections append tallies while sweeps on two other
 * connections fold them (two folds at once, as two coordinators would) and readers count. A tally
 * folded twice, or lost between the tallies and what they fold into, shows as a count that is not the truth.
 */
describe("PostgreSQL completed counts and throughput beside concurrent completions and folds", () => {
  let handle: TestStore;
  afterEach(async () => {
    await handle?.cleanup();
  });

  it("counts every completion exactly once, whichever fold or read it meets", async () => {
    handle = await createPostgres();
    const open = async () => new CheckedStore(await handle.another({ poolSize: 2 }));
    const producer = new CheckedStore(handle.store);
    await producer.enqueueMany(Array.from({ length: TASKS }, (_, i) => ({ taskType: i % 3 === 0 ? "b" : "a" })));

    let completing = true;
    const completer = async (store: Store, n: number) => {
      for (;;) {
        const tasks = await store.claim({ workerId: `w${n}`, limit: 1 + (n % 4) * 10 });
        if (tasks.length === 0) return;
        if (tasks.length === 1) await store.complete(tasks[0].id, tasks[0]);
        else await store.completeMany(tasks.map((t) => ({ id: t.id, lease: t })));
      }
    };
    const folder = async (store: Store) => {
      while (completing) await store.sweep(SWEEP);
    };
    const seen: number[] = [];
    const seenThroughput: number[] = [];
    const reader = async (store: Store) => {
      while (completing) {
        const { byStatus } = await store.counts();
        // One statement, one snapshot: the counts of every status always add up to the tasks.
        expect(Object.values(byStatus).reduce((a, b) => a + b, 0)).toBe(TASKS);
        seen.push(byStatus.completed);
        seenThroughput.push((await store.throughput()).completed);
      }
    };

    const completers = await Promise.all(Array.from({ length: COMPLETERS }, open));
    const background = Promise.all([folder(await open()), folder(await open()), reader(await open())]);
    await Promise.all(completers.map((store, n) => completer(store, n)));
    completing = false;
    await background;

    expect(seen.length).toBeGreaterThan(5);
    // Read one after another, each in a later snapshot: never fewer completed than the read before.
    expect(seen).toEqual([...seen].sort((x, y) => x - y));
    expect(seenThroughput).toEqual([...seenThroughput].sort((x, y) => x - y));
    expect(seenThroughput.at(-1)).toBeLessThanOrEqual(TASKS);
    expect(await producer.counts()).toEqual({ byStatus: { pending: 0, claimed: 0, running: 0, completed: TASKS, failed: 0, cancelled: 0 }, byType: { a: { completed: 1333 }, b: { completed: 667 } } });
    expect((await producer.throughput()).completed).toBe(TASKS);
    await producer.sweep(SWEEP);
    expect((await producer.counts()).byStatus.completed).toBe(TASKS);
    expect((await producer.throughput()).completed).toBe(TASKS);
  });
});
