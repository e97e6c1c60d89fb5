import { afterEach, describe, expect, it } from "vitest";
import type { Coordinator } from "../../src/coordinator/coordinator.js";
import { createPostgres, createSqlite, type TestStore } from "../helpers/stores.js";
import { ChaosCluster } from "./cluster.js";
import { CHAOS_COORDINATION, report, scale } from "./settings.js";

/**
 * Scenario 1, the kill storm: N step tasks, W worker processes, one of them SIGKILLed at random
 * every KILL_EVERY_MS and replaced, a coordinator on short thresholds. Every task must complete
 * exactly once, every resumed handler must start from its predecessor's last checkpoint, and no
 * write of a killed worker's lease may be accepted after its task moved on (the history checker).
 * CI runs a short storm; `npm run chaos` runs 10,000 tasks.
 */
// Enough for each kill to catch several of a worker's eight running tasks mid-way, and for a few kills
// to land; `npm run chaos` is the long run.
const TASKS = scale("CHAOS_TASKS", 600);
const WORKERS = scale("CHAOS_WORKERS", 4);
const KILL_EVERY_MS = scale("CHAOS_KILL_EVERY_MS", 2000);
// A guard against a storm that never drains, not a speed target: 1,200 tasks took 40–56 s on a busy 2-core machine,
// and 400 took 43 s on one whose load (12) kept replacements from starting as fast as the kills came.
const DEADLINE_MS = scale("CHAOS_DEADLINE_MS", 120_000);

describe.each([
  ["postgres", createPostgres],
  ["sqlite", createSqlite],
] as const)("kill storm on %s", (name, create) => {
  let handle: TestStore;
  let cluster: ChaosCluster;
  let coordinator: Coordinator | null = null;
  afterEach(async () => {
    await coordinator?.stop();
    await cluster?.close();
    await handle?.cleanup();
  });

  it(`${TASKS} tasks, ${WORKERS} workers, a SIGKILL every ${KILL_EVERY_MS} ms: all complete exactly once`, { timeout: DEADLINE_MS + 60_000 }, async () => {
    handle = await create();
    cluster = await ChaosCluster.open(handle);
    await cluster.enqueueSteps(TASKS, { steps: 4, stepMs: 40 });
    await Promise.all(Array.from({ length: WORKERS }, () => cluster.startWorker({ CONCURRENCY: "8" })));
    coordinator = cluster.pool.coordinator(CHAOS_COORDINATION);
    coordinator.start();

    const started = Date.now();
    let kills = 0;
    let storming = true;
    // Replacements start in the background, so the kills keep their pace while start-ups keep up; a kill
    // waits for the cluster to be whole again, else on a loaded machine (load 10+) kills outran start-ups
    // and the live workers fell to none, the storm's deadline passing with nothing left to run the tasks.
    const replacements: Promise<unknown>[] = [];
    const storm = (async () => {
      while (storming) {
        await new Promise((r) => setTimeout(r, KILL_EVERY_MS));
        const live = cluster.live();
        if (!storming || live.length < WORKERS) continue;
        await cluster.kill(live[Math.floor(Math.random() * live.length)].id);
        kills++;
        replacements.push(cluster.startWorker({ CONCURRENCY: "8" }));
      }
    })();
    try {
      await cluster.drained(DEADLINE_MS);
    } finally {
      storming = false;
      await storm;
      await Promise.allSettled(replacements);
    }
    const seconds = (Date.now() - started) / 1000;
    await coordinator.stop();

    const summary = await cluster.check();
    report(`kill storm on ${name}`, { seconds, kills, ...summary });
    expect(summary.violations.slice(0, 20)).toEqual([]);
    expect(summary.completed).toBe(TASKS);
    expect(cluster.crashed()).toEqual([]);
    expect(kills).toBeGreaterThan(0);
  });
});
