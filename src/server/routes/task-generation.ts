/** Seed 004's task generation: the day's staggered resync batches and store discovery, made now with a schedule run's fan-out. */
import { GenerateResultRecord } from "../../core/record-schemas.js";
import { ValidationError } from "../../core/errors.js";
import { discoveryGeneration, type GenerateInput, type GenerateResult, resyncGeneration } from "../../core/schedule.js";
import { DiscoveryInputSchema, ResyncInputSchema } from "../../core/schemas.js";
import { defineRoute } from "../route.js";

const TAG = "tasks";

/** The generation's fields (`fanOut.keys.1`) that the request sent under other names (`keys.1`). */
const SENT_AS: [generation: string, request: string][] = [
  ["fanOut.keys", "keys"],
  ["fanOut.fromResults", "fromResults"],
  ["fanOut.batchIntervalSeconds", "batches"],
  ["fanOut.batches", "batches"],
  ["startAt", "date"],
];
const asSent = (path: string) => {
  const renamed = SENT_AS.find(([from]) => path === from || path.startsWith(`${from}.`));
  return renamed ? renamed[1] + path.slice(renamed[0].length) : path;
};

/** Runs a generation made from the request, a refusal naming the fields the request sent. */
async function generate(pool: { generate(input: GenerateInput): Promise<GenerateResult> }, input: GenerateInput): Promise<GenerateResult> {
  try {
    return await pool.generate(input);
  } catch (error) {
    throw error instanceof ValidationError ? error.renamed(asSent) : error;
  }
}

export const taskGenerationRoutes = [
  defineRoute({
    method: "POST",
    url: "/api/tasks/generate/resync",
    tag: TAG,
    summary: "Generate the day's resync batches (seed 004)",
    description:
      "One product_resync task per store (`keys`, or `from_results` of a schedule's last run) in `batches` (default 6) spread over 24 hours: " +
      "from the `date`'s midnight UTC, or from now. Each task gets `{key}` in its params and the concurrency key store:{key}. All or nothing. " +
      "201 when it created a task; 200 when it created none (every task's `unique_key` already pending, or a `from_results` run with no keys).",
    access: ["producer"],
    body: ResyncInputSchema,
    status: [201, 200],
    // from_results names no schedule.
    errors: [404],
    reply: GenerateResultRecord.properties,
    async handler({ body }, { pool, reply }) {
      const result = await generate(pool, resyncGeneration(body));
      // As POST /api/tasks/batch: a 201 says something was created, and a repeat of the day's generation under unique keys made nothing.
      if (result.created === 0) reply.code(200);
      return result;
    },
  }),
  defineRoute({
    method: "POST",
    url: "/api/tasks/generate/discovery",
    tag: TAG,
    summary: "Create a store discovery task (seed 004)",
    description:
      "One store_discovery task now, or one per key (e.g. per region) with `{key}` in its params. " +
      "Always 201: `keys`, when given, has one at least, and there is no `unique_key` to find a task pending.",
    access: ["producer"],
    body: DiscoveryInputSchema,
    status: [201],
    reply: GenerateResultRecord.properties,
    async handler({ body }, { pool }) {
      return generate(pool, discoveryGeneration(body));
    },
  }),
];
