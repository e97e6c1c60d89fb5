import { describe, expect, it } from "vitest";
import { TaskTypeAtCapacityError, ValidationError } from "../../src/core/errors.js";
import type { Json, JsonObject } from "../../src/core/task.js";
import type { TaskTypeDefinition } from "../../src/core/task-type.js";
import type { WorkerBeat } from "../../src/core/worker.js";
import type { StoreKind } from "../helpers/stores.js";
import { claimOne, useStore } from "./context.js";

const SWEEP = { staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 };

const RESYNC: TaskTypeDefinition = {
  name: "product_resync",
  description: "Refresh a store's prices and stock",
  paramsSchema: {
    type: "object",
    properties: { storeId: { type: "integer" }, full: { type: "boolean" } },
    required: ["storeId"],
    additionalProperties: false,
  },
};

export function taskTypesContract(kind: StoreKind) {
  describe("task types", () => {
    const ctx = useStore(kind);
    const beat = (workerId: string, extra: Partial<WorkerBeat> = {}) =>
      ctx.store.workerHeartbeat({ workerId, roles: ["fragile", "crawl"], capacity: 10, currentLoad: 0, tasksProcessed: 0, ...extra });
    const pendingCount = async () => (await ctx.store.counts()).byStatus.pending;

    describe("registry", () => {
      it("registers version 1 with every default resolved", async () => {
        const { taskType, created } = await ctx.store.registerTaskType(RESYNC);
        expect(created).toBe(true);
        expect(taskType).toEqual({
          ...RESYNC,
          version: 1,
          priority: 0,
          maxAttempts: 3,
          backoff: { baseSeconds: 5, factor: 2, maxSeconds: 3600, jitter: 0.2 },
          timeoutSeconds: null,
          recoveryPolicy: "retry",
          maxRunning: null,
          createdAt: ctx.clock.now(),
        });
        expect(await ctx.store.getTaskType("product_resync")).toEqual(taskType);
      });

      it("returns the latest version for an identical definition and adds one for a changed definition", async () => {
        const v1 = (await ctx.store.registerTaskType(RESYNC)).taskType;
        // Same meaning, keys in another order, a default spelled out: nothing changes.
        const schema = RESYNC.paramsSchema as JsonObject;
        const reordered = { paramsSchema: { additionalProperties: false, required: ["storeId"], properties: schema.properties, type: "object" }, maxAttempts: 3, name: RESYNC.name, description: RESYNC.description };
        expect(await ctx.store.registerTaskType(reordered)).toEqual({ taskType: v1, created: false });

        ctx.clock.advance(1000);
        const v2 = await ctx.store.registerTaskType({ ...RESYNC, priority: 5 });
        expect(v2).toMatchObject({ created: true, taskType: { version: 2, priority: 5, createdAt: ctx.clock.now() } });
        expect(await ctx.store.registerTaskType({ ...RESYNC, priority: 5 })).toMatchObject({ created: false, taskType: { version: 2 } });
        // Going back to v1's definition is a change from the latest: it becomes v3.
        expect(await ctx.store.registerTaskType(RESYNC)).toMatchObject({ created: true, taskType: { version: 3, priority: 0 } });

        expect((await ctx.store.taskTypeVersions("product_resync")).map((t) => [t.version, t.priority])).toEqual([[1, 0], [2, 5], [3, 0]]);
        expect((await ctx.store.getTaskType("product_resync"))?.version).toBe(3);
      });

      it("lists the latest version of each type, and nothing for unknown types", async () => {
        await ctx.store.registerTaskType({ name: "zeta" });
        await ctx.store.registerTaskType(RESYNC);
        await ctx.store.registerTaskType({ ...RESYNC, maxRunning: 4 });
        expect((await ctx.store.listTaskTypes()).map((t) => [t.name, t.version])).toEqual([["product_resync", 2], ["zeta", 1]]);
        expect(await ctx.store.getTaskType("nope")).toBeNull();
        expect(await ctx.store.taskTypeVersions("nope")).toEqual([]);
        await expect(ctx.store.getTaskType("bad name")).rejects.toBeInstanceOf(ValidationError);
      });

      const bad: [string, unknown, RegExp][] = [
        ["a bad name", { name: "bad name" }, /name/],
        ["a zero cap", { name: "t", maxRunning: 0 }, /maxRunning/],
        ["an unknown recovery policy", { name: "t", recoveryPolicy: "maybe" }, /recoveryPolicy/],
        ["an unknown field", { name: "t", maxRuning: 3 }, /maxRuning|additional/i],
        ["a schema with a bad type", { name: "t", paramsSchema: { type: "intger" } }, /Invalid params schema for t: schema is invalid: data\/type/],
        ["a schema with a misspelt keyword", { name: "t", paramsSchema: { type: "object", requird: ["a"] } }, /unknown keyword: "requird"/],
        ["a schema with an unknown format", { name: "t", paramsSchema: { type: "object", properties: { c: { type: "string", format: "colour" } } } }, /unknown format "colour"/],
        // Params are always an object: every task of such a type would be refused.
        ["a schema of another type than object", { name: "t", paramsSchema: { type: "array" } }, /Invalid params schema for t: its type is "array", and params are always a JSON object/],
        ["a schema of types none of them object", { name: "t", paramsSchema: { type: ["string", "null"] } }, /its type is \["string","null"\]/],
        ["a schema that is not an object", { name: "t", paramsSchema: [1] }, /paramsSchema/],
        // Checks that would hold the server for seconds on params within the size limit.
        // Patterns run on RE2 (linear time), which has no lookaround or backreferences.
        ["a schema with a lookahead", { name: "t", paramsSchema: { type: "object", properties: { a: { type: "string", pattern: "^(?=.*\\d).+$" } } } }, /Invalid params schema for t: the pattern "\^\(\?=\.\*\\\\d\)\.\+\$" is not one this server runs \(.*\): patterns are matched by RE2/],
        ["a schema with a backreference as a pattern property", { name: "t", paramsSchema: { type: "object", patternProperties: { "^(a)\\1$": { type: "string" } } } }, /is not one this server runs .*lacks some of JavaScript.s syntax: lookahead, lookbehind, backreferences/],
        ["a schema with a pattern that does not parse", { name: "t", paramsSchema: { type: "object", properties: { a: { type: "string", pattern: "([" } } } }, /the pattern "\(\[" is no regular expression: Invalid regular expression/],
        ["a schema with uniqueItems over items of no scalar type", { name: "t", paramsSchema: { type: "object", properties: { a: { type: "array", uniqueItems: true } } } }, /uniqueItems needs items of one scalar type/],
        // It compiled, then every enqueue of the type overflowed the stack (a 500 over HTTP).
        ["a schema that refers to itself before checking anything", { name: "t", paramsSchema: { $ref: "#" } }, /Invalid params schema for t: it refers to itself before checking anything/],
        // Recursive only for a value that is neither a string nor an object: such params never ended.
        ["a schema that refers to itself under a property", { name: "t", paramsSchema: { type: "object", properties: { v: { anyOf: [{ type: "string" }, { type: "object" }, { $ref: "#/properties/v" }] } } } }, /it refers to itself before checking anything \(a \$ref that reaches itself through no property or item\)/],
        // Checks whose work doubles at each level of the params: 40 levels held the server for minutes.
        ["a schema whose recursion goes two ways to one part", { name: "t", paramsSchema: { type: "object", definitions: { n: { anyOf: [{ type: "array", items: { $ref: "#/definitions/n" } }, { type: "array", items: { $ref: "#/definitions/n" } }] } }, properties: { a: { $ref: "#/definitions/n" } } } }, /a check may apply more than 100 of its parts to one value/],
        ["a schema of an anyOf of 1,000 branches", { name: "t", paramsSchema: { type: "object", properties: { a: { type: "array", items: { anyOf: Array.from({ length: 1000 }, (_, i) => ({ const: i })) } } } } }, /more than 100 of its parts to one value .*use enum for a list of constants/],
        ["a schema with a $ref the cost check cannot follow", { name: "t", paramsSchema: { type: "object", properties: { a: { $ref: "other.json#/x" } } } }, /its \$ref "other.json#\/x" is not a local JSON pointer/],
      ];
      it.each(bad)("refuses %s with a ValidationError and registers nothing", async (_, definition, message) => {
        const error = await ctx.store.registerTaskType(definition as TaskTypeDefinition).catch((e) => e);
        expect(error).toBeInstanceOf(ValidationError);
        expect(error.message).toMatch(message);
        expect(await ctx.store.listTaskTypes()).toEqual([]);
      });
    });

    describe("params validation", () => {
      it("matches patterns in time linear in the params, those that backtrack for ever in JavaScript included", async () => {
        // JavaScript's engine: 30 s on 32 characters for the first (each one more doubles it); the second grows with the square of the text.
        const paramsSchema = { type: "object", properties: { sku: { type: "string", pattern: "^(\\w|\\d)+$" }, note: { type: "string", pattern: "\\s+$" } }, patternProperties: { "^(x+)+$": { type: "integer" } } };
        await ctx.store.registerTaskType({ name: "redos", paramsSchema });
        const started = performance.now();
        await expect(ctx.store.enqueue({ taskType: "redos", params: { sku: `${"1".repeat(40)}!` } })).rejects.toThrow(/params\.sku: must match pattern/);
        await expect(ctx.store.enqueue({ taskType: "redos", params: { note: `${" ".repeat(200_000)}x` } })).rejects.toThrow(/params\.note: must match pattern/);
        await expect(ctx.store.enqueue({ taskType: "redos", params: { xxxx: "a" } })).rejects.toThrow(/params\.xxxx: must be integer/);
        expect(performance.now() - started).toBeLessThan(5000);
        expect(await ctx.store.enqueue({ taskType: "redos", params: { sku: "a1", note: "done ", xx: 1 } })).toMatchObject({ created: true });
        // JavaScript's \u escapes are read as RE2 spells them; an escaped backslash before a u stays a backslash.
        await ctx.store.registerTaskType({ name: "cyrillic", paramsSchema: { type: "object", properties: { city: { type: "string", pattern: "^[\\u0400-\\u04FF]+$" }, raw: { type: "string", pattern: "^\\\\u0041$" } } } });
        expect(await ctx.store.enqueue({ taskType: "cyrillic", params: { city: "Москва", raw: "\\u0041" } })).toMatchObject({ created: true });
        await expect(ctx.store.enqueue({ taskType: "cyrillic", params: { city: "Moscow" } })).rejects.toThrow(/params\.city: must match pattern/);
        await expect(ctx.store.enqueue({ taskType: "cyrillic", params: { raw: "A" } })).rejects.toThrow(/params\.raw: must match pattern/);
      });

      it("takes patterns without nested repetition and uniqueItems over scalar items", async () => {
        const paramsSchema = { type: "object", properties: { sku: { type: "string", pattern: "^[A-Z]{3}-\\d+$" }, tags: { type: "array", items: { type: "string" }, uniqueItems: true } } };
        await ctx.store.registerTaskType({ name: "tagged", paramsSchema });
        expect(await ctx.store.enqueue({ taskType: "tagged", params: { sku: "ABC-12", tags: ["a", "b"] } })).toMatchObject({ created: true });
        await expect(ctx.store.enqueue({ taskType: "tagged", params: { sku: "ABC-12", tags: ["a", "a"] } })).rejects.toThrow(/params\.tags: must NOT have duplicate items/);
      });

      it("takes recursive schemas whose check stays linear in the params: trees, and any JSON value", async () => {
        const node = { type: "object", properties: { name: { type: "string" }, children: { type: "array", items: { $ref: "#/definitions/node" } }, next: { $ref: "#/definitions/node" } } };
        const value: JsonObject = { anyOf: [{ type: "string" }, { type: "number" }, { type: "array", items: { $ref: "#/definitions/value" } }, { type: "object", additionalProperties: { $ref: "#/definitions/value" } }] };
        await ctx.store.registerTaskType({ name: "tree", paramsSchema: { type: "object", definitions: { node, value }, properties: { root: { $ref: "#/definitions/node" }, data: { $ref: "#/definitions/value" } } } });
        const deep = (depth: number): Json => (depth === 0 ? 1 : [deep(depth - 1)]);
        expect(await ctx.store.enqueue({ taskType: "tree", params: { root: { name: "a", children: [{ name: "b", next: { name: "c" } }] }, data: deep(60) } })).toMatchObject({ created: true });
        await expect(ctx.store.enqueue({ taskType: "tree", params: { root: { name: "a", children: [{ name: 1 }] } } })).rejects.toThrow(/params\.root\.children\.0\.name: must be string/);
      });

      it("accepts good params and records the version the task was created under", async () => {
        await ctx.store.registerTaskType(RESYNC);
        const { task } = await ctx.store.enqueue({ taskType: "product_resync", params: { storeId: 42, full: true } });
        expect(task).toMatchObject({ params: { storeId: 42, full: true }, taskTypeVersion: 1 });
        expect((await ctx.store.get(task.id))?.taskTypeVersion).toBe(1);
      });

      it("refuses bad params with an error naming the failing field, writing nothing", async () => {
        await ctx.store.registerTaskType(RESYNC);
        const error = await ctx.store.enqueue({ taskType: "product_resync", params: { storeId: "42" } }).catch((e) => e);
        expect(error).toBeInstanceOf(ValidationError);
        expect(error.code).toBe("validation_error");
        expect(error.message).toBe("Invalid params for product_resync v1: params.storeId: must be integer");
        expect(error.issues).toEqual([{ path: "params.storeId", message: "must be integer" }]);

        // The first fault only: a check that goes on collecting every fault can be made to take the server's memory.
        const several = await ctx.store.enqueue({ taskType: "product_resync", params: { full: "yes", extra: 1 } }).catch((e) => e);
        expect(several.message).toBe("Invalid params for product_resync v1: params.storeId: is required");
        expect(await pendingCount()).toBe(0);
        expect(await ctx.store.events(1)).toEqual([]);
      });

      it("validates against the latest version, including one registered by another process", async () => {
        await ctx.store.registerTaskType(RESYNC);
        const other = await ctx.another();
        await other.registerTaskType({ ...RESYNC, paramsSchema: { type: "object", properties: { storeId: { type: "string" } } } });
        const error = await ctx.store.enqueue({ taskType: "product_resync", params: { storeId: 42 } }).catch((e) => e);
        expect(error.message).toBe("Invalid params for product_resync v2: params.storeId: must be string");
        expect((await ctx.store.enqueue({ taskType: "product_resync", params: { storeId: "42" } })).task.taskTypeVersion).toBe(2);
      });

      it("applies a version another process registered after this one last enqueued the type", async () => {
        await ctx.store.registerTaskType(RESYNC);
        expect((await ctx.store.enqueue({ taskType: "product_resync", params: { storeId: 1 } })).task.taskTypeVersion).toBe(1);
        expect((await ctx.store.enqueue({ taskType: "adhoc" })).task.taskTypeVersion).toBeNull();
        const other = await ctx.another();
        await other.registerTaskType({ ...RESYNC, paramsSchema: { type: "object", properties: { storeId: { type: "string" } } } });
        await other.registerTaskType({ name: "adhoc", priority: 7 });
        const error = await ctx.store.enqueue({ taskType: "product_resync", params: { storeId: 2 } }).catch((e) => e);
        expect(error.message).toBe("Invalid params for product_resync v2: params.storeId: must be string");
        const [resync, adhoc] = await ctx.store.enqueueMany([{ taskType: "product_resync", params: { storeId: "3" } }, { taskType: "adhoc" }]);
        expect(resync.task.taskTypeVersion).toBe(2);
        expect(adhoc.task).toMatchObject({ taskTypeVersion: 1, priority: 7 });
        expect(await pendingCount()).toBe(4);
      });

      it("refuses a whole batch when one item's params are bad, naming the item", async () => {
        await ctx.store.registerTaskType(RESYNC);
        const error = await ctx.store
          .enqueueMany([{ taskType: "product_resync", params: { storeId: 1 } }, { taskType: "other" }, { taskType: "product_resync", params: {} }])
          .catch((e) => e);
        expect(error).toBeInstanceOf(ValidationError);
        expect(error.message).toBe("item 2: Invalid params for product_resync v1: params.storeId: is required");
        expect(error.issues).toEqual([{ path: "2.params.storeId", message: "is required" }]);
        expect(await pendingCount()).toBe(0);
      });

      it("checks follow-ups too: bad params refuse the completion and create nothing", async () => {
        await ctx.store.registerTaskType(RESYNC);
        await ctx.store.enqueue({ taskType: "discover" });
        const lease = await claimOne(ctx.store);
        const error = await ctx.store.complete(lease.id, lease, { followUps: [{ taskType: "product_resync", params: { storeId: 1.5 } }] }).catch((e) => e);
        expect(error.message).toBe("item 0: Invalid params for product_resync v1: params.storeId: must be integer");
        expect(error.issues).toEqual([{ path: "followUps.0.params.storeId", message: "must be integer" }]);
        expect((await ctx.store.get(lease.id))?.status).toBe("claimed");
        const { followUps } = await ctx.store.complete(lease.id, lease, { followUps: [{ taskType: "product_resync", params: { storeId: 1 } }] });
        expect(followUps).toMatchObject([{ taskType: "product_resync", taskTypeVersion: 1, parentId: lease.id }]);
      });

      it("leaves unregistered types to the built-in rules", async () => {
        await ctx.store.registerTaskType(RESYNC);
        const { task } = await ctx.store.enqueue({ taskType: "adhoc", params: { anything: ["goes"] } });
        expect(task).toMatchObject({ taskTypeVersion: null, priority: 0, maxAttempts: 3, timeoutSeconds: null });
      });
    });

    describe("defaults and policy", () => {
      const CRAWL: TaskTypeDefinition = { name: "crawl", priority: 7, maxAttempts: 5, backoff: { baseSeconds: 10 }, timeoutSeconds: 60 };

      it("fills what the producer leaves out from the registry; what it gives wins", async () => {
        await ctx.store.registerTaskType(CRAWL);
        const [defaulted, explicit] = await ctx.store.enqueueMany([
          { taskType: "crawl" },
          { taskType: "crawl", priority: 1, maxAttempts: 2, backoff: { factor: 3 }, timeoutSeconds: 5 },
        ]);
        expect(defaulted.task).toMatchObject({
          priority: 7, maxAttempts: 5, timeoutSeconds: 60, taskTypeVersion: 1,
          backoff: { baseSeconds: 10, factor: 2, maxSeconds: 3600, jitter: 0.2 },
        });
        expect(explicit.task).toMatchObject({
          priority: 1, maxAttempts: 2, timeoutSeconds: 5, taskTypeVersion: 1,
          backoff: { baseSeconds: 10, factor: 3, maxSeconds: 3600, jitter: 0.2 },
        });
      });

      it("keeps a task on the version it was created under when a new one is registered", async () => {
        await ctx.store.registerTaskType(CRAWL);
        const { task: old } = await ctx.store.enqueue({ taskType: "crawl" });
        await ctx.store.registerTaskType({ ...CRAWL, priority: 9 });
        const { task: fresh } = await ctx.store.enqueue({ taskType: "crawl" });
        expect([old.taskTypeVersion, old.priority, fresh.taskTypeVersion, fresh.priority]).toEqual([1, 7, 2, 9]);
        expect(await ctx.store.get(old.id)).toMatchObject({ taskTypeVersion: 1, priority: 7 });
      });

      it("retries and fails by the registry's max_attempts and backoff", async () => {
        await ctx.store.registerTaskType({ name: "flaky", maxAttempts: 2, backoff: { baseSeconds: 10, factor: 3, maxSeconds: 100, jitter: 0 } });
        await ctx.store.enqueue({ taskType: "flaky" });
        const first = await claimOne(ctx.store);
        const retried = await ctx.store.fail(first.id, first, { error: "timeout" });
        expect(retried).toMatchObject({ status: "pending", attempts: 1, scheduledFor: new Date(ctx.clock.now().getTime() + 10_000) });
        ctx.clock.advance(10_000);
        const second = await claimOne(ctx.store);
        expect(await ctx.store.fail(second.id, second, { error: "timeout again" })).toMatchObject({ status: "failed", attempts: 2 });
      });

      it("recovers a dead worker's tasks by each one's registered policy; the sweep's option wins", async () => {
        await ctx.store.enqueue({ taskType: "fragile" }); // created before registration: retry
        await ctx.store.registerTaskType({ name: "fragile", recoveryPolicy: "retry" });
        await ctx.store.enqueue({ taskType: "fragile" }); // v1: retry
        await ctx.store.registerTaskType({ name: "fragile", recoveryPolicy: "fail" });
        await ctx.store.enqueue({ taskType: "fragile" }); // v2: fail
        await ctx.store.enqueue({ taskType: "crawl" }); // unregistered: retry
        await beat("w-dead");
        const [unregistered, v1, v2, crawl] = await ctx.store.claim({ workerId: "w-dead", limit: 4, sortBy: "created_at" });
        expect([unregistered, v1, v2].map((t) => t.taskTypeVersion)).toEqual([null, 1, 2]);
        ctx.clock.advance(121_000);
        const result = await ctx.store.sweep(SWEEP);
        expect(result.failed).toEqual([v2.id]);
        expect(result.requeued.sort((a, b) => a - b)).toEqual([unregistered.id, v1.id, crawl.id]);
        expect(await ctx.store.get(v2.id)).toMatchObject({ status: "failed", errorMessage: "Worker died unexpectedly" });

        await beat("w-dead-too");
        await ctx.store.enqueue({ taskType: "fragile" });
        const [lease] = await ctx.store.claim({ workerId: "w-dead-too", taskTypes: ["fragile"], sortBy: "created_at", sortOrder: "desc" });
        expect(lease.taskTypeVersion).toBe(2);
        ctx.clock.advance(121_000);
        const overridden = await ctx.store.sweep({ ...SWEEP, recoveryPolicies: { fragile: "retry" } });
        expect(overridden.requeued).toContain(lease.id);
        expect(overridden.failed).toEqual([]);
      });
    });

    describe("max_running cap", () => {
      const enqueueCapped = async (n: number, extra: Record<string, unknown> = {}) =>
        (await ctx.store.enqueueMany(Array.from({ length: n }, () => ({ taskType: "capped", priority: 5, ...extra })))).map((r) => r.task);

      it("never has more than max_running tasks of the type claimed or running, whatever the batch", async () => {
        await ctx.store.registerTaskType({ name: "capped", maxRunning: 2 });
        await enqueueCapped(5);
        await ctx.store.enqueueMany([{ taskType: "free" }, { taskType: "free" }]);
        const batch = await ctx.store.claim({ workerId: "w1", limit: 10 });
        expect(batch.map((t) => t.taskType)).toEqual(["capped", "capped", "free", "free"]);
        expect(await ctx.store.claim({ workerId: "w2", limit: 10 })).toEqual([]);
        expect(await ctx.store.claim({ workerId: "w2", taskTypes: ["capped"] })).toEqual([]);

        const [a, b] = batch;
        await ctx.store.start(a.id, a);
        await ctx.store.complete(a.id, a);
        expect((await ctx.store.claim({ workerId: "w2", limit: 10 })).map((t) => t.taskType)).toEqual(["capped"]);
        // Every way out of claimed/running frees a place: release, fail, cancel.
        await ctx.store.release(b.id, b);
        expect(await ctx.store.claim({ workerId: "w3", limit: 10 })).toHaveLength(1);
      });

      it("frees a place on failure, cancel and recovery", async () => {
        await ctx.store.registerTaskType({ name: "capped", maxRunning: 1 });
        await enqueueCapped(4, { maxAttempts: 1 });
        const claimAll = () => ctx.store.claim({ workerId: "w1", limit: 10 });
        const [first] = await claimAll();
        expect(await claimAll()).toEqual([]);
        await ctx.store.fail(first.id, first, { error: "boom" });
        const [second] = await claimAll();
        await ctx.store.cancel(second.id);
        const [third] = await claimAll();
        expect(third).toBeDefined();
        ctx.clock.advance(121_000); // its lease expires
        expect((await ctx.store.sweep(SWEEP)).failed).toEqual([third.id]);
        expect(await claimAll()).toHaveLength(1);
      });

      it("does not let a full capped type block other work, even at a higher priority", async () => {
        await ctx.store.registerTaskType({ name: "capped", maxRunning: 1 });
        await enqueueCapped(3);
        const { task: low } = await ctx.store.enqueue({ taskType: "free", priority: 0 });
        expect((await claimOne(ctx.store, "w1")).taskType).toBe("capped");
        expect((await claimOne(ctx.store, "w2")).id).toBe(low.id);
        expect(await ctx.store.claim({ workerId: "w3" })).toEqual([]);
      });

      it("a capped task past its type's room takes no concurrency key: a task of another type under that key is claimed", async () => {
        await ctx.store.registerTaskType({ name: "capped", maxRunning: 1 });
        const { task: first } = await ctx.store.enqueue({ taskType: "capped", priority: 9, concurrencyKey: "store:1" });
        await ctx.store.enqueue({ taskType: "capped", priority: 8, concurrencyKey: "store:2" });
        const { task: free } = await ctx.store.enqueue({ taskType: "free", priority: 1, concurrencyKey: "store:2" });
        // The second capped task is past the cap's room of 1; it held store:2, and the free task was left out.
        expect((await ctx.store.claim({ workerId: "w1", limit: 3 })).map((t) => t.id)).toEqual([first.id, free.id]);
      });

      it("capped tasks of one key fill the type's room with tasks of other keys", async () => {
        await ctx.store.registerTaskType({ name: "capped", maxRunning: 2 });
        const [a] = await enqueueCapped(2, { concurrencyKey: "store:1" });
        const [c] = await enqueueCapped(1, { concurrencyKey: "store:2" });
        expect((await ctx.store.claim({ workerId: "w1", limit: 3 })).map((t) => t.id)).toEqual([a.id, c.id]);
      });

      it("keeps the claim order across capped and uncapped types", async () => {
        await ctx.store.registerTaskType({ name: "capped", maxRunning: 2 });
        const { task: top } = await ctx.store.enqueue({ taskType: "free", priority: 9 });
        await enqueueCapped(3);
        const { task: bottom } = await ctx.store.enqueue({ taskType: "free", priority: 1 });
        const batch = await ctx.store.claim({ workerId: "w1", limit: 5 });
        expect(batch.map((t) => [t.taskType, t.priority])).toEqual([["free", 9], ["capped", 5], ["capped", 5], ["free", 1]]);
        expect([batch[0].id, batch[3].id]).toEqual([top.id, bottom.id]);
      });

      it("gives a reserved task to its worker within the cap", async () => {
        await ctx.store.registerTaskType({ name: "capped", maxRunning: 1 });
        const [, reserved] = await enqueueCapped(2);
        await ctx.store.reserve(reserved.id, "w2", 60);
        const held = await claimOne(ctx.store, "w1");
        expect(await ctx.store.claim({ workerId: "w2" })).toEqual([]);
        await ctx.store.complete(held.id, held);
        expect((await claimOne(ctx.store, "w2")).id).toBe(reserved.id);
      });

      it("refuses a claim by id at the cap", async () => {
        await ctx.store.registerTaskType({ name: "capped", maxRunning: 1 });
        const [first, second] = await enqueueCapped(2);
        await ctx.store.claimById(first.id, { workerId: "w1" });
        const error = await ctx.store.claimById(second.id, { workerId: "w2" }).catch((e) => e);
        expect(error).toBeInstanceOf(TaskTypeAtCapacityError);
        expect(error.code).toBe("type_at_capacity");
        expect(error.message).toBe(`Task ${second.id} cannot be claimed: task type "capped" already has its max_running tasks claimed or running`);
        expect((await ctx.store.get(second.id))?.status).toBe("pending");
      });

      it("follows the latest version: a new version can lift or change the cap", async () => {
        await ctx.store.registerTaskType({ name: "capped", maxRunning: 1 });
        await enqueueCapped(4);
        expect(await ctx.store.claim({ workerId: "w1", limit: 4 })).toHaveLength(1);
        await ctx.store.registerTaskType({ name: "capped", maxRunning: 2 });
        expect(await ctx.store.claim({ workerId: "w1", limit: 4 })).toHaveLength(1);
        await ctx.store.registerTaskType({ name: "capped" });
        expect(await ctx.store.claim({ workerId: "w1", limit: 4 })).toHaveLength(2);
      });
    });
  });
}
