import Database from "better-sqlite3";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { ValidationError } from "../../src/core/errors.js";
import type { ScheduleDefinition } from "../../src/core/schedule.js";
import { createPostgres, createSqlite, PG_URL, type TestStore } from "../helpers/stores.js";

const DISCOVERY: ScheduleDefinition = { name: "discovery", taskType: "store_discovery", cron: "0 0 * * *" };
const RESYNC: ScheduleDefinition = { name: "resync", taskType: "product_resync", cron: "0 6 * * *", fanOut: { fromResults: { schedule: "discovery", field: "ids" } } };
const REFUSED = /^Invalid fanOut\.fromResults\.schedule: there is no schedule "discovery" whose last run's results could hold the keys/;

/**
 * A schedule reading another's results is saved only if that one exists when the save commits: a
 * delete of it committing while the save runs either refuses the save or, committing after it, is a
 * removal the reader's runs report. Checked before the save's transaction, the schedule was seen,
 * then deleted, and the reader saved naming a schedule that no longer existed.
 */
describe("a schedule's fan-out reading a schedule deleted as it is saved", () => {
  let handle: TestStore | undefined;
  const clients: pg.Client[] = [];
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.end().catch(() => {})));
    await handle?.cleanup();
    handle = undefined;
  });

  it("PostgreSQL: the save waits for the delete's transaction, then refuses, saving nothing", async () => {
    const h = (handle = await createPostgres());
    const store = new CheckedStore(h.store);
    await store.saveSchedule(DISCOVERY);
    const [holder, watcher] = [new pg.Client({ connectionString: PG_URL }), new pg.Client({ connectionString: PG_URL })];
    clients.push(holder, watcher);
    await Promise.all([holder.connect(), watcher.connect()]);
    await holder.query("BEGIN");
    await holder.query(`DELETE FROM "${h.schema}".schedules WHERE name = 'discovery'`);

    const saving = store.saveSchedule(RESYNC).then(
      () => "saved",
      (error: unknown) => error,
    );
    // Until the save waits on the deleted row, or is done (it did not look at the row in its transaction).
    await waitingOrDone(holder, watcher, [saving]);
    await holder.query("COMMIT");

    const outcome = await saving;
    expect(outcome).toBeInstanceOf(ValidationError);
    expect((outcome as Error).message).toMatch(REFUSED);
    expect(await h.store.listSchedules()).toEqual([]);
  });

  it("PostgreSQL: two schedules saved at once, each reading the other's results, do not deadlock", async () => {
    const h = (handle = await createPostgres());
    const [a, b] = await Promise.all([h.another(), h.another()]).then((stores) => stores.map((x) => new CheckedStore(x)));
    const reading = (name: string, schedule: string): ScheduleDefinition => ({ ...RESYNC, name, fanOut: { fromResults: { schedule, field: "ids" } } });
    await a.saveSchedule({ ...DISCOVERY, name: "a" });
    await a.saveSchedule(reading("b", "a"));
    const [holder, watcher] = [new pg.Client({ connectionString: PG_URL }), new pg.Client({ connectionString: PG_URL })];
    clients.push(holder, watcher);
    await Promise.all([holder.connect(), watcher.connect()]);
    // Both rows held from deletion (as a third such save would): a save that locked its own row against it
    // waited there, holding the other's, and the two saves then waited for each other.
    await holder.query("BEGIN");
    await holder.query(`SELECT 1 FROM "${h.schema}".schedules WHERE name IN ('a', 'b') FOR KEY SHARE`);
    const saves = [a.saveSchedule(reading("a", "b")), b.saveSchedule(reading("b", "a"))].map((p) => p.catch((error: unknown) => error));
    await waitingOrDone(holder, watcher, saves);
    await holder.query("COMMIT");

    expect(await Promise.all(saves)).toMatchObject([{ created: false }, { created: false }]);
    expect((await h.store.listSchedules()).map((s) => [s.name, s.fanOut?.fromResults?.schedule])).toEqual([["a", "b"], ["b", "a"]]);
  });

  it("PostgreSQL: a store of one connection saves a schedule reading another's results (its type read in the save's transaction)", async () => {
    const h = (handle = await createPostgres());
    const one = new CheckedStore(await h.another({ poolSize: 1 }));
    await one.saveSchedule(DISCOVERY);
    // A read on a second connection waited for the one the save's transaction held, until the pool gave up.
    const saved = await Promise.race([one.saveSchedule(RESYNC), new Promise((resolve) => setTimeout(() => resolve("still waiting after 5 s"), 5000))]);
    expect(saved).toMatchObject({ created: true });
  });

  it("SQLite: the save, waiting for the delete's write lock, refuses once it has it, saving nothing", async () => {
    const h = (handle = await createSqlite());
    const store = new CheckedStore(h.store);
    await store.saveSchedule(DISCOVERY);
    const other = new Database(h.url.slice("sqlite:".length));
    try {
      other.exec("BEGIN IMMEDIATE; DELETE FROM schedules WHERE name = 'discovery'");
      const saving = store.saveSchedule(RESYNC).then(
        () => "saved",
        (error: unknown) => error,
      );
      // The save is waiting for the write lock (it tries, pauses and tries again).
      await new Promise((r) => setTimeout(r, 50));
      other.exec("COMMIT");

      const outcome = await saving;
      expect(outcome).toBeInstanceOf(ValidationError);
      expect((outcome as Error).message).toMatch(REFUSED);
      expect(await h.store.listSchedules()).toEqual([]);
    } finally {
      other.close();
    }
  });
});

/** Resolves when a session waits on the holder's locks, or when every one of `pending` is done. */
async function waitingOrDone(holder: pg.Client, watcher: pg.Client, pending: Promise<unknown>[]): Promise<void> {
  let done = false;
  void Promise.all(pending).then(() => (done = true));
  const holderPid = (holder as unknown as { processID: number }).processID;
  const waiting = async () => (await watcher.query("SELECT 1 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))", [holderPid])).rows.length > 0;
  while (!done && !(await waiting())) await new Promise((r) => setTimeout(r, 10));
}
