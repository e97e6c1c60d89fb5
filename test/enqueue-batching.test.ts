import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../src/api/checked-store.js";
import { Taskpool } from "../src/api/taskpool.js";
import { ValidationError } from "../src/core/errors.js";
import { postgresKind, sqliteKind, type TestStore } from "./helpers/stores.js";

describe.each([postgresKind, sqliteKind])("pool.enqueue batching on $name", (kind) => {
  let handle: TestStore;
  let pool: Taskpool;
  /** The batches the store was asked to insert, by size (a real store, counted on its way in). */
  let batches: number[];
  /** The same for batches of single calls with idempotency keys (enqueueCalls, PostgreSQL's). */
  let callBatches: number[];
  beforeEach(async () => {
    handle = await kind.create();
    batches = [];
    callBatches = [];
    const enqueueMany = handle.store.enqueueMany.bind(handle.store);
    handle.store.enqueueMany = (inputs) => {
      batches.push(inputs.length);
      return enqueueMany(inputs);
    };
    const enqueueCalls = handle.store.enqueueCalls?.bind(handle.store);
    if (enqueueCalls) {
      handle.store.enqueueCalls = (calls) => {
        callBatches.push(calls.length);
        return enqueueCalls(calls);
      };
    }
    pool = new Taskpool(new CheckedStore(handle.store), null);
  });
  afterEach(() => handle.cleanup());

  it("concurrent calls share inserts, each caller gets its own task, in its own order", async () => {
    const tasks = await Promise.all(Array.from({ length: 60 }, (_, i) => pool.enqueue("mail", { n: i }, { priority: i % 3 })));
    expect(tasks.map((t) => t.params)).toEqual(Array.from({ length: 60 }, (_, i) => ({ n: i })));
    expect(tasks.map((t) => t.priority)).toEqual(Array.from({ length: 60 }, (_, i) => i % 3));
    expect(new Set(tasks.map((t) => t.id)).size).toBe(60);
    expect((await pool.counts()).byStatus.pending).toBe(60);
    // The first call goes alone; the rest waited for it and went together.
    expect(batches.length).toBeGreaterThan(0);
    expect(batches.length).toBeLessThan(5);
    expect(batches.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(59);
  });

  it("a refused call among concurrent ones is refused alone, worded as a single call's, and the others are written", async () => {
    await pool.registerTaskType({ name: "resize", paramsSchema: { type: "object", properties: { width: { type: "integer" } }, required: ["width"] } });
    const calls = [pool.enqueue("resize", { width: 1 }), pool.enqueue("resize", { width: 2 }), pool.enqueue("resize", { width: "wide" }), pool.enqueue("resize", { width: 4 })];
    const settled = await Promise.allSettled(calls);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
    const refusal = (settled[2] as PromiseRejectedResult).reason;
    expect(refusal).toBeInstanceOf(ValidationError);
    expect(refusal.message).toBe("Invalid params for resize v1: params.width: must be integer");
    expect(settled.flatMap((s) => (s.status === "fulfilled" ? [s.value.params.width] : []))).toEqual([1, 2, 4]);
    expect((await pool.counts()).byType.resize).toMatchObject({ pending: 3 });
  });

  it("the calls of a refused batch are written in the order they were made: ids, and so FIFO places, follow it", async () => {
    await pool.registerTaskType({ name: "resize", paramsSchema: { type: "object", properties: { width: { type: "integer" } }, required: ["width"] } });
    const widths = Array.from({ length: 30 }, (_, i) => (i === 12 ? "wide" : i));
    const settled = await Promise.allSettled(widths.map((width) => pool.enqueue("resize", { width })));
    const written = settled.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
    expect(written).toHaveLength(29);
    const ids = written.map((t) => t.id);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
  });

  it("concurrent calls with one unique key make one task, as one call after another would", async () => {
    const tasks = await Promise.all(Array.from({ length: 5 }, () => pool.enqueue("report", { day: "2026-11-23" }, { uniqueKey: "report:2026-11-23" })));
    expect(new Set(tasks.map((t) => t.id)).size).toBe(1);
    expect((await pool.counts()).byStatus.pending).toBe(1);
  });

  it("keyed calls share batches where the store can (PostgreSQL), each answered as its key says", async () => {
    const calls = [
      pool.enqueue("mail", { n: 1 }, { idempotencyKey: "a" }),
      pool.enqueue("mail", { n: 1 }, { idempotencyKey: "a" }),
      pool.enqueue("mail", { n: 2 }, { idempotencyKey: "a" }),
      pool.enqueue("mail", { n: 3 }, { idempotencyKey: "b", priority: 2 }),
      pool.enqueue("mail", { n: 4 }),
      pool.enqueue("mail", { n: 5 }),
    ];
    const settled = await Promise.allSettled(calls);
    // One of the three "a" calls wins; the same request is answered its task, the other refused.
    const [a1, a2, a3] = settled.slice(0, 3);
    const winner = [a1, a2, a3].find((s) => s.status === "fulfilled" && s.value.params.n === 1) as PromiseFulfilledResult<{ id: number }>;
    if (a3.status === "fulfilled") {
      expect([a1.status, a2.status]).toEqual(["rejected", "rejected"]);
      expect((a1 as PromiseRejectedResult).reason.code).toBe("idempotency_key_reused");
    } else {
      expect(a3.reason.code).toBe("idempotency_key_reused");
      expect([a1, a2].map((s) => (s as PromiseFulfilledResult<{ id: number }>).value.id)).toEqual([winner.value.id, winner.value.id]);
    }
    expect(settled.slice(3).map((s) => s.status)).toEqual(["fulfilled", "fulfilled", "fulfilled"]);
    expect((settled[3] as PromiseFulfilledResult<{ priority: number }>).value.priority).toBe(2);
    expect((await pool.counts()).byStatus.pending).toBe(4);
    // The first call went alone; the others waited for it and went together, the "a" calls one per batch.
    if (handle.store.enqueueCalls) expect(callBatches.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(4);
    else expect(callBatches).toEqual([]);
  });

  it("many concurrent keyed calls make each task once, and sent again at once are each answered theirs", async () => {
    const send = () => Promise.all(Array.from({ length: 40 }, (_, i) => pool.enqueue("mail", { n: i }, { idempotencyKey: `order-${i}` })));
    const first = await send();
    expect(first.map((t) => t.params)).toEqual(Array.from({ length: 40 }, (_, i) => ({ n: i })));
    const again = await send();
    expect(again.map((t) => t.id)).toEqual(first.map((t) => t.id));
    expect((await pool.counts()).byStatus.pending).toBe(40);
    if (handle.store.enqueueCalls) {
      // All but the first of each round waited for it and went in a few batches.
      expect(callBatches.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(78);
      expect(callBatches.length).toBeLessThan(10);
    }
  });

  it("a bad keyed call among concurrent ones is refused alone, its key left free, and the others are written", async () => {
    await pool.registerTaskType({ name: "resize", paramsSchema: { type: "object", properties: { width: { type: "integer" } }, required: ["width"] } });
    const calls = [1, 2, "wide", 4].map((width, i) => pool.enqueue("resize", { width }, { idempotencyKey: `r-${i}` }));
    const settled = await Promise.allSettled(calls);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
    expect((settled[2] as PromiseRejectedResult).reason.message).toBe("Invalid params for resize v1: params.width: must be integer");
    // The refused call recorded nothing under its key: sent right, it creates its task.
    const fixed = await pool.enqueue("resize", { width: 3 }, { idempotencyKey: "r-2" });
    expect(fixed.params).toEqual({ width: 3 });
    expect((await pool.counts()).byType.resize).toMatchObject({ pending: 4 });
  });
});
