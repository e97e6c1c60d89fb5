/** Reassignment history and seed 003's statistics. */
import { ReassignmentRecord, ReassignmentStatsRecord } from "../../core/record-schemas.js";
import { ReassignmentQuerySchema } from "../../core/schemas.js";
import { Type } from "../../core/typebox.js";
import { defineRoute } from "../route.js";

const TAG = "reassignments";

export const reassignmentRoutes = [
  defineRoute({
    method: "GET",
    url: "/api/reassignments",
    tag: TAG,
    summary: "Reassignment history, newest first",
    access: ["producer"],
    query: ReassignmentQuerySchema,
    reply: { reassignments: Type.Array(ReassignmentRecord) },
    async handler({ query }, { pool }) {
      return { reassignments: await pool.reassignments(query) };
    },
  }),
  defineRoute({
    method: "GET",
    url: "/api/reassignments/stats",
    tag: TAG,
    summary: "Reassignment statistics (seed 003)",
    description: "Success rate over 24 hours, the workers whose tasks were taken back most over 7 days, tasks reassigned more than once.",
    access: ["producer"],
    reply: ReassignmentStatsRecord.properties,
    async handler(_input, { pool }) {
      return pool.reassignmentStats();
    },
  }),
];
