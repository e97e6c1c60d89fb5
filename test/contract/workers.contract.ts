import { describe, expect, it } from "vitest";
import { LeaseLostError, ValidationError, WorkerNotFoundError } from "../../src/core/errors.js";
import { GONE_RUNS_KEPT, timedOut, UNKNOWN_TO_ITS_WORKER, type WorkerBeat } from "../../src/core/worker.js";
import type { StoreKind } from "../helpers/stores.js";
import type { Store } from "../../src/store/store.js";
import { claimOne, useStore } from "./context.js";
import { eventually } from "../helpers/logs.js";

const SWEEP = { staleAfterSeconds: 60, deadAfterSeconds: 120, reservationSeconds: 30 };

export function workersContract(kind: StoreKind) {
  describe("workers, sweep, leadership", () => {
    const ctx = useStore(kind);
    const beat = (workerId: string, extra: Partial<WorkerBeat> = {}) =>
      ctx.store.workerHeartbeat({ workerId, roles: ["crawl"], capacity: 10, currentLoad: 0, tasksProcessed: 0, ...extra });

    /** w-dead holds a running, checkpointed task, then goes silent past dead_after. */
    const deadWorkerWithTask = async (input: Record<string, unknown> = {}) => {
      await ctx.store.enqueue({ taskType: "crawl", ...input });
      await beat("w-dead", { currentLoad: 1 });
      const lease = await claimOne(ctx.store, "w-dead");
      await ctx.store.start(lease.id, lease);
      await ctx.store.checkpoint(lease.id, lease, { page: 5 });
      ctx.clock.advance(121_000);
      return lease;
    };

    it("registers workers on heartbeat and shows the registry figures", async () => {
      await beat("w1", { hostname: "host-a", pid: 42, version: "1.2.3", capacity: 4, currentLoad: 1, tasksProcessed: 7, metadata: { zone: "eu" } });
      await ctx.store.enqueue({ taskType: "crawl" });
      await claimOne(ctx.store, "w1");
      ctx.clock.advance(15_000);
      const [w] = (await ctx.store.listWorkers()).workers;
      expect(w).toMatchObject({
        workerId: "w1", roles: ["crawl"], hostname: "host-a", pid: 42, version: "1.2.3", capacity: 4, currentLoad: 1,
        tasksProcessed: 7, metadata: { zone: "eu" }, status: "active", activeTasks: 1, secondsSinceHeartbeat: 15, loadPercent: 25,
      });
      expect(w.startedAt).toEqual(w.lastSeenAt);
    });

    it("renews the leases a worker holds and reports the ones it lost", async () => {
      await ctx.store.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }, { taskType: "crawl" }]);
      const [kept, cancelled, taken] = await ctx.store.claim({ workerId: "w1", limit: 3 });
      await ctx.store.cancel(cancelled.id);
      await ctx.store.release(taken.id, taken);
      await claimOne(ctx.store, "w2");
      ctx.clock.advance(100_000);
      const { lost } = await beat("w1", { leases: [kept, cancelled, taken].map((t) => ({ taskId: t.id, leaseToken: t.leaseToken })) });
      expect(lost.sort()).toEqual([cancelled.id, taken.id].sort());
      expect((await ctx.store.get(kept.id))?.leaseExpiresAt).toEqual(new Date(ctx.clock.now().getTime() + 120_000));
    });

    it("a lease the worker itself finished the task under is not lost: a beat sent as its outcome landed raises no alarm", async () => {
      await ctx.store.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl", maxAttempts: 1 }]);
      const [completed, failed] = await ctx.store.claim({ workerId: "w1", limit: 2 });
      await ctx.store.complete(completed.id, completed);
      await ctx.store.fail(failed.id, failed, { error: "broken" });
      const leases = [completed, failed].map((t) => ({ taskId: t.id, leaseToken: t.leaseToken }));
      expect(await beat("w1", { leases })).toMatchObject({ lost: [] });
      // Another worker presenting those leases (a forged or mixed-up id) has lost them.
      expect((await beat("w2", { leases })).lost.sort()).toEqual([completed.id, failed.id].sort());
      // Finished tasks' leases are not renewed: nothing of theirs changes.
      expect((await ctx.store.get(completed.id))?.leaseExpiresAt).toBeNull();
    });

    it("a lease under which the sweep failed the task for good is lost: the worker's beat says so, and its late outcome is refused as lease_lost", async () => {
      await ctx.store.enqueue({ taskType: "crawl", maxAttempts: 1 });
      const lease = await claimOne(ctx.store, "w1", { leaseSeconds: 30 });
      ctx.clock.advance(31_000);
      await beat("w1");
      expect(await ctx.store.sweep(SWEEP)).toMatchObject({ failed: [lease.id] });
      expect(await ctx.store.get(lease.id)).toMatchObject({ status: "failed", workerId: "w1", errorMessage: "Lease expired: the worker stopped renewing it" });
      // It kept its token and passed for one the worker had finished under: nothing told the handler to stop.
      expect(await beat("w1", { leases: [{ taskId: lease.id, leaseToken: lease.leaseToken }] })).toMatchObject({ lost: [lease.id] });
      await expect(ctx.store.fail(lease.id, lease, { error: "late" })).rejects.toBeInstanceOf(LeaseLostError);
    });

    it("a beat listing all its worker's leases puts back in the pool a task leased to it over half its lease ago that it leaves out: the worker never learned of that claim", async () => {
      await ctx.store.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }]);
      const [known, unknown] = await ctx.store.claim({ workerId: "w1", limit: 2, leaseSeconds: 60 });
      const listing = { leases: [{ taskId: known.id, leaseToken: known.leaseToken }] };
      // Under half the lease: a claim answered while the beat was on its way is left alone.
      ctx.clock.advance(29_000);
      await beat("w1", { ...listing, allLeases: true });
      expect((await ctx.store.get(unknown.id))?.status).toBe("claimed");
      ctx.clock.advance(2_000);
      // A beat that does not say it lists every lease takes nothing back (seed 000's beat lists none).
      await beat("w1", listing);
      expect((await ctx.store.get(unknown.id))?.status).toBe("claimed");
      expect(await beat("w1", { ...listing, allLeases: true })).toMatchObject({ lost: [] });
      expect(await ctx.store.get(unknown.id)).toMatchObject({ status: "pending", workerId: null, attempts: 1, errorMessage: UNKNOWN_TO_ITS_WORKER });
      expect((await ctx.store.events(unknown.id)).at(-1)).toMatchObject({ event: "requeued", fromWorkerId: "w1", message: UNKNOWN_TO_ITS_WORKER });
      expect((await ctx.store.get(known.id))?.status).toBe("claimed");
      await expect(ctx.store.complete(unknown.id, unknown)).rejects.toBeInstanceOf(LeaseLostError);
      expect(await claimOne(ctx.store, "w2")).toMatchObject({ id: unknown.id, attempts: 2 });
    });

    it("a task a beat listing all leases takes back on its last attempt, or of a type that must not run twice, fails, as a recovery fails it", async () => {
      const last = await ctx.store.enqueue({ taskType: "crawl", maxAttempts: 1 });
      const lease = await claimOne(ctx.store, "w1", { leaseSeconds: 60 });
      ctx.clock.advance(31_000);
      expect(await beat("w1", { leases: [], allLeases: true })).toMatchObject({ lost: [] });
      expect(await ctx.store.get(last.task.id)).toMatchObject({ status: "failed", workerId: "w1", attempts: 1, maxAttempts: 1, errorMessage: UNKNOWN_TO_ITS_WORKER });
      expect((await ctx.store.get(last.task.id))?.completedAt).toEqual(ctx.clock.now());
      expect((await ctx.store.events(last.task.id)).at(-1)).toMatchObject({ event: "failed", fromWorkerId: "w1", message: UNKNOWN_TO_ITS_WORKER });
      expect(await ctx.store.claim({ workerId: "w2" })).toEqual([]);
      await expect(ctx.store.complete(lease.id, lease)).rejects.toBeInstanceOf(LeaseLostError);
      expect((await ctx.store.counts()).byStatus).toMatchObject({ failed: 1 });
      // A type whose tasks must not run twice fails there too, attempts left or not: the worker, restarted
      // under its id, may have run it before.
      await ctx.store.registerTaskType({ name: "charge", recoveryPolicy: "fail", maxAttempts: 3 });
      const once = await ctx.store.enqueue({ taskType: "charge" });
      await ctx.store.claim({ workerId: "w1", taskTypes: ["charge"], leaseSeconds: 60 });
      ctx.clock.advance(31_000);
      await beat("w1", { leases: [], allLeases: true });
      expect(await ctx.store.get(once.task.id)).toMatchObject({ status: "failed", attempts: 1, errorMessage: UNKNOWN_TO_ITS_WORKER });
    });

    it("beats for many workers at once: each registered, each told only of its own lost leases, in input order", async () => {
      await ctx.store.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }]);
      const mine = await claimOne(ctx.store, "w1");
      const theirs = await claimOne(ctx.store, "w2");
      ctx.clock.advance(100_000);
      const leaseOf = (t: typeof mine) => ({ taskId: t.id, leaseToken: t.leaseToken });
      const results = await ctx.store.workerHeartbeatMany([
        { workerId: "w2", roles: ["crawl"], capacity: 2, currentLoad: 1, tasksProcessed: 3, leases: [leaseOf(theirs)] },
        // w1 names w2's task with w2's token: a lease it does not hold.
        { workerId: "w1", roles: ["crawl"], capacity: 1, currentLoad: 1, tasksProcessed: 0, leases: [leaseOf(mine), leaseOf(theirs)] },
        { workerId: "w3", roles: ["index"], capacity: 5, currentLoad: 0, tasksProcessed: 0 },
      ]);
      expect(results).toMatchObject([{ lost: [] }, { lost: [theirs.id] }, { lost: [] }]);
      const renewed = new Date(ctx.clock.now().getTime() + 120_000);
      expect((await ctx.store.get(mine.id))?.leaseExpiresAt).toEqual(renewed);
      expect((await ctx.store.get(theirs.id))?.leaseExpiresAt).toEqual(renewed);
      const registry = (await ctx.store.listWorkers()).workers;
      expect(registry.map((w) => [w.workerId, w.status, w.capacity, w.roles]).sort()).toEqual([
        ["w1", "active", 1, ["crawl"]],
        ["w2", "active", 2, ["crawl"]],
        ["w3", "active", 5, ["index"]],
      ]);
      expect(await ctx.store.workerHeartbeatMany([])).toEqual([]);
    });

    it("a beat may leave its figures and details out (seed 000's beat): a new worker gets the defaults, a known one keeps what it said, in a batch too", async () => {
      await ctx.store.workerHeartbeat({ workerId: "seed", metadata: { hostname: "server-01" } });
      await beat("w1", { capacity: 4, currentLoad: 2, tasksProcessed: 7 });
      await ctx.store.workerHeartbeatMany([{ workerId: "w1", currentLoad: 3 }, { workerId: "w2", roles: ["index"] }]);
      const registry = (await ctx.store.listWorkers()).workers;
      expect(registry.map((w) => [w.workerId, w.roles, w.capacity, w.currentLoad, w.tasksProcessed, w.status])).toEqual([
        ["seed", [], 1, 0, 0, "active"],
        ["w1", ["crawl"], 4, 3, 7, "active"],
        ["w2", ["index"], 1, 0, 0, "active"],
      ]);
      expect(registry[0].metadata).toEqual({ hostname: "server-01" });

      // The worker's own details too: a beat of figures alone (a client that sends its metadata once) erased them.
      await beat("w3", { hostname: "box-3", pid: 4242, version: "1.2.0", metadata: { zone: "eu-1" } });
      await ctx.store.workerHeartbeatMany([{ workerId: "w3", currentLoad: 1 }, { workerId: "seed" }]);
      const kept = (await ctx.store.listWorkers()).workers;
      expect(kept.find((w) => w.workerId === "w3")).toMatchObject({ hostname: "box-3", pid: 4242, version: "1.2.0", metadata: { zone: "eu-1" }, currentLoad: 1 });
      expect(kept.find((w) => w.workerId === "seed")?.metadata).toEqual({ hostname: "server-01" });
      await beat("w3", { hostname: "box-4", metadata: {} });
      expect((await ctx.store.listWorkers()).workers.find((w) => w.workerId === "w3")).toMatchObject({ hostname: "box-4", pid: 4242, metadata: {} });
    });

    it("refuses a batch of beats with a bad one or a worker twice, naming the item, and registers none", async () => {
      const ok = { workerId: "w1", roles: ["crawl"], capacity: 1, currentLoad: 0, tasksProcessed: 0 };
      await expect(ctx.store.workerHeartbeatMany([ok, { ...ok, workerId: "w2", capacity: 0 }])).rejects.toThrow(/item 1: .*capacity/);
      await expect(ctx.store.workerHeartbeatMany([ok, { ...ok, currentLoad: 1 }])).rejects.toThrow(/item 1: .*w1 beats more than once/);
      expect((await ctx.store.listWorkers()).workers).toEqual([]);
    });

    it("refuses a malformed heartbeat", async () => {
      await expect(beat("bad id")).rejects.toBeInstanceOf(ValidationError);
      await expect(beat("w1", { capacity: 0 })).rejects.toThrow(/capacity/);
      await expect(beat("w1", { roles: [] })).rejects.toThrow(/roles/);
      expect((await ctx.store.listWorkers()).workers).toEqual([]);
    });

    it("shuts a worker down: its tasks go back with no attempt charged, it turns inactive", async () => {
      await beat("w1");
      await ctx.store.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }]);
      const tasks = await ctx.store.claim({ workerId: "w1", limit: 2 });
      await ctx.store.checkpoint(tasks[0].id, tasks[0], { page: 2 });
      const released = await ctx.store.shutdownWorker("w1");
      expect(released).toEqual(tasks.map((t) => t.id).sort((a, b) => a - b));
      const task = await ctx.store.get(tasks[0].id);
      expect(task).toMatchObject({ status: "pending", attempts: 0, checkpoint: { page: 2 }, workerId: null });
      expect((await ctx.store.events(tasks[0].id)).at(-1)).toMatchObject({ event: "released", message: "worker shut down" });
      expect((await ctx.store.listWorkers()).workers[0]).toMatchObject({ status: "inactive", currentLoad: 0 });
      expect(await ctx.store.shutdownWorker("w1")).toEqual([]);
    });

    it("a claim that lands after its worker shut down goes back at the next sweep, released with no attempt charged, not at its lease's end", async () => {
      // A long-poll answered after the worker's shutdown, or a claim a stop gave up waiting for: no worker
      // runs the task, and it waited out its lease, an attempt charged, before the sweep took it back.
      await beat("w1");
      await beat("w2");
      const { task } = await ctx.store.enqueue({ taskType: "crawl" });
      await ctx.store.shutdownWorker("w1");
      expect(await ctx.store.nextRecoveryIn(SWEEP)).toBe(120);
      const late = await claimOne(ctx.store, "w1", { leaseSeconds: 600 });
      expect(await ctx.store.nextRecoveryIn(SWEEP)).toBe(0);
      const result = await ctx.store.sweep(SWEEP);
      expect(result).toMatchObject({ deadWorkers: [], requeued: [task.id], failed: [], reassigned: [{ taskId: task.id, workerId: "w2" }] });
      expect(await ctx.store.get(task.id)).toMatchObject({ status: "pending", attempts: 0, workerId: null, reservedFor: "w2" });
      expect((await ctx.store.events(task.id)).map((e) => [e.event, e.message])).toEqual([
        ["created", null],
        ["claimed", null],
        ["released", "Claimed after its worker shut down: given back, no attempt charged"],
        ["reassigned", "Claimed after its worker shut down: given back, no attempt charged"],
      ]);
      await expect(ctx.store.complete(task.id, late, {})).rejects.toBeInstanceOf(LeaseLostError);
      expect(await ctx.store.nextRecoveryIn(SWEEP)).toBe(120);
      // Beating again, the worker is back (a restart under its id): what it claims then is its own.
      await beat("w1");
      const { task: next } = await ctx.store.enqueue({ taskType: "crawl" });
      expect(await claimOne(ctx.store, "w1")).toMatchObject({ id: next.id });
      expect((await ctx.store.sweep(SWEEP)).requeued).toEqual([]);
      expect(await ctx.store.get(next.id)).toMatchObject({ status: "claimed", workerId: "w1" });
    });

    it("a leased task going back to pending gives its unique key up when another pending task holds it: failure, release, shutdown and the sweep all go through", async () => {
      // A unique key dedupes pending tasks only, so while its task is leased the key can be enqueued again.
      // Each key has a task type of its own, so each claim takes the task just enqueued.
      const leasedWithKey = async (workerId: string, key: string) => {
        await ctx.store.enqueue({ taskType: key, uniqueKey: key, maxAttempts: 5 });
        const lease = await claimOne(ctx.store, workerId, { taskTypes: [key] });
        const { task: newer, created } = await ctx.store.enqueue({ taskType: key, uniqueKey: key });
        expect(newer).toMatchObject({ status: "pending", uniqueKey: key });
        expect(created).toBe(true);
        return lease;
      };
      const holderOf = async (key: string) => (await ctx.store.list({ status: "pending" })).tasks.filter((t) => t.uniqueKey === key).map((t) => t.id);

      const failed = await leasedWithKey("w1", "k-fail");
      expect(await ctx.store.fail(failed.id, failed, { error: "flaky" })).toMatchObject({ status: "pending", uniqueKey: null });
      const released = await leasedWithKey("w1", "k-release");
      expect(await ctx.store.release(released.id, released)).toMatchObject({ status: "pending", uniqueKey: null, attempts: 0 });
      const inBatch = await leasedWithKey("w1", "k-batch");
      const [batched] = await ctx.store.failMany([{ id: inBatch.id, lease: { workerId: inBatch.workerId, leaseToken: inBatch.leaseToken }, error: "flaky" }]);
      expect(batched).toMatchObject({ ok: true });
      expect(await ctx.store.get(inBatch.id)).toMatchObject({ status: "pending", uniqueKey: null });

      // A worker's shutdown gives its tasks back.
      const first = await leasedWithKey("w2", "k-shutdown");
      expect(await ctx.store.shutdownWorker("w2")).toEqual([first.id]);
      expect(await ctx.store.get(first.id)).toMatchObject({ status: "pending", uniqueKey: null });

      // A dead worker's task with its key pending again, and an unrelated expired lease: one sweep recovers both.
      await beat("w-dead");
      const orphan = await leasedWithKey("w-dead", "k-sweep");
      await ctx.store.enqueue({ taskType: "other" });
      const unrelated = await claimOne(ctx.store, "w-live", { taskTypes: ["other"], leaseSeconds: 30 });
      ctx.clock.advance(121_000);
      await beat("w-live");
      const swept = await ctx.store.sweep(SWEEP);
      expect(swept.requeued.sort((a, b) => a - b)).toEqual([orphan.id, unrelated.id].sort((a, b) => a - b));
      expect(await ctx.store.get(orphan.id)).toMatchObject({ status: "pending", uniqueKey: null });

      // Each key is still held by exactly one pending task: the one enqueued while the other was leased.
      for (const key of ["k-fail", "k-release", "k-batch", "k-shutdown", "k-sweep"]) expect(await holderOf(key), key).toHaveLength(1);
    });

    it("of two tasks of one key requeued together, one keeps the key", async () => {
      await beat("w3");
      await ctx.store.enqueue({ taskType: "crawl", uniqueKey: "k-pair" });
      const one = await claimOne(ctx.store, "w3");
      await ctx.store.enqueue({ taskType: "crawl", uniqueKey: "k-pair" });
      const two = await claimOne(ctx.store, "w3");
      expect((await ctx.store.shutdownWorker("w3")).sort((a, b) => a - b)).toEqual([one.id, two.id].sort((a, b) => a - b));
      const keys = [(await ctx.store.get(one.id))?.uniqueKey, (await ctx.store.get(two.id))?.uniqueKey];
      expect(keys.filter((k) => k === "k-pair")).toHaveLength(1);
      expect(keys.filter((k) => k === null)).toHaveLength(1);
    });

    it("refuses to shut down a worker the registry does not know, and registers none", async () => {
      const refused = ctx.store.shutdownWorker("w-typo");
      await expect(refused).rejects.toBeInstanceOf(WorkerNotFoundError);
      // Over HTTP too: the server's points to its route, the client's to what a store's does.
      await expect(refused).rejects.toThrow('Worker "w-typo" is not in the registry: it never sent a heartbeat, or retention removed it (taskpool workers lists them)');
      expect((await ctx.store.listWorkers()).workers).toEqual([]);
    });

    it("marks silent workers stale, then dead, once", async () => {
      await beat("w1");
      ctx.clock.advance(61_000);
      expect(await ctx.store.sweep(SWEEP)).toMatchObject({ staleWorkers: ["w1"], deadWorkers: [] });
      expect((await ctx.store.listWorkers()).workers[0].status).toBe("stale");
      ctx.clock.advance(60_000);
      expect(await ctx.store.sweep(SWEEP)).toMatchObject({ staleWorkers: [], deadWorkers: ["w1"] });
      expect(await ctx.store.sweep(SWEEP)).toMatchObject({ staleWorkers: [], deadWorkers: [], requeued: [] });
      await beat("w1");
      expect((await ctx.store.listWorkers()).workers[0].status).toBe("active");
    });

    it("a beat of the run that shut down leaves the worker inactive however late it lands (over HTTP, stamped as it is written); a beat of another run is a restart", async () => {
      const worker = async () => (await ctx.store.listWorkers()).workers.find((w) => w.workerId === "w1");
      await beat("w1", { runId: "run-1", currentLoad: 2 });
      await ctx.store.shutdownWorker("w1");
      // Sent before the shutdown, it arrives a second after (held up, or sent again by the transport).
      ctx.clock.advance(1000);
      await beat("w1", { runId: "run-1", currentLoad: 2 });
      expect(await worker()).toMatchObject({ status: "inactive", currentLoad: 0 });
      // Dead is not shut down: the run beating again after a partition is alive, and registers again.
      await beat("w1", { runId: "run-2" });
      expect(await worker()).toMatchObject({ status: "active" });
      ctx.clock.advance(121_000);
      expect((await ctx.store.sweep(SWEEP)).deadWorkers).toEqual(["w1"]);
      ctx.clock.advance(1000);
      await beat("w1", { runId: "run-2" });
      expect(await worker()).toMatchObject({ status: "active" });
      // A beat that names no run (seed 000's body) is taken as a restart, as before.
      await ctx.store.shutdownWorker("w1");
      ctx.clock.advance(1000);
      await beat("w1");
      expect(await worker()).toMatchObject({ status: "active" });
    });

    it("a restart under the same id (another run) while the worker is still active starts anew: its start is the new run's", async () => {
      const worker = async () => (await ctx.store.listWorkers()).workers.find((w) => w.workerId === "w1");
      await beat("w1", { runId: "run-1", tasksProcessed: 40 });
      const first = (await worker())!.startedAt;
      ctx.clock.advance(5000);
      await beat("w1", { runId: "run-1", tasksProcessed: 41 });
      expect((await worker())!.startedAt).toEqual(first);
      // Killed and started again within the dead-after: a crash loop looked like one long-lived worker.
      ctx.clock.advance(3000);
      await beat("w1", { runId: "run-2", tasksProcessed: 0 });
      expect(await worker()).toMatchObject({ status: "active", tasksProcessed: 0, startedAt: ctx.clock.now() });
    });

    it("a late beat of a run that shut down, landing after another run registered under the id, changes nothing: the new run stays registered, and its tasks leased to it", async () => {
      await beat("w1", { runId: "run-1" });
      await ctx.store.shutdownWorker("w1");
      // Restarted under its id (WORKER_ID): another run, registered.
      await beat("w1", { runId: "run-2", currentLoad: 1 });
      await ctx.store.enqueue({ taskType: "crawl" });
      const lease = await claimOne(ctx.store, "w1", { leaseSeconds: 60 });
      ctx.clock.advance(31_000);
      // run-1's last beat, held up until now, says it lists every lease it holds: none.
      expect(await beat("w1", { runId: "run-1", leases: [], allLeases: true })).toMatchObject({ lost: [] });
      expect(await ctx.store.get(lease.id)).toMatchObject({ status: "claimed", workerId: "w1" });
      expect((await ctx.store.listWorkers()).workers.find((w) => w.workerId === "w1")).toMatchObject({ status: "active", currentLoad: 1 });
      // Its lease is the one it was given: its outcome is taken.
      expect((await ctx.store.complete(lease.id, lease)).task.status).toBe("completed");
    });

    it("a late beat of a run that another run replaced without a shutdown (frozen, declared dead, restarted under its id) changes nothing: the new run keeps its tasks", async () => {
      const worker = async () => (await ctx.store.listWorkers()).workers.find((w) => w.workerId === "w1");
      await beat("w1", { runId: "run-1" });
      // run-1's process freezes (a paused VM) and is declared dead; a new process starts under the id.
      ctx.clock.advance(121_000);
      expect((await ctx.store.sweep(SWEEP)).deadWorkers).toEqual(["w1"]);
      await beat("w1", { runId: "run-2", currentLoad: 1 });
      await ctx.store.enqueue({ taskType: "crawl" });
      const lease = await claimOne(ctx.store, "w1", { leaseSeconds: 60 });
      ctx.clock.advance(31_000);
      // run-1 thaws and beats, listing every lease it holds: none of run-2's. It was taken for a restart,
      // and took run-2's task back while run-2 ran it.
      expect(await beat("w1", { runId: "run-1", leases: [], allLeases: true })).toMatchObject({ lost: [] });
      expect(await ctx.store.get(lease.id)).toMatchObject({ status: "claimed", workerId: "w1", attempts: 1 });
      expect(await worker()).toMatchObject({ status: "active", currentLoad: 1, activeTasks: 1 });
      // run-2 goes on: its beats renew its lease, and its outcome is taken.
      expect(await beat("w1", { runId: "run-2", leases: [{ taskId: lease.id, leaseToken: lease.leaseToken }] })).toMatchObject({ lost: [] });
      expect((await ctx.store.complete(lease.id, lease)).task.status).toBe("completed");
      // The same run beating again after it was declared dead, with no other run since, is alive: it registers again.
      ctx.clock.advance(121_000);
      expect((await ctx.store.sweep(SWEEP)).deadWorkers).toEqual(["w1"]);
      await beat("w1", { runId: "run-2" });
      expect(await worker()).toMatchObject({ status: "active" });
    });

    it(`every run replaced under the id stays gone, up to the last ${GONE_RUNS_KEPT}: a frozen run waking after its replacement crashed and a third started changes nothing`, async () => {
      const worker = async () => (await ctx.store.listWorkers()).workers.find((w) => w.workerId === "w1");
      const declaredDead = async () => {
        ctx.clock.advance(121_000);
        expect((await ctx.store.sweep(SWEEP)).deadWorkers).toEqual(["w1"]);
      };
      await beat("w1", { runId: "run-1" });
      // run-1 freezes and is declared dead; run-2 starts under the id, crashes, and is declared dead too.
      await declaredDead();
      await beat("w1", { runId: "run-2" });
      await declaredDead();
      await beat("w1", { runId: "run-3", currentLoad: 1 });
      await ctx.store.enqueue({ taskType: "crawl" });
      const lease = await claimOne(ctx.store, "w1", { leaseSeconds: 60 });
      ctx.clock.advance(31_000);
      // run-1 thaws and beats, listing every lease it holds: none. Remembering run-2 alone, the registry
      // took it for a restart, and it took run-3's task back while run-3 ran it.
      for (const late of ["run-1", "run-2"]) {
        expect(await beat("w1", { runId: late, leases: [], allLeases: true })).toMatchObject({ lost: [] });
        expect(await ctx.store.get(lease.id)).toMatchObject({ status: "claimed", workerId: "w1", attempts: 1 });
        expect(await worker()).toMatchObject({ status: "active", currentLoad: 1, activeTasks: 1 });
      }
      // A late shutdown of either changes nothing either; run-3's outcome is taken.
      expect(await ctx.store.shutdownWorker("w1", "run-1")).toEqual([]);
      expect(await worker()).toMatchObject({ status: "active", activeTasks: 1 });
      expect((await ctx.store.complete(lease.id, lease)).task.status).toBe("completed");

      // The memory is bounded. Gone now, newest first: run-1 (its late shutdown), run-2. Each of
      // GONE_RUNS_KEPT - 1 more runs replaces the one before it: run-1 is the oldest kept, run-2 forgotten.
      for (let run = 4; run < 3 + GONE_RUNS_KEPT; run++) await beat("w1", { runId: `run-${run}`, currentLoad: 2 });
      await beat("w1", { runId: "run-1", currentLoad: 7 });
      expect(await worker()).toMatchObject({ status: "active", currentLoad: 2 });
      await beat("w1", { runId: "run-2", currentLoad: 7 });
      expect(await worker()).toMatchObject({ status: "active", currentLoad: 7 });
    });

    it("a late shutdown of a run, landing after another run registered under the id, changes nothing: the new run stays active, its tasks leased to it and reserved for it, its beats taken", async () => {
      const worker = async () => (await ctx.store.listWorkers()).workers.find((w) => w.workerId === "w1");
      // A task a sweep will reserve for w1, once w-dead is found dead.
      const orphan = await deadWorkerWithTask();
      await beat("w1", { runId: "run-1", currentLoad: 1 });
      await ctx.store.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }, { taskType: "crawl" }]);
      const ofRun1 = await claimOne(ctx.store, "w1", { leaseSeconds: 60 });
      // run-1 stops; its shutdown is held up (or its answer lost, and it is sent again), and the process
      // restarts under its id (WORKER_ID) meanwhile: run-2 registers and claims.
      await beat("w1", { runId: "run-2", currentLoad: 2 });
      const ofRun2 = await ctx.store.claim({ workerId: "w1", limit: 2, leaseSeconds: 60 });
      expect((await ctx.store.sweep(SWEEP)).reassigned).toEqual([{ taskId: orphan.id, workerId: "w1" }]);
      ctx.clock.advance(1000);
      // run-1's shutdown lands now. It released all three tasks and marked run-2 inactive: they ran twice.
      expect(await ctx.store.shutdownWorker("w1", "run-1")).toEqual([]);
      expect(await worker()).toMatchObject({ status: "active", currentLoad: 2, activeTasks: 3 });
      for (const lease of [ofRun1, ...ofRun2]) {
        expect(await ctx.store.get(lease.id)).toMatchObject({ status: "claimed", workerId: "w1", attempts: 1 });
        expect((await ctx.store.events(lease.id)).map((e) => e.event)).toEqual(["created", "claimed"]);
      }
      expect(await ctx.store.get(orphan.id)).toMatchObject({ status: "pending", reservedFor: "w1" });
      // run-2's beats are taken and renew its leases, and its outcomes are too.
      const leases = ofRun2.map((t) => ({ taskId: t.id, leaseToken: t.leaseToken }));
      expect(await beat("w1", { runId: "run-2", currentLoad: 2, leases })).toMatchObject({ lost: [] });
      expect((await ctx.store.get(ofRun2[0].id))?.leaseExpiresAt).toEqual(new Date(ctx.clock.now().getTime() + 60_000));
      expect((await ctx.store.complete(ofRun2[0].id, ofRun2[0])).task.status).toBe("completed");
      // The shutdown recorded run-1 as gone: its last beat, held up too, listing every lease it holds
      // (none), takes nothing back either.
      ctx.clock.advance(30_000);
      expect(await beat("w1", { runId: "run-1", leases: [], allLeases: true })).toMatchObject({ lost: [] });
      expect(await worker()).toMatchObject({ status: "active", currentLoad: 2, activeTasks: 2 });
      expect(await ctx.store.get(ofRun2[1].id)).toMatchObject({ status: "claimed", workerId: "w1" });
      // run-2's own shutdown is of the current run: it gives back what is leased under the id.
      expect((await ctx.store.shutdownWorker("w1", "run-2")).sort((a, b) => a - b)).toEqual([ofRun1.id, ofRun2[1].id].sort((a, b) => a - b));
      expect(await worker()).toMatchObject({ status: "inactive", currentLoad: 0, activeTasks: 0 });
    });

    it("a restart that names no run replaces the named run before it: that run's late shutdown and beats change nothing", async () => {
      const worker = async () => (await ctx.store.listWorkers()).workers.find((w) => w.workerId === "w1");
      await beat("w1", { runId: "run-1", currentLoad: 1 });
      // Restarted under its id by a client that names no run (seed 000's body), which claims.
      await beat("w1", { currentLoad: 1 });
      await ctx.store.enqueue({ taskType: "crawl" });
      const lease = await claimOne(ctx.store, "w1", { leaseSeconds: 60 });
      // run-1's shutdown lands now (held up, or sent again). Before, it took the new process for run-1 and gave back its task.
      ctx.clock.advance(1000);
      expect(await ctx.store.shutdownWorker("w1", "run-1")).toEqual([]);
      expect(await worker()).toMatchObject({ status: "active", activeTasks: 1 });
      // run-1's last beat, held up too, listing every lease it holds (none), takes nothing back either.
      ctx.clock.advance(30_000);
      expect(await beat("w1", { runId: "run-1", leases: [], allLeases: true })).toMatchObject({ lost: [] });
      expect(await ctx.store.get(lease.id)).toMatchObject({ status: "claimed", workerId: "w1" });
      // The process's own shutdown names no run: it gives its task back; run-1's, sent again, still changes nothing.
      expect(await ctx.store.shutdownWorker("w1")).toEqual([lease.id]);
      await beat("w1");
      const next = await claimOne(ctx.store, "w1");
      expect(await ctx.store.shutdownWorker("w1", "run-1")).toEqual([]);
      expect(await ctx.store.get(next.id)).toMatchObject({ status: "claimed", workerId: "w1" });
    });

    it("a restart that names no run replaces every named run before it, not only the last: an older run's late shutdown and beats change nothing", async () => {
      const worker = async () => (await ctx.store.listWorkers()).workers.find((w) => w.workerId === "w1");
      await beat("w1", { runId: "run-0", currentLoad: 1 });
      await beat("w1", { runId: "run-1", currentLoad: 1 });
      await beat("w1", { currentLoad: 1 });
      await ctx.store.enqueue({ taskType: "crawl" });
      const lease = await claimOne(ctx.store, "w1", { leaseSeconds: 60 });
      // run-0's shutdown, sent again by a retry, lands now: it was taken for the current run's and gave its task back.
      ctx.clock.advance(1000);
      expect(await ctx.store.shutdownWorker("w1", "run-0")).toEqual([]);
      expect(await worker()).toMatchObject({ status: "active", activeTasks: 1 });
      // Recorded as gone, as another replaced run's: its last beat, held up too, takes nothing back.
      ctx.clock.advance(30_000);
      expect(await beat("w1", { runId: "run-0", leases: [], allLeases: true })).toMatchObject({ lost: [] });
      expect(await ctx.store.get(lease.id)).toMatchObject({ status: "claimed", workerId: "w1" });
    });

    it("a shutdown naming the current run, or no run, gives back what the worker holds and marks it inactive; sent again it answers [], and the run's late beats are refused", async () => {
      const worker = async () => (await ctx.store.listWorkers()).workers.find((w) => w.workerId === "w1");
      await beat("w1", { runId: "run-1", currentLoad: 2 });
      await ctx.store.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }, { taskType: "crawl" }]);
      const held = await ctx.store.claim({ workerId: "w1", limit: 2 });
      await expect(ctx.store.shutdownWorker("w1", "run 1")).rejects.toBeInstanceOf(ValidationError);
      await expect(ctx.store.shutdownWorker("w-typo", "run-1")).rejects.toBeInstanceOf(WorkerNotFoundError);
      expect(await worker()).toMatchObject({ status: "active", activeTasks: 2 });
      expect(await ctx.store.shutdownWorker("w1", "run-1")).toEqual(held.map((t) => t.id).sort((a, b) => a - b));
      expect(await ctx.store.get(held[0].id)).toMatchObject({ status: "pending", attempts: 0, workerId: null });
      expect(await worker()).toMatchObject({ status: "inactive", currentLoad: 0, activeTasks: 0 });
      // Sent again (its answer was lost): nothing more to do, as before.
      expect(await ctx.store.shutdownWorker("w1", "run-1")).toEqual([]);
      ctx.clock.advance(1000);
      await beat("w1", { runId: "run-1", currentLoad: 2 });
      expect(await worker()).toMatchObject({ status: "inactive" });
      // An operator's shutdown names no run: it is of whichever run is current.
      await beat("w1", { runId: "run-2" });
      const next = await claimOne(ctx.store, "w1");
      expect(await ctx.store.shutdownWorker("w1")).toEqual([next.id]);
      expect(await worker()).toMatchObject({ status: "inactive", activeTasks: 0 });
      ctx.clock.advance(1000);
      await beat("w1", { runId: "run-2" });
      expect(await worker()).toMatchObject({ status: "inactive" });
      // A worker whose beats named no run (seed 000's body): a shutdown naming one cannot be told from its own.
      await beat("w2");
      const ofW2 = await claimOne(ctx.store, "w2");
      expect(await ctx.store.shutdownWorker("w2", "run-x")).toEqual([ofW2.id]);
      expect((await ctx.store.listWorkers()).workers.find((w) => w.workerId === "w2")).toMatchObject({ status: "inactive" });
    });

    it("a beat stamped before its worker was declared dead or shut down, landing after (held up on a lock), leaves it so; a later beat brings it back", async () => {
      const status = async () => (await ctx.store.listWorkers()).workers.find((w) => w.workerId === "w1")?.status;
      await beat("w1", { currentLoad: 3 });
      ctx.clock.advance(121_000);
      expect((await ctx.store.sweep(SWEEP)).deadWorkers).toEqual(["w1"]);
      ctx.clock.advance(-1);
      await beat("w1", { currentLoad: 3 });
      expect(await status()).toBe("dead");
      // Active again, it would be the least-loaded worker a recovery reserves tasks for.
      expect((await ctx.store.listWorkers()).workers[0].currentLoad).toBe(0);
      ctx.clock.advance(2);
      await beat("w1");
      expect(await status()).toBe("active");

      await ctx.store.shutdownWorker("w1");
      ctx.clock.advance(-1);
      await beat("w1");
      expect(await status()).toBe("inactive");
      ctx.clock.advance(2);
      await beat("w1");
      expect(await status()).toBe("active");
    });

    it("says when the next sweep would take something back: a live worker turning dead, or a lease running out", async () => {
      expect(await ctx.store.nextRecoveryIn(SWEEP)).toBeNull();
      await beat("w1");
      expect(await ctx.store.nextRecoveryIn(SWEEP)).toBe(120);
      ctx.clock.advance(30_000);
      await ctx.store.enqueue({ taskType: "crawl" });
      await ctx.store.claim({ workerId: "w1", leaseSeconds: 60 });
      expect(await ctx.store.nextRecoveryIn(SWEEP)).toBe(60);
      ctx.clock.advance(60_500);
      expect(await ctx.store.nextRecoveryIn(SWEEP)).toBe(0);
      expect(await ctx.store.sweep(SWEEP)).toMatchObject({ staleWorkers: ["w1"], requeued: [expect.any(Number)] });
      // A stale worker still counts; one shut down, or dead already, does not.
      expect(await ctx.store.nextRecoveryIn(SWEEP)).toBe(29.5);
      ctx.clock.advance(1_000);
      await beat("w2");
      expect(await ctx.store.nextRecoveryIn(SWEEP)).toBe(28.5);
      await ctx.store.shutdownWorker("w1");
      expect(await ctx.store.nextRecoveryIn(SWEEP)).toBe(120);
      ctx.clock.advance(121_000);
      expect((await ctx.store.sweep(SWEEP)).deadWorkers).toEqual(["w2"]);
      expect(await ctx.store.nextRecoveryIn(SWEEP)).toBeNull();
    });

    it("reports a worker silent past both thresholds dead only, not stale as well", async () => {
      await beat("w1");
      await beat("w2");
      ctx.clock.advance(121_000);
      await beat("w2");
      expect(await ctx.store.sweep(SWEEP)).toMatchObject({ staleWorkers: [], deadWorkers: ["w1"] });
      expect((await ctx.store.listWorkers()).workers.map((w) => [w.workerId, w.status])).toEqual([["w2", "active"], ["w1", "dead"]]);
    });

    it("takes a dead worker's task back and reserves it for the least-loaded healthy worker of its role", async () => {
      const lease = await deadWorkerWithTask();
      await beat("busy", { currentLoad: 8 });
      await beat("idle", { currentLoad: 3 });
      await beat("half", { currentLoad: 5 });
      await beat("other-role", { roles: ["analytics"], currentLoad: 0 });
      await beat("full", { currentLoad: 10 });
      const result = await ctx.store.sweep(SWEEP);
      expect(result).toMatchObject({ deadWorkers: ["w-dead"], requeued: [lease.id], failed: [], reassigned: [{ taskId: lease.id, workerId: "idle" }], unassigned: [] });

      const task = await ctx.store.get(lease.id);
      expect(task).toMatchObject({ status: "pending", attempts: 1, checkpoint: { page: 5 }, reservedFor: "idle", errorMessage: "Worker died unexpectedly" });
      expect(await ctx.store.claim({ workerId: "half" })).toEqual([]);
      const resumed = await claimOne(ctx.store, "idle");
      expect(resumed).toMatchObject({ id: lease.id, attempts: 2, checkpoint: { page: 5 } });

      const [event] = await ctx.store.reassignments();
      expect(event).toMatchObject({ taskId: lease.id, fromWorkerId: "w-dead", toWorkerId: "idle", reason: "Worker died unexpectedly", checkpoint: { page: 5 }, success: true, errorMessage: null });
      expect((await ctx.store.events(lease.id)).map((e) => e.event)).toEqual(["created", "claimed", "started", "checkpoint", "requeued", "reassigned", "claimed"]);
      expect((await ctx.store.listWorkers()).workers.find((w) => w.workerId === "w-dead")).toMatchObject({ status: "dead", activeTasks: 0 });
    });

    it("a lease that runs out past its task's timeout_seconds is taken back as timed out, not as a lease its worker forgot", async () => {
      const { task } = await ctx.store.enqueue({ taskType: "crawl", timeoutSeconds: 60 });
      const early = (await ctx.store.enqueue({ taskType: "crawl", timeoutSeconds: 600 })).task;
      await beat("w1");
      const lease = await claimOne(ctx.store, "w1", { start: true, leaseSeconds: 30 });
      const other = await claimOne(ctx.store, "w1", { start: true, leaseSeconds: 30 });
      expect([lease.id, other.id]).toEqual([task.id, early.id]);
      // Renewed until its timeout, then left to run out, as the workers do.
      ctx.clock.advance(50_000);
      await ctx.store.heartbeat(task.id, lease);
      ctx.clock.advance(35_000);
      await beat("w1");
      expect(await ctx.store.sweep(SWEEP)).toMatchObject({ deadWorkers: [], requeued: [task.id, early.id] });
      expect(await ctx.store.get(task.id)).toMatchObject({ status: "pending", attempts: 1, errorMessage: timedOut(60) });
      expect((await ctx.store.events(task.id)).find((e) => e.event === "requeued")).toMatchObject({ message: "Timed out after 60 s: its lease ran out, not renewed past the task's timeout_seconds" });
      // One whose lease ran out within its timeout was forgotten by its worker, not timed out.
      expect((await ctx.store.get(early.id))?.errorMessage).toBe("Lease expired: the worker stopped renewing it");
    });

    it("a worker's load, for reassignment, counts the tasks it leases and those reserved for it, not only what its last beat said", async () => {
      const long = { ...SWEEP, reservationSeconds: 600 };
      await ctx.store.enqueueMany([{ taskType: "crawl" }, { taskType: "crawl" }, { taskType: "crawl" }]);
      await beat("w-dead");
      const lost = await ctx.store.claim({ workerId: "w-dead", limit: 2, leaseSeconds: 600 });
      ctx.clock.advance(121_000);
      await beat("a", { capacity: 2 });
      await beat("b", { capacity: 1 });
      // a claims after its beat: it said 0 of 2, it runs 1.
      await claimOne(ctx.store, "a", { leaseSeconds: 600 });
      const first = await ctx.store.sweep(long);
      expect(first.reassigned).toEqual([
        { taskId: lost[0].id, workerId: "b" },
        { taskId: lost[1].id, workerId: "a" },
      ]);
      // A later sweep: b holds a reservation it has not claimed yet, a a lease and one: both are full.
      await ctx.store.enqueue({ taskType: "crawl" });
      await beat("w-dead-2");
      await claimOne(ctx.store, "w-dead-2", { leaseSeconds: 600 });
      ctx.clock.advance(121_000);
      await beat("a", { capacity: 2 });
      await beat("b", { capacity: 1 });
      const second = await ctx.store.sweep(long);
      expect(second).toMatchObject({ deadWorkers: ["w-dead-2"], reassigned: [] });
      expect(second.unassigned).toHaveLength(1);
    });

    it("a task reserved for a worker that then dies or shuts down is open to all at once, not when the reservation lapses", async () => {
      const longReservation = { ...SWEEP, reservationSeconds: 600 };
      const reservedFor = async (heir: string) => {
        const lease = await deadWorkerWithTask();
        await beat(heir);
        expect((await ctx.store.sweep(longReservation)).reassigned).toEqual([{ taskId: lease.id, workerId: heir }]);
        return lease;
      };
      // The heir dies too.
      const first = await reservedFor("heir-1");
      ctx.clock.advance(121_000);
      await beat("w-next");
      expect((await ctx.store.sweep(longReservation)).deadWorkers).toContain("heir-1");
      expect(await ctx.store.get(first.id)).toMatchObject({ status: "pending", reservedFor: null, reservedUntil: null });
      const taken = await claimOne(ctx.store, "w-next");
      expect(taken).toMatchObject({ id: first.id });
      await ctx.store.complete(taken.id, taken);

      // The heir shuts down.
      const second = await reservedFor("heir-2");
      await ctx.store.shutdownWorker("heir-2");
      expect(await ctx.store.get(second.id)).toMatchObject({ status: "pending", reservedFor: null });
      expect((await ctx.store.claim({ workerId: "w-next", limit: 5 })).map((t) => t.id)).toContain(second.id);
    });

    it("records 'No healthy worker available for role …' and leaves the task to the pool", async () => {
      await beat("quiet"); // falls silent along with the dead worker: not a candidate either
      const lease = await deadWorkerWithTask();
      await beat("other-role", { roles: ["analytics"] });
      const result = await ctx.store.sweep(SWEEP);
      expect(result).toMatchObject({ requeued: [lease.id], reassigned: [], unassigned: [lease.id] });
      const [event] = await ctx.store.reassignments({ taskId: lease.id });
      expect(event).toMatchObject({ success: false, toWorkerId: null, errorMessage: "No healthy worker available for role crawl", checkpoint: { page: 5 } });
      expect((await claimOne(ctx.store, "latecomer")).id).toBe(lease.id);
    });

    it("says when the role's healthy workers exist but are all at capacity", async () => {
      await beat("w-dead");
      await ctx.store.enqueueMany([{ taskType: "crawl", priority: 9 }, { taskType: "crawl", priority: 1 }]);
      const [first, second] = await ctx.store.claim({ workerId: "w-dead", limit: 2 });
      ctx.clock.advance(121_000);
      await beat("full-a", { currentLoad: 10 });
      await beat("full-b", { capacity: 2, currentLoad: 1 }); // takes one task, then is full for the next
      const result = await ctx.store.sweep(SWEEP);
      expect(result).toMatchObject({ reassigned: [{ taskId: first.id, workerId: "full-b" }], unassigned: [second.id] });
      const [event] = await ctx.store.reassignments({ taskId: second.id });
      expect(event).toMatchObject({ success: false, errorMessage: "No healthy worker available: all 2 healthy workers for role crawl are at capacity" });
    });

    it("names a live previous holder when it is the only worker of the role", async () => {
      await ctx.store.enqueue({ taskType: "crawl" });
      const lease = await claimOne(ctx.store, "hung", { leaseSeconds: 30 });
      ctx.clock.advance(31_000);
      await beat("hung");
      expect((await ctx.store.sweep(SWEEP)).unassigned).toEqual([lease.id]);
      const [event] = await ctx.store.reassignments({ taskId: lease.id });
      expect(event.errorMessage).toBe("No healthy worker available for role crawl besides its previous holder hung");
    });

    it("reassigns higher-priority tasks first when capacity is short", async () => {
      await beat("w-dead");
      await ctx.store.enqueue({ taskType: "crawl", priority: 1 });
      await ctx.store.enqueue({ taskType: "crawl", priority: 9 });
      const [urgent, low] = await ctx.store.claim({ workerId: "w-dead", limit: 2 });
      ctx.clock.advance(121_000);
      await beat("survivor", { capacity: 1 });
      const result = await ctx.store.sweep(SWEEP);
      expect(result.reassigned).toEqual([{ taskId: urgent.id, workerId: "survivor" }]);
      expect(result.unassigned).toEqual([low.id]);
    });

    it("fails the task under the 'fail' policy, and when attempts are used up", async () => {
      const lease = await deadWorkerWithTask();
      await ctx.store.enqueue({ taskType: "once", maxAttempts: 1 });
      await beat("w-dead", { roles: ["crawl", "once"] });
      const last = await claimOne(ctx.store, "w-dead", { taskTypes: ["once"] });
      ctx.clock.advance(121_000);
      const result = await ctx.store.sweep({ ...SWEEP, recoveryPolicies: { crawl: "fail" } });
      expect(result.failed.sort()).toEqual([lease.id, last.id].sort());
      expect(await ctx.store.get(lease.id)).toMatchObject({ status: "failed", errorMessage: "Worker died unexpectedly", checkpoint: { page: 5 } });
      expect((await ctx.store.events(lease.id)).at(-1)).toMatchObject({ event: "failed", fromWorkerId: "w-dead", message: "Worker died unexpectedly" });
      expect((await ctx.store.retry(lease.id)).status).toBe("pending");
    });

    it("recovers a task whose lease expired in a live worker, and gives it to another worker", async () => {
      await ctx.store.enqueue({ taskType: "crawl" });
      const lease = await claimOne(ctx.store, "hung", { leaseSeconds: 30 });
      ctx.clock.advance(31_000);
      await beat("hung");
      await beat("helper");
      const result = await ctx.store.sweep(SWEEP);
      expect(result).toMatchObject({ deadWorkers: [], requeued: [lease.id], reassigned: [{ taskId: lease.id, workerId: "helper" }] });
      expect((await ctx.store.get(lease.id))?.errorMessage).toBe("Lease expired: the worker stopped renewing it");
      await expect(ctx.store.complete(lease.id, lease)).rejects.toThrow(/no longer leased/);
    });

    it("lets one holder lead at a time, until its lease lapses or it resigns", async () => {
      expect(await ctx.store.tryLead("coordinator", "a", 10)).toBe(true);
      expect(await ctx.store.tryLead("coordinator", "b", 10)).toBe(false);
      ctx.clock.advance(9_000);
      expect(await ctx.store.tryLead("coordinator", "a", 10)).toBe(true);
      ctx.clock.advance(9_000);
      expect(await ctx.store.tryLead("coordinator", "b", 10)).toBe(false);
      ctx.clock.advance(1_000);
      expect(await ctx.store.tryLead("coordinator", "b", 10)).toBe(true);
      expect(await ctx.store.tryLead("coordinator", "a", 10)).toBe(false);
      await ctx.store.resign("coordinator", "b");
      expect(await ctx.store.tryLead("coordinator", "a", 10)).toBe(true);
    });

    it("leads for fractional seconds, by the store's clock", async () => {
      expect(await ctx.store.tryLead("coordinator", "c1", 1.5)).toBe(true);
      expect(await ctx.store.tryLead("coordinator", "c2", 1.5)).toBe(false);
      ctx.clock.advance(1_499);
      expect(await ctx.store.tryLead("coordinator", "c2", 1.5)).toBe(false);
      ctx.clock.advance(1);
      expect(await ctx.store.tryLead("coordinator", "c2", 1.5)).toBe(true);
      expect(await ctx.store.leadershipStatus("coordinator")).toMatchObject({ holder: "c2", leaseExpiresAt: new Date(ctx.clock.now().getTime() + 1_500) });
    });

    it("records the last sweep, which outlives its leader's lease", async () => {
      expect(await ctx.store.leadershipStatus("coordinator")).toEqual({ holder: null, leaseExpiresAt: null, lastSweptBy: null, lastSweptAt: null, secondsSinceSweep: null, sweepIntervalSeconds: null });
      await ctx.store.tryLead("coordinator", "c1", 10);
      await ctx.store.recordSweep("coordinator", "c1", 3.5);
      const sweptAt = ctx.clock.now();
      ctx.clock.advance(4_000);
      expect(await ctx.store.leadershipStatus("coordinator")).toEqual({
        holder: "c1", leaseExpiresAt: new Date(sweptAt.getTime() + 10_000), lastSweptBy: "c1", lastSweptAt: sweptAt, secondsSinceSweep: 4, sweepIntervalSeconds: 3.5,
      });
      await ctx.store.resign("coordinator", "c1");
      ctx.clock.advance(300_000);
      expect(await ctx.store.leadershipStatus("coordinator")).toEqual({ holder: null, leaseExpiresAt: null, lastSweptBy: "c1", lastSweptAt: sweptAt, secondsSinceSweep: 304, sweepIntervalSeconds: 3.5 });
      await ctx.store.tryLead("coordinator", "c2", 10);
      await ctx.store.recordSweep("coordinator", "c2", 200);
      expect(await ctx.store.leadershipStatus("coordinator")).toMatchObject({ holder: "c2", lastSweptBy: "c2", lastSweptAt: ctx.clock.now(), secondsSinceSweep: 0, sweepIntervalSeconds: 200 });
    });

    /** A subscription on the store, set up: resolves to what its first wake-up heard, once `produce` has run on another store. */
    async function firstWakeUp(produce: (producer: Store) => Promise<void>): Promise<string[]> {
      let heard: string[] | null = null;
      // subscribe() resolves once it listens (PostgreSQL's LISTEN answered, the HTTP client's first wait): a fixed 50 ms was not always enough on a loaded machine.
      const unsubscribe = await ctx.store.subscribe((types) => void (heard ??= types));
      try {
        await produce(await ctx.another());
        return await eventually(() => heard, 10_000, "a wake-up");
      } finally {
        await unsubscribe();
      }
    }

    it("wakes subscribers when tasks are enqueued", async () => {
      const heard = await firstWakeUp(async (producer) => void (await producer.enqueue({ taskType: "crawl" })));
      expect(heard).toEqual(["crawl"]);
    });

    it("wakes subscribers for a batch of more task types than a notification can name: the batch is written, and they re-check", async () => {
      // 120 names of 100 characters: 12 KB, past PostgreSQL's 8,000-byte limit on a NOTIFY payload.
      const types = Array.from({ length: 120 }, (_, i) => `t${String(i).padStart(3, "0")}_${"x".repeat(95)}`);
      const heard = await firstWakeUp(async (producer) => {
        const results = await producer.enqueueMany(types.map((taskType) => ({ taskType })));
        expect(results.every((r) => r.created)).toBe(true);
      });
      // Either every type, or none: "something changed, re-check".
      expect(heard.length === 0 || types.every((t) => heard.includes(t))).toBe(true);
    });
  });
}
