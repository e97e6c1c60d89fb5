/**
 * Hosts whose clocks disagree with the database's. Only Date is faked (performance.now and the
 * timers stay real), as on a host whose wall clock is off or stepped: the PostgreSQL store must
 * still write and compare the database's time, which every other host shares.
 */
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { PostgresStore } from "../src/store/postgres/postgres-store.js";
import { envWith, taskpoolIn } from "./helpers/cli.js";
import { createPostgres, PG_URL, type TestStore } from "./helpers/stores.js";

/** libfaketime (Debian's faketime package): runs a real process on a clock that is off. */
const LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

const SKEW_MS = 300_000;

let admin: pg.Client;
beforeAll(async () => {
  admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
});
afterAll(async () => {
  await admin.end();
});

let opened: TestStore<PostgresStore> | null = null;
afterEach(async () => {
  vi.useRealTimers();
  await opened?.cleanup();
  opened = null;
});

/** A store opened on a host whose wall clock is `skewMs` off (ahead if positive). */
async function skewedStore(skewMs: number): Promise<TestStore<PostgresStore>> {
  vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + skewMs, shouldAdvanceTime: true });
  opened = await createPostgres();
  return opened;
}

/** Seconds from the database's now() to each of `columns` of task `id`, computed by the database. */
async function secondsFromNow(schema: string, id: number, columns: string[]): Promise<Record<string, number>> {
  const list = columns.map((c) => `extract(epoch FROM ${c} - now())::float8 AS ${c}`).join(", ");
  const { rows } = await admin.query(`SELECT ${list} FROM "${schema}".tasks WHERE id = $1`, [id]);
  return rows[0];
}

describe.each([
  ["ahead", SKEW_MS],
  ["behind", -SKEW_MS],
])("a PostgreSQL store on a host whose clock is 5 minutes %s", (_, skew) => {
  it("writes the database's time: a task is due at once, a lease lasts its length, a heartbeat is fresh", async () => {
    const { store, schema } = await skewedStore(skew);
    const { task } = await store.enqueue({ taskType: "t", params: {} });
    expect((await secondsFromNow(schema!, task.id, ["scheduled_for"])).scheduled_for).toBeCloseTo(0, 0);
    // A worker on the same host claims it at once (a host behind saw it as due 5 minutes later).
    const [claimed] = await store.claim({ workerId: "w", taskTypes: ["t"], leaseSeconds: 30 });
    expect(claimed?.id).toBe(task.id);
    expect((await secondsFromNow(schema!, task.id, ["lease_expires_at"])).lease_expires_at).toBeCloseTo(30, 0);
    await store.workerHeartbeat({ workerId: "w", roles: ["t"], capacity: 1, currentLoad: 1, tasksProcessed: 0, leases: [{ taskId: task.id, leaseToken: claimed.leaseToken }] });
    const { rows } = await admin.query(`SELECT extract(epoch FROM now() - last_seen_at)::float8 AS silent FROM "${schema}".workers`);
    expect(rows[0].silent).toBeCloseTo(0, 0);
    // A coordinator on that host: the worker that just beat is alive, its lease held.
    const swept = await store.sweep({ staleAfterSeconds: 5, deadAfterSeconds: 10, reservationSeconds: 30 });
    expect(swept).toMatchObject({ staleWorkers: [], deadWorkers: [], requeued: [] });
    // A task delayed by a minute is not claimable yet (a host ahead claimed it 4 minutes early).
    const { task: later } = await store.enqueue({ taskType: "later", params: {}, scheduledFor: new Date((await admin.query("SELECT now() + interval '1 minute' AS t")).rows[0].t) });
    expect(await store.claim({ workerId: "w", taskTypes: ["later"], leaseSeconds: 30 })).toEqual([]);
    expect((await store.get(later.id))?.status).toBe("pending");
  });

  it("counts a producer's delay from the database's now (taskpool enqueue --delay)", async () => {
    const { store, schema } = await skewedStore(skew);
    const { task } = await store.enqueue({ taskType: "t", delaySeconds: 60 });
    expect((await secondsFromNow(schema!, task.id, ["scheduled_for"])).scheduled_for).toBeCloseTo(60, 0);
  });
});

it("keeps the database's time when the host's wall clock is stepped while it runs", async () => {
  const { store, schema } = await skewedStore(0);
  await store.enqueue({ taskType: "t", params: {} });
  for (const step of [-SKEW_MS, 2 * SKEW_MS]) {
    vi.setSystemTime(Date.now() + step);
    const { task } = await store.enqueue({ taskType: "t", params: {} });
    expect((await secondsFromNow(schema!, task.id, ["scheduled_for"])).scheduled_for).toBeCloseTo(0, 0);
  }
});

it.skipIf(!existsSync(LIBFAKETIME))("taskpool enqueue --delay from a host 5 minutes behind makes the task due after the delay (libfaketime)", async () => {
  const { schema } = (opened = await createPostgres());
  const skewed = envWith({ LD_PRELOAD: LIBFAKETIME, FAKETIME: "-300s" });
  const { stdout } = await taskpoolIn(tmpdir(), skewed, "enqueue", "t", "--delay", "60", "--db", PG_URL, "--schema", schema!);
  const id = Number(/Enqueued task (\d+)/.exec(stdout)?.[1]);
  expect((await secondsFromNow(schema!, id, ["scheduled_for"])).scheduled_for).toBeCloseTo(60, 0);
});
