/**
 * The lease protocol for workers in any language: claim (seed 002), then start, heartbeat,
 * checkpoint, progress, complete, fail or release, each presenting worker_id and lease_token. A
 * stale token is refused with 409 lease_lost and changes nothing (the store checks it in the
 * statement that writes).
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { TaskRecord } from "../../core/record-schemas.js";
import {
  ClaimByIdOptionsSchema,
  ClaimOptionsSchema,
  CompleteOptionsSchema,
  FailOptionsSchema,
  HeartbeatOptionsSchema,
  JsonValue,
  LeaseSchema,
  ProgressSchema,
  ReleaseOptionsSchema,
  TaskId,
} from "../../core/schemas.js";
import type { Written } from "../../api/next-claims.js";
import type { ClaimedTask, ClaimOptions } from "../../core/task.js";
import { type Static, Type } from "../../core/typebox.js";
import type { ServerContext } from "../context.js";
import { HttpError } from "../errors.js";
import { bodyOf, defineRoute } from "../route.js";

const TAG = "leases";
type TaskRecordValue = Static<typeof TaskRecord>;
const IdParams = Type.Object({ id: TaskId }, { additionalProperties: false });
/** The longest a claim may wait for work (`wait_ms`). */
export const MAX_WAIT_MS = 30_000;

/** HTTP-only fields of a claim: how long to wait when nothing is ready. */
export const ClaimWait = Type.Object({
  waitMs: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_WAIT_MS, description: "wait up to this long for a task when none is ready (long-poll), 0..30000; default 0" })),
});

/**
 * HTTP-only field of complete and fail: the worker's next claim, made in the same request once the
 * outcome is written, so a worker that runs one task at a time needs one request per task, not two.
 */
export const ClaimNext = Type.Object({
  claimNext: Type.Optional(
    Type.Omit(ClaimOptionsSchema, ["workerId"], {
      additionalProperties: false,
      description: "claim this worker's next task(s) in the same request (the claim's fields but worker_id, no wait); the answer's next_tasks holds them",
    }),
  ),
});

type RequestContext = ServerContext & { request: FastifyRequest; reply: FastifyReply };

/**
 * Watches for the client hanging up before its answer is written: `signal` aborts then. Tasks
 * claimed for a client that is gone go back at once (`release`) rather than at their lease's end.
 */
function watchHangUp({ pool, request, reply }: RequestContext) {
  const gone = new AbortController();
  const onClose = () => !reply.raw.writableFinished && gone.abort();
  reply.raw.once("close", onClose);
  return {
    signal: gone.signal,
    stop: () => reply.raw.off("close", onClose),
    async release(tasks: ClaimedTask[]): Promise<void> {
      // A socket already destroyed counts too: Node emits the response's close a turn later, and a claim
      // answered in between went to nobody, held for its lease (7 of 300 claims whose client reset).
      if (tasks.length === 0 || !(gone.signal.aborted || request.raw.socket?.destroyed === true)) return;
      await Promise.allSettled(tasks.map((t) => pool.protocol.release(t.id, t, { reason: "client disconnected before the claim was answered" })));
      request.log.info({ tasks: tasks.map((t) => t.id) }, "Claim released: the client hung up");
    },
  };
}

/** Claims for a request, waiting up to `waitMs` for work. A client that hangs up meanwhile ends the wait. */
async function claimFor(options: ClaimOptions, waitMs: number, ctx: RequestContext): Promise<ClaimedTask[]> {
  const hangUp = watchHangUp(ctx);
  try {
    const tasks = await ctx.longPoll.claim(options, waitMs, hangUp.signal);
    await hangUp.release(tasks);
    return tasks;
  } finally {
    hangUp.stop();
  }
}

/**
 * A complete or fail without follow-ups: concurrent requests share one statement and one commit,
 * each fenced by its own lease, and their `claim_next` claims one statement beside it (see
 * writeWithNextClaims). The outcome stands whatever happens to the claim: a claim that fails (the
 * database went away) is logged and answered with no next task, so the worker does not retry a write
 * that succeeded; its next plain claim meets the error.
 */
async function writeOutcome(
  action: "complete" | "fail",
  write: (next: ClaimOptions | undefined) => Promise<Written>,
  workerId: string,
  next: Omit<ClaimOptions, "workerId"> | undefined,
  ctx: RequestContext,
): Promise<{ task: TaskRecordValue; nextTasks?: ClaimedTask[] }> {
  const hangUp = next ? watchHangUp(ctx) : null;
  try {
    const written = await write(next && { ...next, workerId });
    const task: TaskRecordValue = written.task!;
    if (!written.next) return { task };
    if (!written.next.ok) {
      ctx.request.log.warn({ err: written.next.error, workerId }, `claim_next failed after the ${action} was written; answering no next task`);
      return { task, nextTasks: [] };
    }
    await hangUp?.release(written.next.value);
    return { task, nextTasks: written.next.value };
  } finally {
    hangUp?.stop();
  }
}

/** The `claim_next` of a complete with follow-ups, once its own transaction committed; as writeOutcome says. */
async function claimNext(workerId: string, next: Omit<ClaimOptions, "workerId"> | undefined, ctx: RequestContext): Promise<{ nextTasks?: ClaimedTask[] }> {
  if (!next) return {};
  try {
    return { nextTasks: await claimFor({ ...next, workerId }, 0, ctx) };
  } catch (error) {
    ctx.request.log.warn({ err: error, workerId }, "claim_next failed after the complete was written; answering no next task");
    return { nextTasks: [] };
  }
}

const leaseRoute = (action: string, summary: string, description?: string) => ({
  method: "POST" as const,
  url: `/api/tasks/:id/${action}`,
  tag: TAG,
  summary,
  ...(description ? { description } : {}),
  access: ["worker"] as const,
  params: IdParams,
  errors: [404, 409],
});

