import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { connect } from "../src/api/taskpool.js";
import { eventually } from "./helpers/logs.js";
import { removeSqliteFiles, sqlitePath } from "./helpers/stores.js";
import { CLI, taskpool } from "./helpers/cli.js";


describe("taskpool coordinator retention flags", () => {
  const path = sqlitePath();
  const db = `sqlite:${path}`;
  afterEach(() => removeSqliteFiles(path));

  it("refuses bad ages before opening the database, saying what would work", async () => {
    const bad = await taskpool("coordinator", "--retain-completed", "a week", "--db", db).catch((e) => e);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/"a week" is not an age: write a number with a unit, e\.g\. 7d/);
    const shorter = await taskpool("serve", "--coordinator", "--retain-failed", "1d", "--db", db).catch((e) => e);
    expect(shorter.stderr).toBe(
      "taskpool: Invalid coordinator option --retain-failed: 1d (shorter than --retain-completed (7d): keep failed tasks at least as long, or leave it out to keep them until retried)\n",
    );
  }, 30_000);

  it("refuses sweep timings that do not fit together, naming the flags, before a database is created", async () => {
    for (const command of ["serve", "coordinator"]) {
      const refused = await taskpool(command, "--dead-after", "10", "--db", db).catch((e) => e);
      expect([refused.code, refused.stderr]).toEqual([
        1,
        "taskpool: Invalid coordinator options: --dead-after (10) must not be shorter than --stale-after (60000); raise --dead-after or lower --stale-after\n",
      ]);
      const fast = await taskpool(command, "--sweep-interval", "5", "--db", db).catch((e) => e);
      expect(fast.stderr).toBe("taskpool: Invalid coordinator option --sweep-interval: 5 (at least 10 ms)\n");
      expect(existsSync(path)).toBe(false);
    }
  }, 30_000);

  it("a coordinator with --retain-completed 1s deletes tasks finished over a second ago; --no-retention keeps them", async () => {
    const pool = await connect(db);
    try {
      await pool.enqueueMany([{ taskType: "a" }, { taskType: "a" }]);
      for (const t of await pool.protocol.claim({ workerId: "w1", limit: 2 })) await pool.protocol.complete(t.id, t);
      const run = async (...flags: string[]) => {
        const child = spawn(process.execPath, [CLI, "coordinator", "--db", db, "--sweep-interval", "200", ...flags], { stdio: "ignore" });
        return { stop: () => new Promise((r) => (child.once("exit", r), child.kill("SIGTERM"))) };
      };
      const finishedAt = Date.now();
      // --retain-completed beside it is refused (test/cli.test.ts): the pruner below shows what 1 s deletes.
      const keeper = await run("--no-retention");
      // A sweep well past the age the pruner below is given: it deletes them.
      await eventually(async () => ((await pool.protocol.leadershipStatus("coordinator")).lastSweptAt?.getTime() ?? 0) > finishedAt + 1500, 20_000, "a sweep 1.5 s after");
      await keeper.stop();
      expect((await pool.counts()).byStatus.completed).toBe(2);
      const pruner = await run("--retain-completed", "1s", "--prune-batch", "1");
      await eventually(async () => ((await pool.counts()).byStatus.completed ?? 0) === 0, 20_000, "the finished tasks to be deleted");
      await pruner.stop();
    } finally {
      await pool.close();
    }
  }, 60_000);
});
