import { Validator } from "@seriousme/openapi-schema-validator";
import { Kind, type Static, type TSchema, Type } from "@sinclair/typebox";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import { connect, type Taskpool } from "../../src/api/taskpool.js";
import type { TaskEvent } from "../../src/core/event.js";
import type { CapacityRow, ReassignmentStats, Throughput } from "../../src/core/monitoring.js";
import {
  CapacityRecord,
  ReassignmentRecord,
  ReassignmentStatsRecord,
  SweepResultRecord,
  ScheduleRecordSchema,
  GenerateResultRecord,
  TaskCountsRecord,
  TaskEventRecord,
  TaskRecord,
  TaskTypeRecordSchema,
  ThroughputRecord,
  WorkerListRecord,
  WorkerRecordSchema,
} from "../../src/core/record-schemas.js";
import * as schemas from "../../src/core/schemas.js";
import type { GenerateResult, ScheduleRecord } from "../../src/core/schedule.js";
import type { Task, TaskCounts } from "../../src/core/task.js";
import type { TaskTypeRecord } from "../../src/core/task-type.js";
import { fromWire, libraryPath, toCamel, toSnake, toWire, wirePath, wireSchema } from "../../src/core/wire.js";
import type { ReassignmentEvent, SweepResult, WorkerList, WorkerRecord } from "../../src/core/worker.js";
import { ValidationError } from "../../src/core/errors.js";
import { errorFromReply } from "../../src/client/errors.js";
import { errorReply } from "../../src/server/errors.js";
import { buildServer, ROUTES } from "../../src/server/server.js";
import { ClaimNext, ClaimWait } from "../../src/server/routes/task-leases.js";
import { BatchOptionsSchema, WaitForWork } from "../../src/server/routes/worker-transport.js";
import type { Body } from "./harness.js";

