/** What a heartbeat tells the worker it renewed: only the leases it listed, and not those the store said were lost. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BeatLoop, type LeaseRef } from "../../src/worker/heartbeats.js";
import { createSqlite, type TestStore } from "../helpers/stores.js";

describe("a heartbeat's renewals", () => {
  let handle: TestStore;
  beforeEach(async () => (handle = await createSqlite()));
  afterEach(async () => handle.cleanup());

  // The heartbeat thread beats with the state last posted to it, which after a freeze may lack a lease
  // claimed just before. Its success was taken to renew every lease the worker held, and a task held
  // ready past its lease's end (taken back meanwhile, maybe running elsewhere) started after the thaw.
  it("are the leases the beat listed that the store did not report lost, not every lease the worker holds", async () => {
    const { store } = handle;
    const beat = { workerId: "w", roles: ["crawl"], capacity: 3, currentLoad: 0, tasksProcessed: 0 };
    await store.workerHeartbeat(beat);
    await store.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }, { taskType: "crawl" }]);
    const [listed, unlisted, lostOne] = await store.claim({ workerId: "w", limit: 3 });
    await store.release(lostOne.id, lostOne);
    const reported: { renewed: LeaseRef[]; lost: LeaseRef[] } = { renewed: [], lost: [] };
    const lease = (t: typeof listed) => ({ taskId: t.id, leaseToken: t.leaseToken });
    const loop = new BeatLoop(store, () => ({ beat, leases: [listed, lostOne].map((t) => ({ ...lease(t), renewUntil: null })) }), {
      onLost: (leases) => reported.lost.push(...leases),
      onRenewed: (_sentAt, leases) => reported.renewed.push(...leases),
      onError: (error) => {
        throw error;
      },
      onRecovered: () => {},
    });
    await loop.beat();
    expect(reported).toEqual({ renewed: [lease(listed)], lost: [lease(lostOne)] });
    expect(reported.renewed.map((l) => l.taskId)).not.toContain(unlisted.id);
  });
});
