/** The task type registry: list, show (every version), register a version. */
import { TaskTypeRecordSchema } from "../../core/record-schemas.js";
import { TaskTypeDefinitionSchema, TaskTypeName } from "../../core/schemas.js";
import { Type } from "../../core/typebox.js";
import { HttpError } from "../errors.js";
import { defineRoute } from "../route.js";

const TAG = "task types";

export const taskTypeRoutes = [
  defineRoute({
    method: "GET",
    url: "/api/task-types",
    tag: TAG,
    summary: "The latest version of every registered task type",
    access: ["producer", "worker"],
    reply: { taskTypes: Type.Array(TaskTypeRecordSchema) },
    async handler(_input, { pool }) {
      return { taskTypes: await pool.taskTypes() };
    },
  }),
  defineRoute({
    method: "GET",
    url: "/api/task-types/:name",
    tag: TAG,
    summary: "One task type: its latest version and every version, oldest first",
    access: ["producer", "worker"],
    params: Type.Object({ name: TaskTypeName }, { additionalProperties: false }),
    reply: { taskType: TaskTypeRecordSchema, versions: Type.Array(TaskTypeRecordSchema) },
    errors: [404],
    async handler({ params }, { pool }) {
      const versions = await pool.taskTypeVersions(params.name);
      if (versions.length === 0) throw new HttpError("not_found", `Task type "${params.name}" is not registered`);
      return { taskType: versions[versions.length - 1], versions };
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/task-types",
    tag: TAG,
    summary: "Register a task type",
    description: "201 with a new version; 200 with the latest version when the definition did not change (created: false).",
    access: ["producer"],
    body: TaskTypeDefinitionSchema,
    status: [201, 200],
    reply: { taskType: TaskTypeRecordSchema, created: Type.Boolean() },
    async handler({ body }, { pool, reply }) {
      const { taskType, created } = await pool.protocol.registerTaskType(body);
      if (!created) reply.code(200);
      return { taskType, created };
    },
  }),
];