describe("the wire mapping", () => {
  it("names: camelCase ⇄ snake_case, digits as words of their own", () => {
    const pairs = [
      ["workerId", "worker_id"],
      ["leaseToken", "lease_token"],
      ["id", "id"],
      ["for1Hour", "for_1_hour"],
      ["last24Hours", "last_24_hours"],
      ["tasksPerWorkerHour", "tasks_per_worker_hour"],
    ];
    for (const [camel, snake] of pairs) {
      expect(toSnake(camel)).toBe(snake);
      expect(toCamel(snake)).toBe(camel);
    }
    expect(wirePath("followUps.3.taskType")).toBe("follow_ups.3.task_type");
    expect(wirePath("params.storeId.innerKey")).toBe("params.storeId.innerKey");
    expect(wirePath("paramsSchema.maxLength")).toBe("params_schema.maxLength");
    // Back from the wire, the user's JSON keeps its keys: a params field named store_id is not storeId.
    expect(libraryPath("follow_ups.3.task_type")).toBe("followUps.3.taskType");
    expect(libraryPath("params.store_id.inner_key")).toBe("params.store_id.inner_key");
    expect(libraryPath("params_schema.max_length")).toBe("paramsSchema.max_length");
    // An error's message names the field as its issues do, a list's item by its whole path or by the item's own.
    const reply = (message: string, path: string) => errorReply(new ValidationError(message, [{ path, message: "Expected string" }])).body as { message: string };
    expect(reply("Invalid schedule: fanOut.0.taskType: Expected string", "fanOut.0.taskType").message).toBe("Invalid schedule: fan_out.0.task_type: Expected string");
    expect(reply("item 1: Invalid task: taskType: Expected string", "1.taskType").message).toBe("item 1: Invalid task: task_type: Expected string");
    // And back in the client, the library's names again, a field named by a part of its path too; the
    // user's JSON keys, a value (quoted) and a type's name stay as they are, whatever their casing.
    const refusal = new ValidationError('fanOut.keys.1 ("max_attempts"): Invalid params for product_resync v1: params.store_id: is required; fanOut: maxAttempts: too many', [
      { path: "fanOut.keys.1.params.store_id", message: "is required" },
      { path: "fanOut.maxAttempts", message: "too many" },
    ]);
    const { status, body } = errorReply(refusal);
    expect((body as { message: string }).message).toBe('fan_out.keys.1 ("max_attempts"): Invalid params for product_resync v1: params.store_id: is required; fan_out: max_attempts: too many');
    const back = errorFromReply(status, body as Record<string, unknown>) as ValidationError;
    expect([back.message, back.issues]).toEqual([refusal.message, refusal.issues]);
  });

  it("every property name of every library schema survives the round trip (a name that cannot is caught here)", () => {
    const names = new Set<string>();
    const walk = (s: TSchema) => {
      const x = s as Record<string, unknown>;
      for (const [k, v] of Object.entries((x.properties ?? {}) as Record<string, TSchema>)) {
        names.add(k);
        walk(v);
      }
      for (const key of ["items", "additionalProperties"]) if (typeof x[key] === "object") walk(x[key] as TSchema);
      for (const key of ["anyOf", "allOf"]) if (Array.isArray(x[key])) (x[key] as TSchema[]).forEach(walk);
    };
    const all = [...Object.values(schemas), TaskRecord, TaskEventRecord, TaskCountsRecord, CapacityRecord, WorkerRecordSchema, WorkerListRecord, ReassignmentRecord, ReassignmentStatsRecord, TaskTypeRecordSchema, SweepResultRecord, ThroughputRecord, ScheduleRecordSchema, GenerateResultRecord];
    for (const s of all) if (typeof s === "object" && s !== null && Kind in s) walk(s as TSchema);
    expect(names.size).toBeGreaterThan(80);
    for (const name of names) expect(toCamel(toSnake(name)), name).toBe(name);
  });

  it("schemas and values: keys renamed where the schema declares them, Dates as ISO strings, the user's JSON untouched", () => {
    const wire = wireSchema(schemas.CompleteOptionsSchema) as unknown as { properties: Body };
    expect(Object.keys(wire.properties)).toEqual(["result", "follow_ups"]);
    expect(Object.keys(wire.properties.follow_ups.items.properties)).toContain("scheduled_for");
    expect(wire.properties.follow_ups.items.properties.scheduled_for).toMatchObject({ type: "string", format: "date-time" });
    expect(wire.properties.follow_ups.items.required).toEqual(["task_type"]);

    const input = { result: { someKey: 1 }, follow_ups: [{ task_type: "a", params: { storeId: 1, nested_key: { deepKey: 2 } }, scheduled_for: "2030-01-02T03:04:05.000Z", backoff: { base_seconds: 2 } }] };
    const value = fromWire<schemas.CompleteOptions>(schemas.CompleteOptionsSchema, input);
    expect(value).toEqual({ result: { someKey: 1 }, followUps: [{ taskType: "a", params: { storeId: 1, nested_key: { deepKey: 2 } }, scheduledFor: new Date("2030-01-02T03:04:05.000Z"), backoff: { baseSeconds: 2 } }] });
    expect(toWire(schemas.CompleteOptionsSchema, value)).toEqual(input);

    const counts: TaskCounts = { byStatus: { pending: 1, claimed: 0, running: 0, completed: 0, failed: 0, cancelled: 0 }, byType: { productResync: { pending: 1 } } };
    expect(toWire(TaskCountsRecord, counts)).toEqual({ by_status: counts.byStatus, by_type: { productResync: { pending: 1 } } });
    const nullableDate = Type.Object({ at: Type.Union([Type.Date(), Type.Null()]) });
    expect(toWire(nullableDate, { at: new Date(0) })).toEqual({ at: "1970-01-01T00:00:00.000Z" });
    expect(fromWire(nullableDate, { at: null })).toEqual({ at: null });
    expect(() => wireSchema(Type.Intersect([Type.Object({ a: Type.String() }), Type.Object({ b: Type.String() })]))).toThrow(/Type.Composite/);
  });

  it("the record schemas are exactly the library's types (a drift fails the typecheck)", () => {
    expectTypeOf<Static<typeof TaskRecord>>().toEqualTypeOf<Task>();
    expectTypeOf<Static<typeof TaskEventRecord>>().toEqualTypeOf<TaskEvent>();
    expectTypeOf<Static<typeof TaskCountsRecord>>().toEqualTypeOf<TaskCounts>();
    expectTypeOf<Static<typeof CapacityRecord>>().toEqualTypeOf<CapacityRow>();
    expectTypeOf<Static<typeof WorkerRecordSchema>>().toEqualTypeOf<WorkerRecord>();
    expectTypeOf<Static<typeof WorkerListRecord>>().toEqualTypeOf<WorkerList>();
    expectTypeOf<Static<typeof ReassignmentRecord>>().toEqualTypeOf<ReassignmentEvent>();
    expectTypeOf<Static<typeof ReassignmentStatsRecord>>().toEqualTypeOf<ReassignmentStats>();
    expectTypeOf<Static<typeof TaskTypeRecordSchema>>().toEqualTypeOf<TaskTypeRecord>();
    expectTypeOf<Static<typeof SweepResultRecord>>().toEqualTypeOf<SweepResult>();
    expectTypeOf<Static<typeof ScheduleRecordSchema>>().toEqualTypeOf<ScheduleRecord>();
    expectTypeOf<Static<typeof GenerateResultRecord>>().toEqualTypeOf<GenerateResult>();
    expectTypeOf<Static<typeof ThroughputRecord>>().toEqualTypeOf<Throughput>();
  });
});

