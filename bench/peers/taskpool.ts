/**
 * taskpool through its public API, on PostgreSQL (a fresh schema per run) and on SQLite (a fresh
 * temp file per run). Worker options are the defaults apart from concurrency, logger included:
 * its output goes where the child's stdout goes (/dev/null), as a deployment's logs go to a file.
 */
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type Taskpool, type Worker } from "../../src/index.js";
import { VERSION } from "../../src/version.js";
import { dropSchema, PG_URL, removeSqliteFiles } from "../lib/database.js";
import { CONCURRENCY, type Consumer, type OnStart, type Payload, type Producer, QUEUE, type System } from "./system.js";

const SETTINGS =
  `pool.worker({ roles: ["${QUEUE}"], concurrency: ${CONCURRENCY} }); every other option at its default ` +
  "(pollIntervalMs 5000 with wake-ups, heartbeat thread, default pino logger at info)";

/** Where one run's tasks live, and how to delete them. */
interface Location {
  url: string;
  schema?: string;
  remove(): Promise<void>;
}

function producer(location: Location): Producer {
  let pool: Taskpool | undefined;
  return {
    async open() {
      pool = await connect(location.url, { schema: location.schema });
    },
    async enqueueMany(payloads: Payload[]) {
      await pool!.enqueueMany(payloads.map((params) => ({ taskType: QUEUE, params })));
    },
    async enqueue(payload: Payload) {
      await pool!.enqueue(QUEUE, payload);
    },
    async remaining() {
      const { byStatus } = await pool!.counts();
      return Object.values(byStatus).reduce((sum, n) => sum + n, 0) - byStatus.completed;
    },
    async close() {
      try {
        await pool?.close();
      } finally {
        await location.remove();
      }
    },
  };
}

function consumer(location: Location, onStart: OnStart): Consumer {
  let pool: Taskpool | undefined;
  let worker: Worker | undefined;
  return {
    async prepare() {
      pool = await connect(location.url, { schema: location.schema, migrate: false });
      worker = pool.worker({
        roles: [QUEUE],
        concurrency: CONCURRENCY,
        handlers: {
          [QUEUE]: async (params) => {
            onStart(params as Payload);
          },
        },
      });
    },
    async start() {
      await worker!.start();
    },
    async stop() {
      await worker?.stop();
      await pool?.close();
    },
  };
}

const postgres = (schema: string): Location => ({ url: PG_URL, schema, remove: () => dropSchema(schema) });

const sqlite = (namespace: string): Location => {
  const path = join(tmpdir(), `${namespace}.db`);
  return { url: `sqlite:${path}`, remove: async () => removeSqliteFiles(path) };
};

export const taskpoolPostgres: System = {
  name: "taskpool-postgres",
  version: () => VERSION,
  settings: SETTINGS,
  producer: (namespace) => producer(postgres(namespace)),
  consumer: (namespace, onStart) => consumer(postgres(namespace), onStart),
};

export const taskpoolSqlite: System = {
  name: "taskpool-sqlite",
  version: () => VERSION,
  settings: `${SETTINGS}; a temp file, the bench and the worker in separate processes`,
  producer: (namespace) => producer(sqlite(namespace)),
  consumer: (namespace, onStart) => consumer(sqlite(namespace), onStart),
};
