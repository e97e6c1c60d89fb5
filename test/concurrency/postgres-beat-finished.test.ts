import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { createPostgres, type TestStore } from "../helpers/stores.js";

/**
 * A worker's heartbeat that lists a lease whose task the worker completes at the same moment: the
 * completion commits while the beat runs, so the beat's renewal skips the task, and its check for
 * tasks finished under the lease read them as they were when it began, still running. The task was
 * reported lost (and counted in taskpool_lease_lost_total): 191 of 300 such races over HTTP.
 */
describe("PostgreSQL worker heartbeat racing its own completion", () => {
  let db: TestStore<PostgresStore>;
  let beats: PostgresStore;
  beforeAll(async () => {
    db = await createPostgres();
    beats = await db.another();
  });
  afterAll(async () => {
    await db.cleanup();
  });

  it("sequential: a beat after the completion, and one before it, report nothing lost", async () => {
    await db.store.enqueue({ taskType: "seq" });
    const [[task]] = await db.store.claimMany([{ workerId: "w2", taskTypes: ["seq"], start: true }]);
    const leases = [{ taskId: task.id, leaseToken: task.leaseToken }];
    expect((await beats.workerHeartbeat({ workerId: "w2", roles: ["seq"], leases })).lost).toEqual([]);
    await db.store.completeMany([{ id: task.id, lease: { workerId: task.workerId, leaseToken: task.leaseToken }, result: null }]);
    expect((await beats.workerHeartbeat({ workerId: "w2", roles: ["seq"], leases })).lost).toEqual([]);
  });

  it("never reports lost a task its worker completed while the beat ran", async () => {
    const lost: number[] = [];
    for (let i = 0; i < 60; i++) {
      await db.store.enqueue({ taskType: "race" });
      const [[task]] = await db.store.claimMany([{ workerId: "w1", taskTypes: ["race"], start: true }]);
      const lease = { workerId: task.workerId, leaseToken: task.leaseToken };
      const [beat] = await Promise.all([
        beats.workerHeartbeat({ workerId: "w1", roles: ["race"], leases: [{ taskId: task.id, leaseToken: task.leaseToken }] }),
        db.store.completeMany([{ id: task.id, lease, result: null }]),
      ]);
      lost.push(...beat.lost);
      expect((await db.store.get(task.id))?.status).toBe("completed");
    }
    expect(lost).toEqual([]);
  });
});