/** What each route must accept: the library's input schema of the call it makes, plus HTTP-only fields (ClaimWait, ClaimNext). */
const strict = (...parts: TSchema[]) => Type.Composite(parts as never, { additionalProperties: false });
const Id = Type.Object({ id: schemas.TaskId });
const LIBRARY_INPUTS: Record<string, { body?: TSchema; query?: TSchema; params?: TSchema }> = {
  "POST /api/tasks": { body: schemas.EnqueueInputSchema },
  "POST /api/tasks/batch": { body: strict(Type.Object({ tasks: Type.Array(schemas.EnqueueInputSchema, { maxItems: schemas.EnqueueBatchSchema.maxItems }) })) },
  "GET /api/tasks": { query: strict(schemas.TaskFilterSchema, schemas.PageSchema) },
  "GET /api/tasks/counts": {},
  "GET /api/tasks/throughput": { query: schemas.ThroughputQuerySchema },
  "GET /api/tasks/failures": { query: schemas.FailuresQuerySchema },
  "GET /api/tasks/capacity": {},
  "GET /api/tasks/capacity/{task_type}": { params: Type.Object({ taskType: schemas.TaskTypeName }) },
  "GET /api/tasks/{id}": { params: Id, query: schemas.TaskWithEventsQuerySchema },
  "POST /api/tasks/{id}/cancel": { params: Id, body: schemas.CancelOptionsSchema },
  "POST /api/tasks/{id}/retry": { params: Id, body: schemas.RetryOptionsSchema },
  "POST /api/tasks/recover-stale": {},
  "POST /api/tasks/claim": { body: strict(schemas.ClaimOptionsSchema, ClaimWait) },
  "POST /api/tasks/{id}/claim": { params: Id, body: schemas.ClaimByIdOptionsSchema },
  "POST /api/tasks/{id}/start": { params: Id, body: strict(schemas.LeaseSchema) },
  "POST /api/tasks/{id}/heartbeat": { params: Id, body: strict(schemas.LeaseSchema, schemas.HeartbeatOptionsSchema) },
  "POST /api/tasks/{id}/checkpoint": { params: Id, body: strict(schemas.LeaseSchema, Type.Object({ checkpoint: schemas.JsonValue })) },
  "POST /api/tasks/{id}/progress": { params: Id, body: strict(schemas.LeaseSchema, Type.Object({ progress: schemas.ProgressSchema })) },
  "POST /api/tasks/{id}/complete": { params: Id, body: strict(schemas.LeaseSchema, schemas.CompleteOptionsSchema, ClaimNext) },
  "POST /api/tasks/{id}/fail": { params: Id, body: strict(schemas.LeaseSchema, schemas.FailOptionsSchema, ClaimNext) },
  "POST /api/tasks/{id}/release": { params: Id, body: strict(schemas.LeaseSchema, schemas.ReleaseOptionsSchema) },
  "POST /api/tasks/complete": { body: strict(Type.Object({ completions: Type.Array(schemas.CompletionSchema, { minItems: 1, maxItems: 1000 }) }), BatchOptionsSchema) },
  "POST /api/tasks/fail": { body: strict(Type.Object({ failures: Type.Array(schemas.FailureSchema, { minItems: 1, maxItems: 1000 }) }), BatchOptionsSchema) },
  "POST /api/tasks/wait": { body: strict(WaitForWork) },
  "POST /api/workers/heartbeat": { body: schemas.WorkerBeatSchema },
  "GET /api/workers": { query: schemas.WorkerQuerySchema },
  "POST /api/workers/{id}/shutdown": { params: Type.Object({ id: schemas.WorkerId }), body: schemas.WorkerShutdownSchema },
  "GET /api/reassignments": { query: schemas.ReassignmentQuerySchema },
  "GET /api/reassignments/stats": {},
  "GET /api/task-types": {},
  "GET /api/task-types/{name}": { params: Type.Object({ name: schemas.TaskTypeName }) },
  "POST /api/task-types": { body: schemas.TaskTypeDefinitionSchema },
  "GET /api/schedules": {},
  "POST /api/schedules": { body: schemas.ScheduleDefinitionSchema },
  "GET /api/schedules/{name}": { params: Type.Object({ name: schemas.ScheduleName }) },
  "POST /api/schedules/{name}/pause": { params: Type.Object({ name: schemas.ScheduleName }) },
  "POST /api/schedules/{name}/cancel-pending": { params: Type.Object({ name: schemas.ScheduleName }) },
  "POST /api/schedules/{name}/resume": { params: Type.Object({ name: schemas.ScheduleName }) },
  "DELETE /api/schedules/{name}": { params: Type.Object({ name: schemas.ScheduleName }) },
  "POST /api/tasks/generate/resync": { body: schemas.ResyncInputSchema },
  "POST /api/tasks/generate/discovery": { body: schemas.DiscoveryInputSchema },
  "GET /api/whoami": {},
  "GET /healthz": {},
  "GET /readyz": {},
};

