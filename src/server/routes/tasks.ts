/** Tasks for producers and operators: create, list, read, count, capacity, cancel, retry, recover. */
import { TaskNotFoundError, ValidationError } from "../../core/errors.js";
import { CapacityRecord, SweepResultRecord, TaskCountsRecord, TaskEventRecord, TaskReadRecord, ThroughputRecord, FailuresRecord } from "../../core/record-schemas.js";
import { CancelOptionsSchema, RetryOptionsSchema, EnqueueBatchSchema, type EnqueueCallOptions, EnqueueInputSchema, IdempotencyKey, PageSchema, TaskFilterSchema, TaskId, TaskWithEventsQuerySchema, TaskTypeName, ThroughputQuerySchema, FailuresQuerySchema, FAILURES_READ, FAILURE_MESSAGE_SHOWN } from "../../core/schemas.js";
import { IDEMPOTENCY_KEY_SECONDS } from "../../core/retention.js";
import { Type } from "../../core/typebox.js";
import { HttpError } from "../errors.js";
import { bodyOf, defineRoute } from "../route.js";
import { counted } from "../../core/counted.js";

const TAG = "tasks";
const IdParams = Type.Object({ id: TaskId }, { additionalProperties: false });

/**
 * What an enqueue reads of its headers: the idempotency key of the call (the IETF httpapi draft's
 * header). Its description is also its refusal's wording, so what it does is in the routes'.
 */
const EnqueueHeaders = Type.Object({ "idempotency-key": Type.Optional(IdempotencyKey) }, { additionalProperties: true });

const KEY_LIFETIME = `${IDEMPOTENCY_KEY_SECONDS / 3600} hours`;

/** The call's options from its headers. */
const callOptions = (headers: Record<string, string | string[] | undefined>): EnqueueCallOptions => {
  const key = headers["idempotency-key"];
  return typeof key === "string" ? { idempotencyKey: key } : {};
};

/** Marks a replay's answer for clients that look at headers only (Stripe's name). */
const REPLAYED_HEADER = "idempotent-replayed";

const EnqueueResultRecord = Type.Object({
  task: TaskReadRecord,
  created: Type.Boolean(),
  replayed: Type.Optional(Type.Literal(true, { description: "present when the idempotency key was used before: the task is the first call's, as it is now" })),
});

