import { expect, it } from "vitest";
import { existsSync } from "node:fs";
import pg from "pg";
import { DatabaseNotFoundError, PoolClosedError, ValidationError } from "../src/core/errors.js";
import { pino } from "pino";
import { connect } from "../src/api/taskpool.js";
import { ManualClock } from "../src/core/clock.js";
import { eventually } from "./helpers/logs.js";
import { createPostgres, PG_URL, removeSqliteFiles, sqlitePath } from "./helpers/stores.js";

it("connect() gives producers and operators the registry and enqueue in a few words", async () => {
  const pool = await connect("sqlite::memory:");
  try {
    const type = await pool.registerTaskType({
      name: "product_resync",
      paramsSchema: { type: "object", properties: { storeId: { type: "integer" } }, required: ["storeId"] },
      priority: 5,
    });
    expect(type).toMatchObject({ name: "product_resync", version: 1, priority: 5 });
    const task = await pool.enqueue("product_resync", { storeId: 42 }, { concurrencyKey: "store:42" });
    expect(task).toMatchObject({ params: { storeId: 42 }, priority: 5, taskTypeVersion: 1, concurrencyKey: "store:42" });
    const error = await pool.enqueue("product_resync", { storeId: "42" }).catch((e) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.message).toBe("Invalid params for product_resync v1: params.storeId: must be integer");
  } finally {
    await pool.close();
  }
});

it("params and results take an undefined property and a readonly array, as ordinary code builds them, with no cast; JSON leaves the undefined out", async () => {
  const pool = await connect("sqlite::memory:");
  try {
    // Type-checked by `npm run typecheck`: the Json type refused both, though the runtime took them.
    const maybe: string | undefined = undefined;
    const task = await pool.enqueue("report", { storeId: 1, full: maybe, tags: ["a", "b"] as const });
    const worker = pool.worker({ roles: ["report"], heartbeatThread: false, handlers: { report: async () => ({ found: 1, next: maybe, pages: [1, 2] as const }) } });
    await worker.start();
    const done = await pool.waitFor(task.id, { signal: AbortSignal.timeout(10_000) });
    expect([done.params, done.result]).toEqual([{ storeId: 1, tags: ["a", "b"] }, { found: 1, pages: [1, 2] }]);
  } finally {
    await pool.close();
  }
});

it("requireRegistered refuses unregistered types, for tasks and follow-ups alike; limits are the pool's to set", async () => {
  const pool = await connect("sqlite::memory:", { requireRegistered: true, limits: { paramsBytes: 100 } });
  try {
    const refused = await pool.enqueue("prodcut_resync", {}).catch((e) => e);
    expect(refused).toBeInstanceOf(ValidationError);
    expect(refused.message).toMatch(/^Task type "prodcut_resync" is not registered, and this pool requires registered types \(requireRegistered\): register it first \(pool\.registerTaskType or/);
    await pool.registerTaskType({ name: "product_resync" });
    expect((await pool.enqueue("product_resync", { storeId: 1 })).taskTypeVersion).toBe(1);
    const big = await pool.enqueue("product_resync", { blob: "x".repeat(100) }).catch((e) => e);
    expect(big.message).toMatch(/^Invalid params: params is 111 bytes as JSON, over the limit of 100 bytes \(limits\.paramsBytes\)/);
    expect((await pool.counts()).byStatus.pending).toBe(1);
    // A schedule of a type it does not know would create nothing at each of its runs: refused as it is saved.
    const schedule = await pool.schedule({ name: "nightly", taskType: "prodcut_resync", cron: "0 0 * * *" }).catch((e) => e);
    expect(schedule.message).toMatch(/^Task type "prodcut_resync" is not registered/);
    expect(await pool.schedules.list()).toEqual([]);
  } finally {
    await pool.close();
  }
  await expect(connect("sqlite::memory:", { limits: { resultBytes: 0 } })).rejects.toThrow(/Invalid limits\.resultBytes: 0/);
});

it("a worker on a pool with its own clock beats on that clock, not the system's", async () => {
  const path = sqlitePath();
  const clock = new ManualClock(new Date("2040-01-01T00:00:00Z"));
  const pool = await connect(`sqlite:${path}`, { clock });
  try {
    const task = await pool.enqueue("hold", {});
    const worker = pool.worker({
      roles: ["hold"],
      heartbeatIntervalMs: 50,
      leaseSeconds: 30,
      logger: pino({ level: "silent" }),
      handlers: { hold: (_params, ctx) => new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve())) },
    });
    await worker.start();
    await eventually(async () => (await pool.get(task.id))?.status === "running", 5000, "the task to run");
    clock.advance(60_000);
    // The next beats renew the lease from the pool's clock (a thread on the system clock would set it to 2026).
    await eventually(async () => ((await pool.get(task.id))?.leaseExpiresAt?.getTime() ?? 0) >= Date.parse("2040-01-01T00:01:00Z"), 5000, "a beat on the pool's clock");
    await worker.stop(0);
  } finally {
    await pool.close();
    removeSqliteFiles(path);
  }
});

