/**
 * BullMQ on the local Redis (BENCH_REDIS_URL, default redis://127.0.0.1:6379), a fresh queue name per
 * run, removed with obliterate() at the end. The Worker runs with concurrency CONCURRENCY and its
 * defaults otherwise: completed jobs are kept (removeOnComplete off), stalled-job checks on.
 *
 * Redis persistence is whatever the server is configured with (aof_enabled is printed in the
 * header): without an fsynced append-only file, an acknowledged job can be lost in a crash, unlike a
 * committed row.
 */
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { CONCURRENCY, type Consumer, installedVersion, type OnStart, type Payload, type Producer, QUEUE, redisConnection, type System } from "./system.js";

/**
 * BullMQ 6 no longer depends on ioredis (an optional peer, a devDependency here); it loads it with
 * require() when given connection options, and asks ES modules to pass a client they built, as here.
 * BullMQ closes the duplicates it makes; this one is closed by the adapter. maxRetriesPerRequest
 * null is what BullMQ requires of a Worker's connection.
 */
const redisClient = () => new Redis({ ...redisConnection(), maxRetriesPerRequest: null });

function producer(queueName: string): Producer {
  let queue: Queue | undefined;
  let client: Redis | undefined;
  return {
    async open() {
      client = redisClient();
      queue = new Queue(queueName, { connection: client });
      await queue.waitUntilReady();
    },
    async enqueueMany(payloads: Payload[]) {
      await queue!.addBulk(payloads.map((data) => ({ name: QUEUE, data })));
    },
    async enqueue(payload: Payload) {
      await queue!.add(QUEUE, payload);
    },
    async remaining() {
      const counts = await queue!.getJobCounts();
      return Object.entries(counts).reduce((sum, [state, n]) => (state === "completed" ? sum : sum + n), 0);
    },
    async close() {
      try {
        // A queue that failed to connect has nothing to remove; a fresh one would fail the same way.
        await queue?.obliterate({ force: true });
      } finally {
        await queue?.close();
        client?.disconnect();
      }
    },
  };
}

function consumer(queueName: string, onStart: OnStart): Consumer {
  let worker: Worker | undefined;
  let client: Redis | undefined;
  return {
    async prepare() {
      client = redisClient();
      worker = new Worker<Payload>(
        queueName,
        async (job) => {
          onStart(job.data);
        },
        { connection: client, concurrency: CONCURRENCY, autorun: false },
      );
      worker.on("error", (error) => console.error(`[bullmq] worker error: ${error.message}`));
      await worker.waitUntilReady();
    },
    async start() {
      // run() resolves only when the worker closes; started is when its loop is running.
      worker!.run().catch((error) => console.error(`[bullmq] worker stopped: ${error}`));
    },
    async stop() {
      await worker?.close();
      client?.disconnect();
    },
  };
}

export const bullmq: System = {
  name: "bullmq",
  version: () => installedVersion("bullmq"),
  settings: `Worker concurrency ${CONCURRENCY}; defaults otherwise (completed jobs kept, stalled checks on)`,
  producer,
  consumer,
};

/** The Redis server's version and whether it writes an append-only file, for the report header. */
export async function redisServer(): Promise<{ version: string; aofEnabled: string }> {
  const client = redisClient();
  try {
    const info = await client.info();
    const field = (name: string) => new RegExp(`^${name}:(\\S+)`, "m").exec(info)?.[1] ?? "unknown";
    return { version: field("redis_version"), aofEnabled: field("aof_enabled") };
  } finally {
    client.disconnect();
  }
}
