import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../src/api/checked-store.js";
import { WriteBatcher } from "../src/api/write-batcher.js";
import { LeaseLostError } from "../src/core/errors.js";
import type { ClaimOptions } from "../src/core/task.js";
import { postgresKind, sqliteKind, type TestStore } from "./helpers/stores.js";

describe.each([postgresKind, sqliteKind])("WriteBatcher's next claims (claim_next) on $name", (kind) => {
  let handle: TestStore;
  let store: CheckedStore;
  /** The store calls each flush made: what the batching is for. */
  let calls: string[];
  beforeEach(async () => {
    handle = await kind.create();
    store = new CheckedStore(handle.store);
    calls = [];
    const completeMany = store.completeMany.bind(store);
    const claimEach = store.claimEach.bind(store);
    store.completeMany = (items, options) => (calls.push(`completeMany ${items.length}`), completeMany(items, options));
    store.claimEach = (claims) => (calls.push(`claimEach ${claims.length}`), claimEach(claims));
  });
  afterEach(() => handle.cleanup());

  const workers = ["w1", "w2", "w3", "w4"];
  const claimOne = (workerId: string): ClaimOptions => ({ workerId, taskTypes: ["job"], limit: 1 });

  it("writes concurrent outcomes in one statement beside one claim for all; a refused outcome's claim gives its tasks back", async () => {
    await store.enqueueMany(Array.from({ length: 8 }, (_, i) => ({ taskType: "job", params: { i } })));
    const held = await Promise.all(workers.map(async (w) => (await store.claim(claimOne(w)))[0]));
    calls = [];
    const batcher = new WriteBatcher(store, { returnTasks: true }, store);
    // w4 presents a stale token: its completion is refused, and the task its claim took goes back.
    const stale = { ...held[3], leaseToken: "stale" };
    const answers = await Promise.allSettled(
      held.map((task, i) => batcher.complete({ id: task.id, lease: i === 3 ? stale : task, result: { i } }, claimOne(task.workerId))),
    );
    expect(calls).toEqual(["claimEach 4", "completeMany 4"]);
    expect(answers[3].status === "rejected" && answers[3].reason).toBeInstanceOf(LeaseLostError);
    const next = answers.slice(0, 3).map((a) => (a.status === "fulfilled" ? a.value : null));
    for (const [i, written] of next.entries()) {
      expect(written?.task?.status).toBe("completed");
      expect(written?.next?.ok && written.next.value.map((t) => t.workerId)).toEqual([workers[i]]);
    }
    // w4 holds only the task it held before; the one claimed for it is pending again, its attempt refunded.
    expect((await store.list({ status: "claimed" })).tasks.filter((t) => t.workerId === "w4").map((t) => t.id)).toEqual([held[3].id]);
    const pending = (await store.list({ status: "pending" })).tasks;
    expect(pending).toHaveLength(1);
    expect(pending[0].attempts).toBe(0);
    expect((await store.events(pending[0].id)).map((e) => e.event)).toEqual(["created", "claimed", "released"]);
  });

  it("claims again once the outcome is written when the first claim came back short: it sees the slot the outcome freed", async () => {
    await store.registerTaskType({ name: "capped", maxRunning: 1 });
    await store.enqueueMany([{ taskType: "capped" }, { taskType: "capped" }, { taskType: "keyed", concurrencyKey: "k" }, { taskType: "keyed", concurrencyKey: "k" }]);
    const [capped] = await store.claim({ workerId: "w1", taskTypes: ["capped"] });
    const [keyed] = await store.claim({ workerId: "w2", taskTypes: ["keyed"] });
    calls = [];
    const batcher = new WriteBatcher(store, {}, store);
    const [first, second] = await Promise.all([
      batcher.complete({ id: capped.id, lease: capped }, { workerId: "w1", taskTypes: ["capped"] }),
      batcher.complete({ id: keyed.id, lease: keyed }, { workerId: "w2", taskTypes: ["keyed"] }),
    ]);
    // Beside the write, the cap and the key were still taken; after it, each claim gets the other task.
    // (On PostgreSQL the write may, rarely, commit before the first claim reads: then that claim gets them.
    // On SQLite the writes of one connection take their turns in call order: the first claim, the write,
    // then the second claim, which finds its key free; only the first is claimed again.)
    if (kind.name === "sqlite") expect(calls).toEqual(["claimEach 2", "completeMany 2", "claimEach 1"]);
    else expect(calls.slice(0, 2)).toEqual(["claimEach 2", "completeMany 2"]);
    expect(first.next?.ok && first.next.value.map((t) => [t.taskType, t.workerId])).toEqual([["capped", "w1"]]);
    expect(second.next?.ok && second.next.value.map((t) => [t.taskType, t.workerId])).toEqual([["keyed", "w2"]]);
    expect((await store.counts()).byStatus.pending).toBe(0);
  });

  it("keeps the outcome when the next claim is refused, and answers its error", async () => {
    await store.enqueueMany([{ taskType: "job" }]);
    const [task] = await store.claim(claimOne("w1"));
    const batcher = new WriteBatcher(store, {}, store);
    const written = await batcher.complete({ id: task.id, lease: task }, { workerId: "w1", limit: 0 });
    expect(written.ok).toBe(true);
    expect(written.next?.ok).toBe(false);
    expect((await store.get(task.id))?.status).toBe("completed");
  });

  it("without a next claim, claims nothing", async () => {
    await store.enqueueMany([{ taskType: "job" }, { taskType: "job" }]);
    const [task] = await store.claim(claimOne("w1"));
    const written = await new WriteBatcher(store, {}, store).complete({ id: task.id, lease: task });
    expect(written.next).toBeUndefined();
    expect(calls).toEqual(["completeMany 1"]);
    expect((await store.counts()).byStatus.pending).toBe(1);
  });
});
