/** The worker registry: heartbeats (seed 000), the registry view, graceful shutdown. */
import { WorkerListRecord } from "../../core/record-schemas.js";
import { WorkerBeatSchema, WorkerId, WorkerQuerySchema, WorkerShutdownSchema } from "../../core/schemas.js";
import { Type } from "../../core/typebox.js";
import { defineRoute } from "../route.js";
import { counted } from "../../core/counted.js";

const TAG = "workers";

export const workerRoutes = [
  defineRoute({
    method: "POST",
    url: "/api/workers/heartbeat",
    tag: TAG,
    summary: "Record a worker's heartbeat (seed 000)",
    description:
      "Registers or refreshes the worker and renews the leases it lists in one call. `lost` names the tasks among them it no longer " +
      "holds (taken back, re-claimed or cancelled): stop working on those. `next_heartbeat_in` is when to beat again, in seconds.",
    access: ["worker"],
    body: WorkerBeatSchema,
    reply: { message: Type.String(), nextHeartbeatIn: Type.Number(), lost: Type.Array(Type.Integer()) },
    async handler({ body }, { beats, heartbeatIntervalSeconds }) {
      // Concurrent beats from many workers share one statement and one commit.
      const { lost } = await beats.beat(body);
      return { message: "Heartbeat recorded", nextHeartbeatIn: heartbeatIntervalSeconds, lost };
    },
  }),
  defineRoute({
    method: "GET",
    url: "/api/workers",
    tag: TAG,
    summary: "The worker registry",
    description:
      "Status, load %, seconds since the last heartbeat and active tasks of the workers, a page at a time: every live one (active, stale) " +
      "by id, up to 1000, then the `limit` gone ones (dead, inactive; default 100, at most 1000) most recently heard from. `counts` is the " +
      "whole registry's by status, so it says how many the page left out. Filters: status (repeat it for several), worker_id (that worker " +
      "alone, whatever its status). Paging: pass next_cursor back as cursor, with the same filters (another is refused).",
    access: ["producer"],
    query: WorkerQuerySchema,
    reply: WorkerListRecord.properties,
    async handler({ query }, { pool }) {
      return pool.workers(query);
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/workers/:id/shutdown",
    tag: TAG,
    summary: "Graceful deregistration",
    description:
      "What the worker still holds goes back to the pool (no attempt charged, checkpoints kept); it turns inactive. Again for an " +
      "inactive worker: 200, nothing released. 404 for a worker the registry does not know (it never sent a heartbeat). The body is " +
      "optional: `run_id` names the run shutting down (the `run_id` of its beats). If another run has registered under the id since " +
      "(this shutdown arrived late: held up, or sent again by a retry), it answers 200 with nothing released and changes nothing: the " +
      "worker stays active and the tasks leased under its id, the new run's, stay leased; only that run's late beats are refused from " +
      "then on. Without a body (an operator's shutdown), it is of whichever run is current.",
    access: ["worker"],
    params: Type.Object({ id: WorkerId }, { additionalProperties: false }),
    body: WorkerShutdownSchema,
    reply: { message: Type.String(), released: Type.Array(Type.Integer()) },
    errors: [404],
    async handler({ params, body }, { pool }) {
      // No body at all comes as undefined.
      const runId = body?.runId;
      const released = await pool.protocol.shutdownWorker(params.id, runId);
      const who = runId === undefined ? `Worker ${params.id}` : `Run ${runId} of worker ${params.id}`;
      return { message: `${who} shut down; ${counted(released.length, "task")} released`, released };
    },
  }),
];
