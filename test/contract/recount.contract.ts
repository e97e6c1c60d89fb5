import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/core/errors.js";
import type { RecountChange } from "../../src/core/recount.js";
import type { PruneOptions } from "../../src/core/retention.js";
import type { TaskCounts } from "../../src/core/task.js";
import type { Store } from "../../src/store/store.js";
import type { StoreKind } from "../helpers/stores.js";
import { countsByReading, useStore } from "./context.js";

const SWEEP = { staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 };
const WEEK = 7 * 86_400;
const KEEP_FAILED: PruneOptions = { completedAfterSeconds: WEEK, cancelledAfterSeconds: WEEK, failedAfterSeconds: null, batchSize: 500 };

/** Adds `n` to a type's completed total behind the store's back, as a process of an earlier version could leave it. */
const skewTotal = (taskType: string, n: number) =>
  `INSERT INTO completed_totals (task_type, n) VALUES ('${taskType}', ${n}) ON CONFLICT (task_type) DO UPDATE SET n = completed_totals.n + excluded.n`;

/** The completed counts by type, as counts() answers them. */
const completedByType = (counts: TaskCounts) =>
  Object.fromEntries(
    Object.entries(counts.byType)
      .map(([type, statuses]) => [type, statuses.completed ?? 0] as const)
      .filter(([, n]) => n !== 0),
  );

/** What a recount should answer: the types where counts() and the rows disagree, by name. */
function expectedChanges(before: TaskCounts, reading: TaskCounts): RecountChange[] {
  const said = completedByType(before);
  const found = completedByType(reading);
  return [...new Set([...Object.keys(said), ...Object.keys(found)])]
    .sort()
    .map((taskType) => ({ taskType, before: said[taskType] ?? 0, after: found[taskType] ?? 0 }))
    .filter((c) => c.before !== c.after);
}

async function completeAll(store: Store, taskType: string, n: number, workerId = "w1") {
  await store.enqueueMany(Array.from({ length: n }, () => ({ taskType })));
  const leases = await store.claim({ workerId, taskTypes: [taskType], limit: n });
  await store.completeMany(leases.map((t) => ({ id: t.id, lease: t })));
}

export function recountContract(kind: StoreKind) {
  describe("recount", () => {
    const ctx = useStore(kind);

    it("sets the completed counts to the completed tasks, answering each type it changed, before and after; a dry run changes nothing", async () => {
      await completeAll(ctx.store, "a", 3);
      await completeAll(ctx.store, "b", 2);
      const pending = await ctx.store.enqueue({ taskType: "a" });
      // A completion by a statement that keeps no tally (an older taskpool's worker on PostgreSQL; on
      // SQLite the triggers count it anyway), a total too high, and one below zero for a type with no
      // completed task left (an older coordinator's retention).
      await ctx.execute(`UPDATE tasks SET status = 'completed', completed_at = created_at WHERE id = ${pending.task.id}`);
      await ctx.execute(skewTotal("b", 5));
      await ctx.execute(skewTotal("gone", -2));
      const before = await ctx.store.counts();
      const reading = await countsByReading(ctx.store);
      expect(before).not.toEqual(reading);
      const changes = expectedChanges(before, reading);
      expect(changes).toContainEqual({ taskType: "b", before: 7, after: 2 });
      expect(changes).toContainEqual({ taskType: "gone", before: -2, after: 0 });

      expect(await ctx.store.recount({ dryRun: true })).toEqual({ changed: changes, taskTypes: 3, dryRun: true });
      expect(await ctx.store.counts()).toEqual(before);

      expect(await ctx.store.recount()).toEqual({ changed: changes, taskTypes: 3, dryRun: false });
      expect(await ctx.store.counts()).toEqual(reading);
      // Exact, and staying so through the sweep's fold of the tallies and later completions.
      expect(await ctx.store.recount()).toEqual({ changed: [], taskTypes: 2, dryRun: false });
      await ctx.store.sweep(SWEEP);
      await completeAll(ctx.store, "b", 1);
      expect(await ctx.store.counts()).toEqual(await countsByReading(ctx.store));
      expect((await ctx.store.recount()).changed).toEqual([]);
    });

    it("on an empty pool answers nothing to change", async () => {
      expect(await ctx.store.recount()).toEqual({ changed: [], taskTypes: 0, dryRun: false });
    });

    it("refuses options it does not know, changing nothing", async () => {
      await completeAll(ctx.store, "a", 1);
      await ctx.execute(skewTotal("a", 4));
      const before = await ctx.store.counts();
      await expect(ctx.store.recount({ dryRun: "no" } as never)).rejects.toThrow(ValidationError);
      await expect(ctx.store.recount({ dryRun: false, force: true } as never)).rejects.toThrow(/force/);
      expect(await ctx.store.counts()).toEqual(before);
    });

    it("is exact once it commits, with completions, retention, the sweep's fold and another recount running at the same time", async () => {
      const ROUNDS = 40;
      const BATCH = 6;
      // Old completed tasks for retention to delete meanwhile, a few per round.
      await completeAll(ctx.store, "a", ROUNDS * 3);
      ctx.clock.advance(8 * 86_400_000);
      await ctx.store.enqueueMany(Array.from({ length: ROUNDS * BATCH }, (_, i) => ({ taskType: i % 3 === 0 ? "a" : "b" })));
      const leases = await ctx.store.claim({ workerId: "w1", limit: ROUNDS * BATCH, leaseSeconds: 3600 });
      await ctx.execute(skewTotal("a", 50));
      const [completer, pruner, sweeper] = [await ctx.another(), await ctx.another(), await ctx.another()];
      // Each round starts a batch of completions, a retention pass, a sweep and a recount together, then
      // checks: a tally a recount lost or counted twice shows in that round, before a later one could mend it.
      for (let round = 0; round < ROUNDS; round++) {
        const batch = leases.slice(round * BATCH, (round + 1) * BATCH).map((t) => ({ id: t.id, lease: t }));
        const [outcomes, pruned] = await Promise.all([completer.completeMany(batch), pruner.prune({ ...KEEP_FAILED, batchSize: 3 }), sweeper.sweep(SWEEP), ctx.store.recount()]);
        expect(outcomes.every((o) => o.ok)).toBe(true);
        expect(pruned.tasks).toBe(3);
        expect(await ctx.store.counts(), `round ${round}`).toEqual(await countsByReading(ctx.store));
      }
      expect((await countsByReading(ctx.store)).byStatus.completed).toBe(ROUNDS * BATCH);
    });
  });
}