export const taskRoutes = [
  defineRoute({
    method: "POST",
    url: "/api/tasks",
    tag: TAG,
    summary: "Create a task",
    description:
      "201 with the new task; 200 with the pending task already holding the unique_key (created: false), or with the task of the first call " +
      `that sent the same Idempotency-Key within ${KEY_LIFETIME} (created: false, replayed: true, header Idempotent-Replayed: true), whatever became of it. ` +
      "422 idempotency_key_reused: the key came with a different request before. 404 not_found: the first call's task was deleted by retention since " +
      "(a --retain-completed shorter than a day), so it cannot be answered.",
    access: ["producer"],
    body: EnqueueInputSchema,
    headers: EnqueueHeaders,
    status: [201, 200],
    reply: EnqueueResultRecord.properties,
    errors: [404, 422],
    async handler({ body, headers }, { pool, reply }) {
      // Through the pool's batcher: concurrent producers share inserts and commits, keyed or not.
      const result = await pool.enqueueOne(body, callOptions(headers));
      if (!result.created) reply.code(200);
      if (result.replayed) reply.header(REPLAYED_HEADER, "true");
      return result;
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/tasks/batch",
    tag: TAG,
    summary: "Create many tasks, all or nothing",
    description:
      "201 when it created a task; 200 when it created none (an empty list, or every item's unique_key already pending). " +
      "One bad item refuses the batch (400 naming its index) and creates nothing. With an Idempotency-Key the first call's key covers the whole batch: " +
      `the same batch sent again within ${KEY_LIFETIME} creates nothing and answers 200 with the first call's tasks (each created: false, replayed: true; header Idempotent-Replayed: true); ` +
      "422 idempotency_key_reused when the key came with a different batch; 404 not_found when retention deleted one of the first call's tasks since.",
    access: ["producer"],
    body: bodyOf(Type.Object({ tasks: Type.Array(EnqueueInputSchema, { maxItems: EnqueueBatchSchema.maxItems }) })),
    headers: EnqueueHeaders,
    status: [201, 200],
    reply: { results: Type.Array(EnqueueResultRecord) },
    errors: [404, 422],
    async handler({ body, headers }, { pool, reply }) {
      const results = await pool.enqueueMany(body.tasks, callOptions(headers)).catch((error) => {
        // The library names the item by its index in the list it was given; here that list is the body's `tasks`.
        if (error instanceof ValidationError) error.nestUnder("tasks");
        throw error;
      });
      // As a single create: 201 when the call made a task; an empty list, or one whose every task existed, made none.
      if (!results.some((r) => r.created)) reply.code(200);
      if (results.some((r) => r.replayed)) reply.header(REPLAYED_HEADER, "true");
      return { results };
    },
  }),
  defineRoute({
    method: "GET",
    url: "/api/tasks",
    tag: TAG,
    summary: "List tasks",
    description: "Filters: status (repeat it for several), task_type, worker_id, search (text in the params). Paging: pass next_cursor back as cursor, with the same order and filters (another is refused).",
    access: ["producer"],
    query: bodyOf(TaskFilterSchema, PageSchema),
    reply: { tasks: Type.Array(TaskReadRecord), nextCursor: Type.Union([Type.String(), Type.Null()]) },
    async handler({ query }, { pool }) {
      const { cursor, limit, order, ...filter } = query;
      return pool.list(filter, { cursor, limit, order });
    },
  }),
  defineRoute({
    method: "GET",
    url: "/api/tasks/counts",
    tag: TAG,
    summary: "Task counts by status and by type",
    access: ["producer"],
    reply: TaskCountsRecord.properties,
    async handler(_input, { pool }) {
      return pool.counts();
    },
  }),
  defineRoute({
    method: "GET",
    url: "/api/tasks/throughput",
    tag: TAG,
    summary: "Completed and failed tasks per minute, with pickup latency",
    description:
      "One row per minute over the last `minutes` (default 60), the current minute last, of every task type or of `task_type`. " +
      "`failed` counts tasks that failed for good; " +
      "`pickup_seconds` is the mean time from ready (scheduled_for) to the last claim of the tasks that finished that minute.",
    access: ["producer"],
    query: ThroughputQuerySchema,
    reply: ThroughputRecord.properties,
    async handler({ query }, { pool }) {
      return pool.throughput(query);
    },
  }),
  defineRoute({
    method: "GET",
    url: "/api/tasks/failures",
    tag: TAG,
    summary: "The dead letter, grouped: the newest failed tasks by type and error",
    description:
      `The newest \`limit\` failed tasks (by failure time; default ${FAILURES_READ.default}, at most ${FAILURES_READ.max}) in groups of one type and one error, ` +
      "most tasks first: each with its tasks' ids (newest failure first), to retry them, and when the newest failed. `error_message` is the error's " +
      `first ${FAILURE_MESSAGE_SHOWN} characters (GET /api/tasks/:id has it whole). \`read\`` +
      " is how many failed tasks were grouped; `more`, whether older ones were left " +
      "out (GET /api/tasks?status=failed pages through them all). No params, checkpoint or result is read.",
    access: ["producer"],
    query: FailuresQuerySchema,
    reply: FailuresRecord.properties,
    async handler({ query }, { pool }) {
      return pool.failures(query);
    },
  }),
  defineRoute({
    method: "GET",
    url: "/api/tasks/capacity",
    tag: TAG,
    summary: "Capacity planning for every role (seed 004)",
    access: ["producer"],
    reply: { capacity: Type.Array(CapacityRecord) },
    async handler(_input, { pool }) {
      return { capacity: await pool.capacity() };
    },
  }),
  defineRoute({
    method: "GET",
    url: "/api/tasks/capacity/:task_type",
    tag: TAG,
    summary: "Capacity planning for one role (seed 004)",
    description: "404 for a type with nothing to plan for: no pending or running task, none completed in the last hour, no active worker, no registration (its tasks may all be done, failed or cancelled).",
    access: ["producer"],
    params: Type.Object({ taskType: TaskTypeName }, { additionalProperties: false }),
    reply: CapacityRecord.properties,
    errors: [404],
    async handler({ params }, { pool }) {
      const [row] = await pool.capacity(params.taskType);
      if (!row) throw new HttpError("not_found", `No capacity figures for task type "${params.taskType}": it has no pending or running task, none completed in the last hour, no active worker and no registration`);
      return row;
    },
  }),
  defineRoute({
    method: "GET",
    url: "/api/tasks/:id",
    tag: TAG,
    summary: "One task with its event timeline",
    description:
      "events_limit keeps only the latest events of the timeline (still oldest first; 0: none). Without it every event comes: a task that saved a checkpoint per page has tens of thousands.",
    access: ["producer", "worker"],
    params: IdParams,
    query: TaskWithEventsQuerySchema,
    reply: { task: TaskReadRecord, events: Type.Array(TaskEventRecord) },
    errors: [404],
    async handler({ params, query }, { pool }) {
      const [task, events] = await Promise.all([pool.get(params.id), pool.events(params.id, { limit: query.eventsLimit })]);
      if (!task) throw new TaskNotFoundError(params.id);
      return { task, events };
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/tasks/:id/cancel",
    tag: TAG,
    summary: "Cancel a task that has not finished",
    description:
      "A worker holding it must stop: its lease calls are refused with 409 invalid_transition (\"it is cancelled\"), a worker heartbeat " +
      "listing its lease names it in `lost`, and a wait (`POST /api/tasks/wait`) hears `!cancelled:<id>`. 409 invalid_transition " +
      "for a task already finished.",
    access: ["admin"],
    params: IdParams,
    body: CancelOptionsSchema,
    reply: { task: TaskReadRecord },
    errors: [404, 409],
    async handler({ params, body }, { pool }) {
      return { task: await pool.cancel(params.id, body) };
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/tasks/:id/retry",
    tag: TAG,
    summary: "Put a failed (dead-letter) task back in the pool with a fresh attempt budget",
    description: "Its checkpoint is kept, so the next run resumes where the last got to; `reset_checkpoint: true` clears it (and the progress) to start afresh.",
    access: ["admin"],
    params: IdParams,
    body: RetryOptionsSchema,
    reply: { task: TaskReadRecord },
    errors: [404, 409],
    async handler({ params, body }, { pool }) {
      return { task: await pool.retry(params.id, body) };
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/tasks/recover-stale",
    tag: TAG,
    summary: "Run one coordinator sweep now",
    description: "Stale and dead workers, recovery of their tasks and of expired leases, reassignment; answers what it did.",
    access: ["admin"],
    reply: { message: Type.String(), ...SweepResultRecord.properties },
    async handler(_input, { coordinator }) {
      const r = await coordinator.sweepOnce();
      const message =
        `${r.deadWorkers.length} dead and ${counted(r.staleWorkers.length, "stale worker")}; ${counted(r.requeued.length, "task")} requeued, ` +
        `${r.failed.length} failed, ${r.reassigned.length} reassigned, ${r.unassigned.length} without a worker with room`;
      return { message, ...r };
    },
  }),
];
