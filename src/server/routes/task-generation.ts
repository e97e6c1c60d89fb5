/** Seed 004's task generation: the day's staggered resync batches and store discovery, made now with a schedule run's fan-out. */
import { GenerateResultRecord } from "../../core/record-schemas.js";
import { discoveryGeneration, resyncGeneration } from "../../core/schedule.js";
import { DiscoveryInputSchema, ResyncInputSchema } from "../../core/schemas.js";
import { defineRoute } from "../route.js";

const TAG = "tasks";

export const taskGenerationRoutes = [
  defineRoute({
    method: "POST",
    url: "/api/tasks/generate/resync",
    tag: TAG,
    summary: "Generate the day's resync batches (seed 004)",
    description:
      "One product_resync task per store (`keys`, or `from_results` of a schedule's last run) in `batches` (default 6) spread over 24 hours: " +
      "from the `date`'s midnight UTC, or from now. Each task gets `{key}` in its params and the concurrency key store:{key}. All or nothing.",
    access: ["producer"],
    body: ResyncInputSchema,
    status: [201],
    // from_results names no schedule.
    errors: [404],
    reply: GenerateResultRecord.properties,
    async handler({ body }, { pool }) {
      return pool.generate(resyncGeneration(body));
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/tasks/generate/discovery",
    tag: TAG,
    summary: "Create a store discovery task (seed 004)",
    description: "One store_discovery task now, or one per key (e.g. per region) with `{key}` in its params.",
    access: ["producer"],
    body: DiscoveryInputSchema,
    status: [201],
    reply: GenerateResultRecord.properties,
    async handler({ body }, { pool }) {
      return pool.generate(discoveryGeneration(body));
    },
  }),
];
