/**
 * graphile-worker in two configurations, each in a fresh schema per run:
 *
 * - "graphile-worker": its defaults, concurrency aside.
 * - "graphile-worker-batched": the configuration its Performance page publishes its own figures
 *   with (https://worker.graphile.org/docs/performance, "Quick stats" and perfTest/graphile.config.js):
 *   a local queue of 500 jobs and completions and failures flushed in batches with no added delay,
 *   maxPoolSize concurrency + 1. The page's "starting point" for new users (localQueue concurrency + 1,
 *   250 ms batch delays) trades throughput for less locked work; the published figures use this one.
 *
 * Both keep graphile-worker's default logger (a line per completed job at info), as taskpool keeps
 * its own; the child's stdout goes to /dev/null.
 */
import { makeWorkerUtils, run, type Runner, type WorkerUtils } from "graphile-worker";
import { dropSchema, PG_URL } from "../lib/database.js";
import { CONCURRENCY, type Consumer, installedVersion, type OnStart, type Payload, type Producer, QUEUE, type System } from "./system.js";

type WorkerPreset = NonNullable<GraphileConfig.Preset["worker"]>;

const BATCHED: WorkerPreset = {
  maxPoolSize: CONCURRENCY + 1,
  localQueue: { size: 500 },
  completeJobBatchDelay: 0,
  failJobBatchDelay: 0,
};

function producer(schema: string): Producer {
  let utils: WorkerUtils | undefined;
  return {
    async open() {
      utils = await makeWorkerUtils({ connectionString: PG_URL, schema });
      // Migrate now, so the worker's start does not install the schema on the drain's clock.
      await utils.migrate();
    },
    async enqueueMany(payloads: Payload[]) {
      await utils!.addJobs(payloads.map((payload) => ({ identifier: QUEUE, payload })));
    },
    async enqueue(payload: Payload) {
      await utils!.addJob(QUEUE, payload);
    },
    async remaining() {
      // graphile-worker deletes a job when it completes; a failed one stays, with its error.
      const { rows } = await utils!.withPgClient((client) => client.query(`SELECT count(*)::int AS n FROM "${schema}"._private_jobs`));
      return rows[0].n as number;
    },
    async close() {
      try {
        await utils?.release();
      } finally {
        await dropSchema(schema);
      }
    },
  };
}

function consumer(schema: string, onStart: OnStart, extra: WorkerPreset): Consumer {
  let runner: Runner | undefined;
  return {
    async prepare() {},
    async start() {
      runner = await run({
        preset: { worker: { connectionString: PG_URL, schema, concurrentJobs: CONCURRENCY, ...extra } },
        noHandleSignals: true, // the bench stops the worker itself
        taskList: {
          [QUEUE]: async (payload) => {
            onStart(payload as Payload);
          },
        },
      });
    },
    async stop() {
      await runner?.stop();
    },
  };
}

export const graphileWorker: System = {
  name: "graphile-worker",
  version: () => installedVersion("graphile-worker"),
  settings: `concurrentJobs ${CONCURRENCY}; defaults otherwise (maxPoolSize 10, pollInterval 2000 with LISTEN/NOTIFY, no local queue, no batching, console logger)`,
  producer,
  consumer: (schema, onStart) => consumer(schema, onStart, {}),
};

export const graphileWorkerBatched: System = {
  name: "graphile-worker-batched",
  version: () => installedVersion("graphile-worker"),
  settings:
    `concurrentJobs ${CONCURRENCY}, maxPoolSize ${CONCURRENCY + 1}, localQueue { size: 500 }, completeJobBatchDelay 0, failJobBatchDelay 0 ` +
    "(its Performance page's published configuration); defaults otherwise",
  producer,
  consumer: (schema, onStart) => consumer(schema, onStart, BATCHED),
};
