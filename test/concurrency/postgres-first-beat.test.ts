import { afterEach, describe, expect, it } from "vitest";
import { createPostgres, type TestStore } from "../helpers/stores.js";
import type { WorkerRecord } from "../../src/core/worker.js";

const WORKERS = 500;
const ROUNDS = 6;

/**
 * A new worker's first two beats, sent at once on two connections: one says its figures (a
 * registration), the other leaves them out (seed 000's bare beat). Whichever commits first, the
 * figures said are the ones kept: a bare beat that lost the race for the insert used to write the
 * defaults over them, and the worker then had no roles. SQLite has one writer at a time, so only
 * PostgreSQL can interleave them.
 */
describe("PostgreSQL: a new worker's first beats racing", () => {
  let handle: TestStore;
  afterEach(async () => {
    await handle?.cleanup();
  });

  it("keeps the figures one beat said, whatever the other left out", async () => {
    handle = await createPostgres();
    const full = handle.store;
    const bare = await handle.another({ poolSize: 1 });
    // Many workers per statement (a server's batch of beats), so the two statements overlap.
    for (let round = 0; round < ROUNDS; round++) {
      const ids = Array.from({ length: WORKERS }, (_, i) => `w${round}-${i}`);
      const said = full.workerHeartbeatMany(ids.map((workerId) => ({ workerId, roles: ["crawl"], capacity: 8, currentLoad: 2, tasksProcessed: 5 })));
      const left = bare.workerHeartbeatMany(ids.map((workerId) => ({ workerId })));
      await Promise.all([said, left]);
    }
    // Every worker, a page of the registry at a time (1,000 live ones a page at most).
    const registry: WorkerRecord[] = [];
    let cursor: string | undefined;
    do {
      const page = await full.listWorkers({ cursor });
      registry.push(...page.workers);
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
    expect(registry).toHaveLength(WORKERS * ROUNDS);
    const wrong = registry.filter((w) => w.roles.join() !== "crawl" || w.capacity !== 8 || w.currentLoad !== 2 || w.tasksProcessed !== 5);
    expect(wrong.map((w) => [w.workerId, w.roles, w.capacity, w.currentLoad, w.tasksProcessed])).toEqual([]);
  });
});
