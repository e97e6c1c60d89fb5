/**
 * pg-boss in a fresh schema per run, set up as its Workers page recommends for throughput and low
 * latency (https://pgboss.io/api/workers):
 *
 * - One work() fetching batchSize = CONCURRENCY jobs; the handler gets them as one array and runs
 *   them at once (so at most CONCURRENCY handlers run, as on every system), and pg-boss completes
 *   the batch together. `burstWhenBatchFull` fetches again at once while batches come back full;
 *   without it the loop sleeps its polling interval after every fetch (2 s by default), and a drain
 *   of 10,000 jobs takes half an hour. localConcurrency stays 1: with it at 10 and batchSize 1 every
 *   loop sleeps between single jobs (burst modes are off at batchSize 1).
 * - "Low-latency dispatch with LISTEN/NOTIFY": `useListenNotify` on the worker's instance and
 *   `notify: true` on the queue, so a new job wakes the worker instead of waiting for a poll.
 *
 * The bench's own instance only sends (no maintenance: supervise and schedule off); the worker's
 * instance keeps every other default, maintenance included.
 */
import { PgBoss } from "pg-boss";
import { dropSchema, PG_URL } from "../lib/database.js";
import { CONCURRENCY, type Consumer, installedVersion, type OnStart, type Payload, type Producer, QUEUE, type System } from "./system.js";

const log = (message: string) => console.error(`[pg-boss] ${message}`);

function producer(schema: string): Producer {
  let boss: PgBoss | undefined;
  return {
    async open() {
      boss = new PgBoss({ connectionString: PG_URL, schema, supervise: false, schedule: false });
      // An EventEmitter without an "error" listener would throw these out of the process.
      boss.on("error", (error) => log(`producer error: ${error.message}`));
      await boss.start();
      await boss.createQueue(QUEUE, { notify: true });
    },
    async enqueueMany(payloads: Payload[]) {
      await boss!.insert(QUEUE, payloads.map((data) => ({ data })));
    },
    async enqueue(payload: Payload) {
      await boss!.send(QUEUE, payload);
    },
    async remaining() {
      // SQL rather than getQueueStats(): a failed job must count as not done.
      const { rows } = await boss!.getDb().executeSql(`SELECT count(*)::int AS n FROM "${schema}".job WHERE name = $1 AND state <> 'completed'`, [QUEUE]);
      return rows[0].n as number;
    },
    async close() {
      try {
        await boss?.stop({ graceful: false, close: true });
      } finally {
        await dropSchema(schema);
      }
    },
  };
}

function consumer(schema: string, onStart: OnStart): Consumer {
  let boss: PgBoss | undefined;
  return {
    async prepare() {
      boss = new PgBoss({ connectionString: PG_URL, schema, useListenNotify: true });
      boss.on("error", (error) => log(`worker error: ${error.message}`));
      await boss.start();
    },
    async start() {
      await boss!.work<Payload>(QUEUE, { batchSize: CONCURRENCY, burstWhenBatchFull: true }, async (jobs) => {
        for (const job of jobs) onStart(job.data);
      });
    },
    async stop() {
      await boss?.stop({ graceful: true, close: true, timeout: 5000 });
    },
  };
}

export const pgBoss: System = {
  name: "pg-boss",
  version: () => installedVersion("pg-boss"),
  settings:
    `work() with batchSize ${CONCURRENCY} and burstWhenBatchFull, queue notify: true with useListenNotify; ` +
    "defaults otherwise (localConcurrency 1, pollingIntervalSeconds 2, notifyPollingIntervalSeconds 30, maintenance on the worker's instance)",
  producer,
  consumer,
};
