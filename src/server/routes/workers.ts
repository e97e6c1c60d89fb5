/** The worker registry: heartbeats (seed 000), the registry view, graceful shutdown. */
import { Type } from "@sinclair/typebox";
import { WorkerRecordSchema } from "../../core/record-schemas.js";
import { WorkerBeatSchema, WorkerId } from "../../core/schemas.js";
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
    description: "Status, load %, seconds since the last heartbeat and active tasks of every worker.",
    access: ["producer"],
    reply: { workers: Type.Array(WorkerRecordSchema) },
    async handler(_input, { pool }) {
      return { workers: await pool.workers() };
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/workers/:id/shutdown",
    tag: TAG,
    summary: "Graceful deregistration",
    description:
      "What the worker still holds goes back to the pool (no attempt charged, checkpoints kept); it turns inactive. Again for an " +
      "inactive worker: 200, nothing released. 404 for a worker the registry does not know (it never sent a heartbeat).",
    access: ["worker"],
    params: Type.Object({ id: WorkerId }, { additionalProperties: false }),
    reply: { message: Type.String(), released: Type.Array(Type.Integer()) },
    errors: [404],
    async handler({ params }, { pool }) {
      const released = await pool.protocol.shutdownWorker(params.id);
      return { message: `Worker ${params.id} shut down; ${counted(released.length, "task")} released`, released };
    },
  }),
];