it("close() stops the pool's workers first: what they run is completed, and they end inactive", async () => {
  const path = sqlitePath();
  const pool = await connect(`sqlite:${path}`);
  try {
    const task = await pool.enqueue("slow", {});
    const logs: string[] = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => logs.push(JSON.parse(line).msg) });
    const worker = pool.worker({ roles: ["slow"], heartbeatIntervalMs: 50, logger, handlers: { slow: () => new Promise((r) => setTimeout(() => r({ done: true }), 300)) } });
    await worker.start();
    await eventually(async () => (await pool.get(task.id))?.status === "running", 5000, "the task to run");
    await pool.close();
    const after = await connect(`sqlite:${path}`);
    try {
      expect(await after.get(task.id)).toMatchObject({ status: "completed", result: { done: true } });
      expect((await after.workers()).workers.map((w) => w.status)).toEqual(["inactive"]);
      expect(logs).toEqual([]);
    } finally {
      await after.close();
    }
  } finally {
    removeSqliteFiles(path);
  }
});

it("refuses a second worker with the id of one of the pool's workers that has not stopped: either's shutdown would give back the other's tasks", async () => {
  const pool = await connect("sqlite::memory:");
  try {
    const handlers = { crawl: async () => {} };
    const first = pool.worker({ roles: ["crawl"], handlers, workerId: "crawler-1", heartbeatThread: false });
    const twin = (() => {
      try {
        pool.worker({ roles: ["crawl"], handlers, workerId: "crawler-1" });
      } catch (error) {
        return error;
      }
    })();
    expect(twin).toBeInstanceOf(ValidationError);
    expect((twin as Error).message).toMatch(/^Invalid workerId "crawler-1": another worker of this pool has it and has not stopped/);
    expect(pool.worker({ roles: ["crawl"], handlers, workerId: "crawler-2", heartbeatThread: false }).id).toBe("crawler-2");
    await first.start();
    await first.stop();
    // Stopped: its id is free again (a worker restarted in the same process).
    expect(pool.worker({ roles: ["crawl"], handlers, workerId: "crawler-1", heartbeatThread: false }).id).toBe("crawler-1");
  } finally {
    await pool.close();
  }
});

it("a worker whose start is refused (its metadata over the pool's limit) is left stopped: its id free, its stop clean, nothing registered", async () => {
  const pool = await connect("sqlite::memory:", { limits: { metadataBytes: 100 } });
  try {
    const handlers = { crawl: async () => {} };
    const refused = pool.worker({ roles: ["crawl"], handlers, workerId: "crawler-1", heartbeatThread: false, metadata: { note: "x".repeat(200) } });
    await expect(refused.start()).rejects.toThrow(/^Invalid metadata: metadata is 211 bytes as JSON, over the limit of 100 bytes \(limits\.metadataBytes\)/);
    expect(refused.stopped).toBe(true);
    await refused.stop();
    // It said the registry still showed it active (it was never in it), and that it had not stopped cleanly.
    expect(refused.stoppedCleanly).toBe(true);
    await expect(refused.start()).rejects.toThrow(/^Worker crawler-1 was already stopped/);
    expect((await pool.workers()).workers).toEqual([]);
    const again = pool.worker({ roles: ["crawl"], handlers, workerId: "crawler-1", heartbeatThread: false });
    await again.start();
    await again.stop();
    expect((await pool.workers()).workers.map((w) => [w.workerId, w.status])).toEqual([["crawler-1", "inactive"]]);
  } finally {
    await pool.close();
  }
});

it("a worker that stopped is let go by its pool: a process making worker after worker on one pool holds only the live ones", async () => {
  const pool = await connect("sqlite::memory:");
  const runners = (pool as unknown as { runners: Set<unknown> }).runners;
  try {
    for (let i = 0; i < 20; i++) {
      const worker = pool.worker({ roles: ["crawl"], handlers: { crawl: async () => {} }, workerId: `batch-${i}`, heartbeatThread: false });
      await worker.start();
      await worker.stop();
    }
    const live = pool.worker({ roles: ["crawl"], handlers: { crawl: async () => {} }, workerId: "live", heartbeatThread: false });
    await live.start();
    // Every worker made was kept, stopped or not, until close(): 21 here, one per deploy or batch in a long-lived process.
    expect([...runners]).toEqual([live]);
  } finally {
    await pool.close();
  }
});

