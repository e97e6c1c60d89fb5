import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { createSqlite, type TestStore } from "../helpers/stores.js";
import { claimedOnceEach } from "./audit.js";
import { script } from "../helpers/processes.js";

const run = promisify(execFile);
const CLAIMER = fileURLToPath(new URL("./sqlite-claimer.ts", import.meta.url));

/** Starts `count` claimer processes on one file; they begin together once all have loaded. */
async function claimers(path: string, count: number, mode: "drain" | "race"): Promise<number[][]> {
  const startAt = Date.now() + 3000;
  const outputs = await Promise.all(
    Array.from({ length: count }, (_, n) =>
      run(process.execPath, [script(CLAIMER), path, `claimer-${n}`, mode, String(startAt)], { timeout: 120_000 }),
    ),
  );
  return outputs.map((o) => JSON.parse(o.stdout.trim().split("\n").at(-1) as string));
}

describe("SQLite claims from separate processes on one file", () => {
  let handle: TestStore<SqliteStore>;
  beforeEach(async () => {
    handle = await createSqlite();
  });
  afterEach(() => handle.cleanup());

  it("16 processes drain 5,000 tasks: each claimed exactly once, none left behind", async () => {
    await handle.store.enqueueMany(Array.from({ length: 5000 }, (_, i) => ({ taskType: "drain", params: { i } })));
    const seen = await claimers(handle.store.db.name, 16, "drain");
    const all = seen.flat();
    expect(all).toHaveLength(5000);
    expect(new Set(all).size).toBe(5000);
    expect(seen.filter((ids) => ids.length > 0).length).toBeGreaterThan(8);
    expect((await handle.store.counts()).byStatus).toMatchObject({ pending: 0, claimed: 0, running: 0, completed: 5000 });
    await claimedOnceEach(handle.store, 5000);
  }, 120_000);

  it("10 processes race for 5 tasks: exactly 5 win", async () => {
    await handle.store.enqueueMany(Array.from({ length: 5 }, () => ({ taskType: "race" })));
    const results = await claimers(handle.store.db.name, 10, "race");
    expect(results.filter((r) => r.length === 1)).toHaveLength(5);
    expect(results.filter((r) => r.length === 0)).toHaveLength(5);
    expect(new Set(results.flat()).size).toBe(5);
  }, 120_000);
});
