import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/core/errors.js";
import type { Store } from "../../src/store/store.js";
import type { StoreKind } from "../helpers/stores.js";
import { claimOne, useStore } from "./context.js";

const MiB = 1024 * 1024;
/** [1, <hole>, 3]: a list with nothing at index 1, which JSON writes as null. */
const holed = () => Object.assign(new Array<number>(3), { 0: 1, 2: 3 });
const deep = (levels: number): unknown => (levels === 0 ? "bottom" : { down: deep(levels - 1) });

/** Everything a store holds that a rejected call could have changed. */
async function snapshot(store: Store) {
  const { tasks } = await store.list({}, { limit: 1000 });
  return {
    tasks: tasks.map((t) => ({ ...t })),
    events: await Promise.all(tasks.map((t) => store.events(t.id))),
    types: await store.listTaskTypes(),
    workers: (await store.listWorkers()).workers.map((w) => ({ ...w, secondsSinceHeartbeat: 0 })),
  };
}

/**
 * Hostile and odd input, run unchanged on every store: what is refused is refused everywhere with
 * the same ValidationError naming the field, and changes nothing; what is accepted round-trips
 * unchanged everywhere.
 */
export function hostileInputContract(kind: StoreKind) {
  describe("hostile input", () => {
    const ctx = useStore(kind);

    const refusals: [string, (s: Store, lease: { id: number; workerId: string; leaseToken: string }) => Promise<unknown>, RegExp][] = [
      ["a NUL in params", (s) => s.enqueue({ taskType: "a", params: { name: "a\u0000b" } }), /params\.name must not contain a NUL character/],
      ["a NUL in a params key", (s) => s.enqueue({ taskType: "a", params: { "k\u0000": 1 } }), /params\.k. key must not contain a NUL/],
      ["a lone surrogate in params", (s) => s.enqueue({ taskType: "a", params: { name: "\ud800" } }), /params\.name must not contain .*unpaired UTF-16 surrogate/],
      ["a NUL in a concurrency key", (s) => s.enqueue({ taskType: "a", concurrencyKey: "store\u00001" }), /concurrencyKey: must not contain a NUL/],
      ["a lone surrogate in a unique key", (s) => s.enqueue({ taskType: "a", uniqueKey: "\udc00x" }), /uniqueKey: must not contain/],
      ["a date past year 9999", (s) => s.enqueue({ taskType: "a", scheduledFor: new Date(8.64e15) }), /scheduledFor/],
      ["a date before 1970", (s) => s.enqueue({ taskType: "a", scheduledFor: new Date("1969-12-31T23:59:59Z") }), /scheduledFor/],
      ["10 MiB of params", (s) => s.enqueue({ taskType: "a", params: { blob: "x".repeat(10 * MiB) } }), /params is 10\.0 MiB as JSON, over the limit of 1\.0 MiB \(limits\.paramsBytes\)/],
      ["params nested 65 levels deep", (s) => s.enqueue({ taskType: "a", params: deep(65) as never }), /is nested more than 64 levels deep/],
      ["a negative priority past int32", (s) => s.enqueue({ taskType: "a", priority: -(2 ** 31) - 1 }), /priority/],
      ["a non-integer max_attempts", (s) => s.enqueue({ taskType: "a", maxAttempts: 2.5 }), /maxAttempts: Expected integer/],
      ["Infinity as a timeout", (s) => s.enqueue({ taskType: "a", timeoutSeconds: Infinity }), /timeoutSeconds: .*\(got Infinity\)/],
      ["an unknown field", (s) => s.enqueue({ taskType: "a", sheduledFor: new Date() } as never), /sheduledFor/],
      // The cap won at every retry; the base given was never used.
      ["a backoff capped below its base", (s) => s.enqueue({ taskType: "a", backoff: { baseSeconds: 100, maxSeconds: 1 } }), /^Invalid task: backoff\.maxSeconds \(1\) is below baseSeconds \(100\)/],
      ["a task type whose backoff is capped below its base", (s) => s.registerTaskType({ name: "t", backoff: { baseSeconds: 60, maxSeconds: 30 } }), /^Invalid task type: backoff\.maxSeconds \(30\) is below baseSeconds \(60\)/],
      // A name Object.prototype has: looked up among other queues' field names, it was found there and threw a TypeError.
      ["a field named constructor", (s) => s.enqueue(JSON.parse('{"taskType":"a","constructor":1}')), /constructor: Unexpected property \(got 1\); the fields are taskType, /],
      ["a task type of 200 characters", (s) => s.enqueue({ taskType: `a${"b".repeat(199)}` }), /taskType/],
      ["a task type with unicode", (s) => s.enqueue({ taskType: "crawl\u00e9" }), /taskType/],
      ["a batch with one bad item", (s) => s.enqueueMany([{ taskType: "a" }, { taskType: "a", params: { x: "\u0000" } }]), /^item 1: Invalid params: params\.x/],
      ["task id 0", (s) => s.get(0), /task id/],
      ["a negative task id", (s) => s.cancel(-1), /task id/],
      ["a fractional task id", (s) => s.retry(1.5), /task id/],
      ["a task id past 2^53", (s) => s.events(2 ** 60), /task id/],
      ["a task id given as a string", (s) => s.get("1" as never), /task id/],
      ["NaN as a task id", (s, l) => s.complete(NaN, l), /task id/],
      ["a lease token with SQL in it", (s, l) => s.complete(l.id, { workerId: l.workerId, leaseToken: "' OR 1=1 --" }), /leaseToken/],
      ["an empty lease token", (s, l) => s.heartbeat(l.id, { workerId: l.workerId, leaseToken: "" }), /leaseToken/],
      ["a worker id with a space", (s, l) => s.start(l.id, { workerId: "w 1", leaseToken: l.leaseToken }), /workerId/],
      ["progress above 1", (s, l) => s.progress(l.id, l, 1.5), /progress/],
      ["NaN progress in a heartbeat", (s, l) => s.heartbeat(l.id, l, { progress: NaN }), /progress: Expected number \(got NaN\)/],
      ["Infinity as progress", (s, l) => s.progress(l.id, l, Infinity), /progress: Expected number \(got Infinity\)/],
      ["a checkpoint holding a Map", (s, l) => s.checkpoint(l.id, l, new Map() as never), /checkpoint is a Map/],
      ["a 2 MiB checkpoint", (s, l) => s.checkpoint(l.id, l, { blob: "x".repeat(2 * MiB) }), /limits\.checkpointBytes/],
      ["a result holding undefined in an array", (s, l) => s.complete(l.id, l, { result: [1, undefined] as never }), /result\[1\] is undefined, which JSON cannot hold/],
      ["params holding a hole in a list", (s) => s.enqueue({ taskType: "t", params: { a: holed() } } as never), /params\.a\[1\] is a hole in the list/],
      ["a result holding -0's cousin NaN", (s, l) => s.complete(l.id, l, { result: { n: NaN } }), /result\.n is NaN/],
      ["a follow-up with a bad type", (s, l) => s.complete(l.id, l, { followUps: [{ taskType: "" }] }), /^Invalid completion: followUps\.0\.taskType: must be a letter, then letters/],
      ["a failure without a message", (s, l) => s.fail(l.id, l, {} as never), /error/],
      ["a failure message with a NUL", (s, l) => s.fail(l.id, l, { error: "boom\u0000" }), /error: must not contain a NUL/],
      ["a failure message of 1 MiB", (s, l) => s.fail(l.id, l, { error: "x".repeat(MiB) }), /error/],
      ["a release reason that is a number", (s, l) => s.release(l.id, l, { reason: 5 as never }), /reason/],
      ["a cancel reason with a lone surrogate", (s, l) => s.cancel(l.id, { reason: "\ud83d" }), /reason: must not contain/],
      ["a claim limit of 0", (s) => s.claim({ workerId: "w1", limit: 0 }), /limit/],
      ["a claim sorted by an unknown column", (s) => s.claim({ workerId: "w1", sortBy: "id; DROP TABLE tasks" as never }), /sortBy/],
      ["a claim with a negative lease", (s) => s.claim({ workerId: "w1", leaseSeconds: -5 }), /leaseSeconds/],
      ["a list filter on an unknown status", (s) => s.list({ status: "done" as never }), /status/],
      ["a list in an unknown order", (s) => s.list({}, { order: "random" as never }), /order/],
      ["a forged cursor", (s) => s.list({}, { cursor: Buffer.from("id:1 OR 1=1").toString("base64url") }), /Invalid cursor/],
      ["a worker heartbeat with NUL metadata", (s) => s.workerHeartbeat({ workerId: "w2", roles: ["a"], capacity: 1, currentLoad: 0, tasksProcessed: 0, metadata: { host: "\u0000" } }), /metadata\.host must not contain a NUL/],
      ["a worker heartbeat with a negative load", (s) => s.workerHeartbeat({ workerId: "w2", roles: ["a"], capacity: 1, currentLoad: -1, tasksProcessed: 0 }), /currentLoad/],
      ["a task type with a cyclic params schema", (s) => { const schema: Record<string, unknown> = { type: "object" }; schema.self = schema; return s.registerTaskType({ name: "t", paramsSchema: schema as never }); }, /paramsSchema\.self contains a cycle/],
      ["a task type description with a NUL", (s) => s.registerTaskType({ name: "t", description: "\u0000" }), /description: must not contain a NUL/],
      ["a leadership term of NaN seconds", (s) => s.tryLead("coordinator", "c1", NaN), /ttlSeconds/],
      ["a sweep with a negative threshold", (s) => s.sweep({ staleAfterSeconds: -1, deadAfterSeconds: 1, reservationSeconds: 1 }), /staleAfterSeconds/],
    ];

    it.each(refusals)("refuses %s with a ValidationError naming the field, and changes nothing", async (_, call, message) => {
      await ctx.store.enqueue({ taskType: "a", params: { keep: true } });
      const claimed = await claimOne(ctx.store, "w1");
      const lease = { id: claimed.id, workerId: claimed.workerId, leaseToken: claimed.leaseToken };
      await ctx.store.enqueue({ taskType: "b" });
      const before = await snapshot(ctx.store);
      const error = await call(ctx.store, lease).then(
        () => null,
        (e) => e,
      );
      expect(error).toBeInstanceOf(ValidationError);
      expect(error.message).toMatch(message);
      expect(error.issues.length).toBeGreaterThan(0);
      expect(await snapshot(ctx.store)).toEqual(before);
    });

    const accepted: [string, Record<string, unknown>][] = [
      ["emoji and other astral characters", { text: "🦀 crab 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "ключ 🔑": "значение" }],
      ["right-to-left text and combining marks", { text: "مرحبا بالعالم", accent: "e\u0301" }],
      ["control characters other than NUL", { text: "tab\tnewline\nbell\u0007escape\u001b" }],
      ["the largest safe integers and tiny floats", { big: Number.MAX_SAFE_INTEGER, small: -Number.MAX_SAFE_INTEGER, tiny: 5e-324, neg: -0.5 }],
      ["JSON nested 64 levels", deep(63) as Record<string, unknown>],
      ["keys that look like SQL or paths", { "'; DROP TABLE tasks; --": 1, "$.a[0]": 2, __proto__x: 3 }],
      ["an object property left undefined, dropped as JSON.stringify does", { kept: 1, dropped: undefined }],
      ["a string of 1,000,000 bytes, just under the limit", { blob: "x".repeat(MiB - 20) }],
    ];

    it.each(accepted)("stores %s and gives it back unchanged", async (_, params) => {
      const expected = JSON.parse(JSON.stringify(params));
      const { task } = await ctx.store.enqueue({ taskType: "a", params: params as never, concurrencyKey: "ключ-🔑", uniqueKey: "uniq\u2028line" });
      expect(task.params).toEqual(expected);
      expect(task).toMatchObject({ concurrencyKey: "ключ-🔑", uniqueKey: "uniq\u2028line" });
      expect((await ctx.store.get(task.id))?.params).toEqual(expected);
      const claimed = await claimOne(ctx.store);
      await ctx.store.checkpoint(claimed.id, claimed, params as never);
      const done = await ctx.store.complete(claimed.id, claimed, { result: params as never });
      expect(done.task.result).toEqual(expected);
      expect((await ctx.store.get(task.id))?.checkpoint).toEqual(expected);
    });

    it("accepts the boundaries of every range: dates in 1970 and 9999, int32 priorities, the longest names", async () => {
      const inputs = [
        { taskType: `a${"b".repeat(127)}`, priority: 2 ** 31 - 1, scheduledFor: new Date("9999-12-31T23:59:59.999Z") },
        { taskType: "a", priority: -(2 ** 31), scheduledFor: new Date(0) },
      ];
      const results = await ctx.store.enqueueMany(inputs);
      expect(results.map((r) => [r.task.taskType.length, r.task.priority, r.task.scheduledFor.toISOString()])).toEqual([
        [128, 2147483647, "9999-12-31T23:59:59.999Z"],
        [1, -2147483648, "1970-01-01T00:00:00.000Z"],
      ]);
    });
  });
}