it("create: false refuses a database taskpool never set up, creating nothing, and opens one it did", async () => {
  const path = sqlitePath();
  const missing = await connect(`sqlite:${path}`, { create: false }).catch((e) => e);
  expect(missing).toBeInstanceOf(DatabaseNotFoundError);
  expect(missing.message).toBe(`No taskpool database: the SQLite file ${path} does not exist or taskpool never set it up`);
  expect(existsSync(path)).toBe(false);

  const { store, cleanup } = await createPostgres();
  const { schema } = store;
  const typo = `${schema}_typo`;
  try {
    const refused = await connect(PG_URL, { schema: typo, create: false }).catch((e) => e);
    expect(refused).toBeInstanceOf(DatabaseNotFoundError);
    expect(refused.schema).toBe(typo);
    expect(refused.taskpoolSchemas).toContain(schema);
    expect(refused.taskpoolSchemas).not.toContain(typo);
    expect(refused.message).toMatch(new RegExp(`^No taskpool database: the PostgreSQL schema ${typo} does not exist or taskpool never set it up; taskpool's schemas in that database: .*\\b${schema}\\b`));
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      expect((await admin.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [typo])).rowCount).toBe(0);
    } finally {
      await admin.end();
    }
    // A schema taskpool set up opens as ever.
    const pool = await connect(PG_URL, { schema, create: false });
    expect((await pool.counts()).byStatus.pending).toBe(0);
    await pool.close();
  } finally {
    await cleanup();
  }
});