export const taskLeaseRoutes = [
  defineRoute({
    method: "POST",
    url: "/api/tasks/claim",
    tag: TAG,
    summary: "Claim the next ready task (seed 002)",
    description:
      "200 with the task and its lease_token (`tasks` holds them all when `limit` > 1). 404 no_tasks, echoing the filters, " +
      "when nothing is ready; with `wait_ms` the request waits for work of its types first, answering as soon as some appears.",
    access: ["worker"],
    body: bodyOf(ClaimOptionsSchema, ClaimWait),
    reply: { message: Type.String(), task: TaskRecord, leaseToken: Type.String(), tasks: Type.Array(TaskRecord) },
    errors: [404],
    async handler({ body }, ctx) {
      const { waitMs = 0, ...options } = body;
      const tasks = await claimFor(options, waitMs, ctx);
      if (tasks.length === 0) {
        throw new HttpError("no_tasks", "No pending tasks available", {
          filters: { taskTypes: options.taskTypes ?? null, maxAttemptsRemaining: options.maxAttemptsRemaining ?? null },
        });
      }
      return { message: tasks.length === 1 ? "Task claimed successfully" : `${tasks.length} tasks claimed successfully`, task: tasks[0], leaseToken: tasks[0].leaseToken, tasks };
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/tasks/:id/claim",
    tag: TAG,
    summary: "Claim one pending task by id",
    description: "409 already_claimed when another worker holds it.",
    access: ["worker"],
    params: IdParams,
    body: ClaimByIdOptionsSchema,
    reply: { message: Type.String(), task: TaskRecord, leaseToken: Type.String() },
    errors: [404, 409],
    async handler({ params, body }, { pool }) {
      const task = await pool.protocol.claimById(params.id, body);
      return { message: "Task claimed successfully", task, leaseToken: task.leaseToken };
    },
  }),
  defineRoute({
    ...leaseRoute("start", "Start a claimed task"),
    body: bodyOf(LeaseSchema),
    reply: { task: TaskRecord },
    async handler({ params, body }, { pool }) {
      return { task: await pool.protocol.start(params.id, body) };
    },
  }),
  defineRoute({
    ...leaseRoute("heartbeat", "Extend a task's lease", "lease_seconds defaults to the claim's lease length; progress (0..1) is optional."),
    body: bodyOf(LeaseSchema, HeartbeatOptionsSchema),
    reply: { task: TaskRecord },
    async handler({ params, body }, { pool }) {
      const { workerId, leaseToken, ...options } = body;
      return { task: await pool.protocol.heartbeat(params.id, { workerId, leaseToken }, options) };
    },
  }),
  defineRoute({
    ...leaseRoute("checkpoint", "Save a task's resume point", "Any JSON; it survives retries, release and reassignment."),
    body: bodyOf(LeaseSchema, Type.Object({ checkpoint: JsonValue })),
    reply: { task: TaskRecord },
    async handler({ params, body }, { pool }) {
      const { checkpoint, ...lease } = body;
      return { task: await pool.protocol.checkpoint(params.id, lease, checkpoint) };
    },
  }),
  defineRoute({
    ...leaseRoute("progress", "Report a task's progress (0..1)"),
    body: bodyOf(LeaseSchema, Type.Object({ progress: ProgressSchema })),
    reply: { task: TaskRecord },
    async handler({ params, body }, { pool }) {
      const { progress, ...lease } = body;
      return { task: await pool.protocol.progress(params.id, lease, progress) };
    },
  }),
  defineRoute({
    ...leaseRoute("complete", "Complete a task", "With its result and follow-up tasks, created in the same transaction; with claim_next, also claims the worker's next task(s)."),
    body: bodyOf(LeaseSchema, CompleteOptionsSchema, ClaimNext),
    reply: { task: TaskRecord, followUps: Type.Array(TaskRecord), nextTasks: Type.Optional(Type.Array(TaskRecord)) },
    async handler({ params, body }, ctx) {
      const { workerId, leaseToken, claimNext: next, ...options } = body;
      const lease = { workerId, leaseToken };
      if (options.followUps && options.followUps.length > 0) {
        // Follow-ups are inserted in the completion's own transaction, so this completion goes alone.
        return { ...(await ctx.pool.protocol.complete(params.id, lease, options)), ...(await claimNext(workerId, next, ctx)) };
      }
      const written = await writeOutcome("complete", (claim) => ctx.writes.complete({ id: params.id, lease, result: options.result ?? null }, claim), workerId, next, ctx);
      return { ...written, followUps: [] };
    },
  }),
  defineRoute({
    ...leaseRoute("fail", "Fail a task", "Retried after backoff while attempts remain and retryable is not false; else failed. With claim_next, also claims the worker's next task(s)."),
    body: bodyOf(LeaseSchema, FailOptionsSchema, ClaimNext),
    reply: { task: TaskRecord, nextTasks: Type.Optional(Type.Array(TaskRecord)) },
    async handler({ params, body }, ctx) {
      const { workerId, leaseToken, claimNext: next, ...options } = body;
      return writeOutcome("fail", (claim) => ctx.writes.fail({ id: params.id, lease: { workerId, leaseToken }, ...options }, claim), workerId, next, ctx);
    },
  }),
  defineRoute({
    ...leaseRoute("release", "Give a task back without charging an attempt", "Keeps its checkpoint, or replaces it with the one given."),
    body: bodyOf(LeaseSchema, ReleaseOptionsSchema),
    reply: { task: TaskRecord },
    async handler({ params, body }, { pool }) {
      const { workerId, leaseToken, ...options } = body;
      return { task: await pool.protocol.release(params.id, { workerId, leaseToken }, options) };
    },
  }),
];