/** The JSON of a schema as the OpenAPI document prints it (const as enum, descriptions aside). */
function normalize(schema: unknown): unknown {
  return JSON.parse(JSON.stringify(schema), (key, value) => {
    if (value && typeof value === "object" && !Array.isArray(value)) {
      const { const: constant, patternProperties, ...rest } = value as Record<string, unknown>;
      delete rest.description;
      // String-keyed records print as additionalProperties.
      if (patternProperties) Object.assign(rest, { additionalProperties: (patternProperties as Record<string, unknown>)["^(.*)$"] });
      return constant === undefined ? rest : { ...rest, enum: [constant] };
    }
    return value;
  });
}

describe("the OpenAPI document", () => {
  let pool: Taskpool;
  let doc: { paths: Record<string, Body> } & Record<string, unknown>;
  beforeAll(async () => {
    pool = await connect("sqlite::memory:");
    const app = await buildServer(pool);
    await app.ready();
    doc = app.swagger() as never;
    await app.close();
  });
  afterAll(() => pool.close());

  it("is valid OpenAPI 3.1", async () => {
    const validator = new Validator();
    const result = await validator.validate(doc as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });

  it("documents every route, each accepting exactly the library's input for the call it makes (a route schema written by hand fails here)", () => {
    const documented = Object.entries(doc.paths).flatMap(([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`));
    expect(documented.sort()).toEqual(Object.keys(LIBRARY_INPUTS).sort());
    expect(ROUTES).toHaveLength(documented.length);
    for (const [route, inputs] of Object.entries(LIBRARY_INPUTS)) {
      const [method, path] = route.split(" ");
      const operation = doc.paths[path][method.toLowerCase()];
      const body = operation.requestBody?.content?.["application/json"]?.schema;
      expect(body === undefined ? undefined : normalize(body), `${route} body`).toEqual(inputs.body && normalize(wireSchema(inputs.body)));
      for (const part of ["query", "params"] as const) {
        const where = part === "query" ? "query" : "path";
        const documentedParams = (operation.parameters ?? []).filter((p: { in: string }) => p.in === where);
        const expected = inputs[part] ? (normalize(wireSchema(inputs[part])) as { properties: Record<string, unknown>; required?: string[] }) : { properties: {} };
        expect(documentedParams.map((p: { name: string }) => p.name).sort(), `${route} ${part}`).toEqual(Object.keys(expected.properties).sort());
        for (const p of documentedParams) {
          expect(normalize(p.schema), `${route} ${part} ${p.name}`).toEqual(expected.properties[p.name]);
          expect(p.required, `${route} ${p.name} required`).toBe(where === "path" || (expected.required ?? []).includes(p.name));
        }
      }
    }
  });

  it("documents the envelopes: snake_case success bodies, the error envelope on 4xx, the API key header", () => {
    const claim = doc.paths["/api/tasks/claim"].post;
    expect(Object.keys(claim.responses).sort()).toEqual(["200", "400", "401", "403", "404", "408", "413", "415", "429", "431", "503"]);
    expect(claim.responses["200"].content["application/json"].schema.properties.task.properties).toHaveProperty("lease_token");
    expect(claim.responses["404"].content["application/json"].schema.properties).toHaveProperty("filters");
    expect(claim.security).toEqual([{ apiKey: [] }]);
    expect(doc.paths["/healthz"].get.security).toEqual([]);
    expect(doc.components).toMatchObject({ securitySchemes: { apiKey: { type: "apiKey", in: "header", name: "X-API-Key" } } });
    const capacity = doc.paths["/api/tasks/capacity/{task_type}"].get.responses["200"].content["application/json"].schema;
    expect(Object.keys(capacity.properties.workers_needed.properties)).toEqual(["for_1_hour", "for_4_hours", "for_8_hours"]);
  });
});