it("options are checked where they are given: a misspelt or mistyped connect, coordinator or worker option is refused, naming it", async () => {
  // A misspelt schema was ignored in silence: the default schema was opened, or created.
  const misspelt = await connect("sqlite::memory:", { shema: "audit" } as never).catch((e) => e);
  expect(misspelt).toBeInstanceOf(ValidationError);
  expect(misspelt.message).toBe("Invalid connect option shema: unknown option (the options are schema, apiKey, retryForMs, callTimeoutMs, clock, migrate, create, limits, requireRegistered, statementTimeoutMs)");
  expect((await connect("sqlite::memory:", { create: "no" } as never).catch((e) => e)).message).toBe('Invalid connect option create: "no" (must be true or false)');
  const pool = await connect("sqlite::memory:");
  try {
    const refusal = (make: () => unknown) => {
      try {
        make();
      } catch (error) {
        expect(error).toBeInstanceOf(ValidationError);
        return (error as Error).message;
      }
      throw new Error("accepted");
    };
    expect(refusal(() => pool.coordinator({ sweepIntervalMS: 5 } as never))).toMatch(/^Invalid coordinator option sweepIntervalMS: unknown option \(the options are sweepIntervalMs, /);
    // A bad policy was refused by every sweep, after start(): no dead worker's task was ever recovered.
    expect(refusal(() => pool.coordinator({ recoveryPolicies: { crawl: "explode" } } as never))).toBe('Invalid coordinator options: recoveryPolicies.crawl: must be one of retry, fail (got "explode")');
    expect(refusal(() => pool.coordinator({ sweepIntervalMs: "1000" } as never))).toBe('Invalid coordinator option sweepIntervalMs: "1000" (must be a number of milliseconds)');
    expect(refusal(() => pool.worker({ roles: "crawl" } as never))).toBe('Invalid worker option roles: "crawl" (must be an array of task types, such as ["crawl"])');
    // Each of these was a TypeError from inside (destructuring null, reading undefined.roles, logger.child).
    expect(refusal(() => pool.coordinator(null as never))).toMatch(/^Invalid coordinator options: expected an object such as \{ sweepIntervalMs: … \} \(got null\)/);
    expect(refusal(() => pool.worker(undefined as never))).toMatch(/^Invalid worker options: none given; pass at least \{ roles: \["crawl"\], handlers: /);
    expect(refusal(() => pool.worker(null as never))).toMatch(/^Invalid worker options: expected an object such as \{ roles: … \} \(got null\)/);
    expect(refusal(() => pool.worker({ roles: ["crawl"], handlers: { crawl: async () => {} }, logger: {} as never }))).toMatch(/^Invalid worker option logger: not a logger/);
    expect((await pool.enqueue("crawl", {}, null as never).catch((e) => e)).message).toBe("Invalid enqueue options: expected an object such as { priority: 5 } (got null)");
    expect((await connect("sqlite::memory:", null as never).catch((e) => e)).message).toMatch(/^Invalid connect options: expected an object/);
    expect((await connect(5 as never).catch((e) => e)).message).toMatch(/^Unsupported database URL "5"/);
    // A misspelt limit was ignored: the caller believed it raised.
    expect((await connect("sqlite::memory:", { limits: { paramBytes: 10 } } as never).catch((e) => e)).message).toBe(
      "Invalid limit paramBytes: unknown option (the options are paramsBytes, checkpointBytes, resultBytes, metadataBytes)",
    );
    const defaulted = await connect("sqlite::memory:", { limits: { paramsBytes: undefined } });
    expect(defaulted.protocol.limits.paramsBytes).toBe(1024 * 1024);
    await defaulted.close();
  } finally {
    await pool.close();
  }
});

it.each(["sqlite", "postgres"])("a closed pool on %s refuses every call with PoolClosedError, and makes no worker or coordinator; closing again does nothing", async (kind) => {
  const pg = kind === "postgres" ? await createPostgres() : null;
  const pool = pg ? await connect(PG_URL, { schema: pg.schema }) : await connect("sqlite::memory:");
  try {
    await pool.enqueue("crawl");
    await pool.close();
    // They met the driver's own error ("The database connection is not open", "Cannot use a pool after calling end on the pool").
    for (const call of [() => pool.enqueue("crawl"), () => pool.list(), () => pool.counts(), () => pool.protocol.claim({ workerId: "w1" })]) {
      const error = await call().catch((e) => e);
      expect(error).toBeInstanceOf(PoolClosedError);
      expect(error.message).toMatch(/^This pool was closed \(close\(\) was called\), so \w+\(\) cannot run on it; connect\(\) again for a new pool$/);
    }
    expect(() => pool.worker({ roles: ["crawl"], handlers: { crawl: async () => {} } })).toThrow(PoolClosedError);
    expect(() => pool.coordinator()).toThrow("This pool was closed (close() was called), so a coordinator cannot run on it; connect() again for a new pool");
    await pool.close();
  } finally {
    await pg?.cleanup();
  }
});

it("a field under another queue's name, or in another casing, is refused naming the one meant", async () => {
  const pool = await connect("sqlite::memory:");
  try {
    await expect(pool.enqueue("crawl", {}, { runAt: new Date() } as never)).rejects.toThrow(/runAt: Unexpected property \(got .*\); did you mean scheduledFor or delaySeconds\?/);
    await expect(pool.enqueue("crawl", {}, { max_attempts: 3 } as never)).rejects.toThrow(/max_attempts: Unexpected property \(got 3\); did you mean maxAttempts\?/);
    // Nothing like it: the fields are listed.
    await expect(pool.enqueue("crawl", {}, { colour: "red" } as never)).rejects.toThrow(/colour: Unexpected property \(got "red"\); the fields are taskType, params, priority/);
    expect((await pool.counts()).byStatus.pending).toBe(0);
  } finally {
    await pool.close();
  }
});

it("connect() refuses a schema for SQLite, which has none: it would pass for a second pool in the same file", async () => {
  await expect(connect("sqlite::memory:", { schema: "tenant_b" })).rejects.toThrow("Invalid connect option schema: a SQLite database has no schemas (it is PostgreSQL's option); use another file for another pool");
});

it("waitFor() resolves with the task once it has finished, waits through retries, and stops at its signal", async () => {
  const pool = await connect("sqlite::memory:");
  let runs = 0;
  const worker = pool.worker({
    roles: ["flaky", "slow"],
    pollIntervalMs: 20,
    logger: (await import("pino")).pino({ level: "silent" }),
    handlers: {
      async flaky() {
        if (++runs === 1) throw new Error("first run fails");
        return { runs };
      },
      slow: (_params, ctx) => new Promise((resolve) => ctx.signal.addEventListener("abort", () => resolve(null))),
    },
  });
  try {
    const flaky = await pool.enqueue("flaky", {}, { backoff: { baseSeconds: 0.05, factor: 1, maxSeconds: 1, jitter: 0 } });
    await worker.start();
    // The first failure has attempts left: not the end.
    expect(await pool.waitFor(flaky.id)).toMatchObject({ id: flaky.id, status: "completed", attempts: 2, result: { runs: 2 } });
    const slow = await pool.enqueue("slow", {});
    const waited = Date.now();
    await expect(pool.waitFor(slow.id, { signal: AbortSignal.timeout(300) })).rejects.toMatchObject({ name: "TimeoutError" });
    expect(Date.now() - waited).toBeLessThan(2000);
    const cancelling = pool.waitFor(slow.id);
    await pool.cancel(slow.id);
    expect(await cancelling).toMatchObject({ status: "cancelled" });
    await expect(pool.waitFor(999)).rejects.toThrow("Task 999 does not exist");
  } finally {
    await worker.stop(0);
    await pool.close();
  }
});
