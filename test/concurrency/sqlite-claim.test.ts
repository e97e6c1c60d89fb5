import { fileURLToPath } from "node:url";
import { describe, it, type TestContext } from "vitest";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { createSqlite, type TestStore } from "../helpers/stores.js";
import { claimedOnceEach } from "./audit.js";
import { script, startTogether } from "../helpers/processes.js";

const CLAIMER = fileURLToPath(new URL("./sqlite-claimer.ts", import.meta.url));

/** Starts `count` claimer processes on one file; they begin together once all have loaded. */
async function claimers(path: string, count: number, mode: "drain" | "race"): Promise<number[][]> {
  const lines = await startTogether(Array.from({ length: count }, (_, n) => [script(CLAIMER), path, `claimer-${n}`, mode]), 120_000);
  return lines.map((line) => JSON.parse(line));
}

/** A file of the test's own, removed when the test ends (the hook from the test's own context: they run at once). */
async function fileOfItsOwn(onTestFinished: TestContext["onTestFinished"]): Promise<TestStore<SqliteStore>> {
  const handle = await createSqlite();
  onTestFinished(() => handle.cleanup());
  return handle;
}

// The two tests run at once, each on its own file: most of either is its processes starting.
describe.concurrent("SQLite claims from separate processes on one file", () => {
  // 1,000 tasks are 60-odd claims per process, all 16 contending throughout; 5,000 took a minute on a
  // loaded machine, each completion an fsync waiting its turn for the file's one write lock.
  it("16 processes drain 1,000 tasks: each claimed exactly once, none left behind", async ({ expect, onTestFinished }) => {
    const handle = await fileOfItsOwn(onTestFinished);
    await handle.store.enqueueMany(Array.from({ length: 1000 }, (_, i) => ({ taskType: "drain", params: { i } })));
    const seen = await claimers(handle.store.db.name, 16, "drain");
    const all = seen.flat();
    expect(all).toHaveLength(1000);
    expect(new Set(all).size).toBe(1000);
    expect(seen.filter((ids) => ids.length > 0).length).toBeGreaterThan(8);
    expect((await handle.store.counts()).byStatus).toMatchObject({ pending: 0, claimed: 0, running: 0, completed: 1000 });
    await claimedOnceEach(handle.store, 1000);
  }, 120_000);

  it("10 processes race for 5 tasks: exactly 5 win", async ({ expect, onTestFinished }) => {
    const handle = await fileOfItsOwn(onTestFinished);
    await handle.store.enqueueMany(Array.from({ length: 5 }, () => ({ taskType: "race" })));
    const results = await claimers(handle.store.db.name, 10, "race");
    expect(results.filter((r) => r.length === 1)).toHaveLength(5);
    expect(results.filter((r) => r.length === 0)).toHaveLength(5);
    expect(new Set(results.flat()).size).toBe(5);
  }, 120_000);
});
