/**
 * What the library's HTTP transport (`connect("http://…")`, src/client/) needs beyond the seeds'
 * routes, so that the same worker runtime runs over HTTP as on a database: its batched completions
 * and failures (each item fenced by its own lease and answered on its own, as Store.completeMany
 * says), and a wait for work that stands in for the store's wake-up notifications. Any client may
 * use them.
 */
import { TaskRecord } from "../../core/record-schemas.js";
import { CompletionSchema, FailureSchema, TaskTypeName } from "../../core/schemas.js";
import { Type } from "../../core/typebox.js";
import type { BatchOutcome } from "../../store/store.js";
import { errorReply } from "../errors.js";
import { bodyOf, defineRoute } from "../route.js";
import { MAX_WAIT_MS } from "./task-leases.js";

const TAG = "leases";
const MAX_BATCH = 1000;

/** One item's outcome: applied (its status, when a retry is due, and with `return_tasks` the task), or refused with the error code and message a single call would have answered. */
export const BatchOutcomeRecord = Type.Object(
  {
    id: Type.Integer(),
    ok: Type.Boolean(),
    status: Type.Optional(TaskRecord.properties.status),
    scheduledFor: Type.Optional(Type.Date()),
    task: Type.Optional(TaskRecord),
    error: Type.Optional(Type.String({ description: "the error code, as a single call's envelope has it" })),
    message: Type.Optional(Type.String()),
  },
  { description: "what one item of a batched write came to" },
);

function outcomeOf(outcome: BatchOutcome) {
  if (outcome.ok) return outcome;
  const { body } = errorReply(outcome.error);
  const { error, message } = body as { error: string; message: string };
  return { id: outcome.id, ok: false, error, message };
}

const outcomesReply = { outcomes: Type.Array(BatchOutcomeRecord) };

/** Whether each applied item's outcome carries the whole task (Store's BatchOptions). */
export const BatchOptionsSchema = Type.Object({ returnTasks: Type.Optional(Type.Boolean({ description: "answer each applied item's whole task (default: its status and when a retry is due)" })) });

/** HTTP-only: what a wait for work listens for, and how long. */
export const WaitForWork = Type.Object({
  taskTypes: Type.Optional(Type.Array(TaskTypeName, { minItems: 1, maxItems: 100 })),
  waitMs: Type.Integer({ minimum: 0, maximum: MAX_WAIT_MS, description: "how long to wait, 0..30000" }),
  after: Type.Optional(
    Type.String({ maxLength: 100, description: "the `cursor` of the previous wait's answer: what was announced since is answered at once" }),
  ),
});

export const workerTransportRoutes = [
  defineRoute({
    method: "POST",
    url: "/api/tasks/complete",
    tag: TAG,
    summary: "Complete many tasks in one commit",
    description:
      "Each item presents its own lease and is applied or refused on its own (409-like refusals come back as `ok: false` with the " +
      "error code, e.g. lease_lost), in input order. Follow-up tasks need the single complete.",
    access: ["worker"],
    body: bodyOf(Type.Object({ completions: Type.Array(CompletionSchema, { minItems: 1, maxItems: MAX_BATCH }) }), BatchOptionsSchema),
    reply: outcomesReply,
    async handler({ body }, { pool }) {
      return { outcomes: (await pool.protocol.completeMany(body.completions, { returnTasks: body.returnTasks })).map(outcomeOf) };
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/tasks/fail",
    tag: TAG,
    summary: "Fail many tasks in one commit",
    description: "As the batched complete: each item fenced by its own lease, answered on its own.",
    access: ["worker"],
    body: bodyOf(Type.Object({ failures: Type.Array(FailureSchema, { minItems: 1, maxItems: MAX_BATCH }) }), BatchOptionsSchema),
    reply: outcomesReply,
    async handler({ body }, { pool }) {
      return { outcomes: (await pool.protocol.failMany(body.failures, { returnTasks: body.returnTasks })).map(outcomeOf) };
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/tasks/wait",
    tag: TAG,
    summary: "Wait for work without claiming",
    description:
      "Answers `woken: true` as soon as tasks of `task_types` (any type when left out) may have become ready, or a sweep moved " +
      "tasks, with the task types the notification named (`heard`; empty: unknown, check them all; an entry `!cancelled:<id>` is no type but says that task was cancelled, for the worker running it); `woken: false` when `wait_ms` runs out. A worker that claims several task types at its own pace listens here " +
      "instead of long-polling its claims. Each answer has a `cursor`: send it as `after` with the next wait, which then answers at once " +
      "if work was announced between the two (a loop of waits misses nothing). A cursor from another server or an earlier run is ignored.",
    access: ["worker"],
    body: bodyOf(WaitForWork),
    reply: { woken: Type.Boolean(), heard: Type.Array(Type.String()), cursor: Type.String() },
    async handler({ body }, { longPoll, reply }) {
      const gone = new AbortController();
      const onClose = () => !reply.raw.writableFinished && gone.abort();
      reply.raw.once("close", onClose);
      try {
        const { heard, cursor } = await longPoll.waitForWork(body.taskTypes ?? null, body.waitMs, gone.signal, body.after);
        return { woken: heard !== null, heard: heard ?? [], cursor };
      } finally {
        reply.raw.off("close", onClose);
      }
    },
  }),
];
