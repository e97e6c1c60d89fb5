import { createServer } from "node:http";
import { connect } from "node:net";
import { gzipSync } from "node:zlib";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { Taskpool } from "../../src/api/taskpool.js";
import { HttpStore } from "../../src/client/http-store.js";
import { buildServer } from "../../src/server/server.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { captureLogs, eventually } from "../helpers/logs.js";
import { postgresKind, removeSqliteFiles, sqliteKind, sqlitePath } from "../helpers/stores.js";
import { type Body, request, useServer } from "./harness.js";

const LEASE_LOST = (id: number) => ({
  success: false,
  error: "lease_lost",
  message: `Task ${id} is no longer leased to this worker with this token; stop working on it, its result will not be accepted`,
});

describe.each([sqliteKind, postgresKind])("HTTP API on $name", (kind) => {
  const s = useServer(kind);

  const create = async (body: Record<string, unknown>) => {
    const answer = await s.call("POST", "/api/tasks", body);
    expect(answer.status).toBe(201);
    return answer.body.task as Body;
  };
  const claim = async (workerId: string, extra: Record<string, unknown> = {}) => {
    const answer = await s.call("POST", "/api/tasks/claim", { worker_id: workerId, ...extra });
    expect(answer.status).toBe(200);
    return { task: answer.body.task as Body, lease: { worker_id: workerId, lease_token: answer.body.lease_token as string } };
  };

  it("concurrent creates share inserts on PostgreSQL, each answered 201 with its own task", async () => {
    const batches: number[] = [];
    const enqueueMany = s.pool.protocol.enqueueMany.bind(s.pool.protocol);
    s.pool.protocol.enqueueMany = (inputs) => {
      batches.push(inputs.length);
      return enqueueMany(inputs);
    };
    const answers = await Promise.all(Array.from({ length: 40 }, (_, n) => s.call("POST", "/api/tasks", { task_type: "mail", params: { n } })));
    expect(answers.map((a) => [a.status, a.body.task.params.n])).toEqual(Array.from({ length: 40 }, (_, n) => [201, n]));
    expect(new Set(answers.map((a) => a.body.task.id)).size).toBe(40);
    // On PostgreSQL requests that arrive while an insert is in flight go together (without the batcher,
    // each is its own enqueue). SQLite's writes finish before the server reads the next request.
    if (kind.name === "postgres") expect(batches.length).toBeGreaterThan(0);
  });

  it("a worker's life: create → claim → start → heartbeat → checkpoint → progress → complete, with its timeline", async () => {
    const created = await s.call("POST", "/api/tasks", { task_type: "product_resync", params: { storeId: 42 }, priority: 5, concurrency_key: "store:42" });
    expect(created.status).toBe(201);
    const id = created.body.task.id;
    expect(created.body).toMatchObject({
      success: true,
      created: true,
      task: { task_type: "product_resync", params: { storeId: 42 }, status: "pending", priority: 5, concurrency_key: "store:42", attempts: 0, max_attempts: 3, scheduled_for: s.clock.now().toISOString() },
    });
    expect(created.body.task.backoff).toEqual({ base_seconds: 5, factor: 2, max_seconds: 3600, jitter: 0.2 });

    const claimed = await s.call("POST", "/api/tasks/claim", { worker_id: "w1", task_types: ["product_resync"] });
    expect(claimed.status).toBe(200);
    expect(claimed.body).toMatchObject({ success: true, message: "Task claimed successfully", task: { id, status: "claimed", worker_id: "w1", attempts: 1 } });
    const lease = { worker_id: "w1", lease_token: claimed.body.lease_token };
    expect(lease.lease_token).toBe(claimed.body.task.lease_token);
    expect(claimed.body.tasks).toEqual([claimed.body.task]);

    const started = await s.call("POST", `/api/tasks/${id}/start`, lease);
    expect(started.body).toMatchObject({ success: true, task: { status: "running", started_at: s.clock.now().toISOString() } });
    s.clock.advance(1000);
    const beat = await s.call("POST", `/api/tasks/${id}/heartbeat`, { ...lease, lease_seconds: 300, progress: 0.25 });
    expect(beat.body.task).toMatchObject({ progress: 0.25, lease_expires_at: new Date(s.clock.now().getTime() + 300_000).toISOString() });
    const saved = await s.call("POST", `/api/tasks/${id}/checkpoint`, { ...lease, checkpoint: { page: 3, seen: ["a"] } });
    expect(saved.body.task.checkpoint).toEqual({ page: 3, seen: ["a"] });
    expect((await s.call("POST", `/api/tasks/${id}/progress`, { ...lease, progress: 0.5 })).body.task.progress).toBe(0.5);

    const done = await s.call("POST", `/api/tasks/${id}/complete`, { ...lease, result: { pages: 10 }, follow_ups: [{ task_type: "analytics_refresh", params: { storeId: 42 }, priority: 1 }] });
    expect(done.status).toBe(200);
    expect(done.body.task).toMatchObject({ status: "completed", result: { pages: 10 }, completed_at: s.clock.now().toISOString() });
    expect(done.body.follow_ups).toHaveLength(1);
    expect(done.body.follow_ups[0]).toMatchObject({ task_type: "analytics_refresh", params: { storeId: 42 }, parent_id: id, status: "pending" });

    const shown = await s.call("GET", `/api/tasks/${id}`);
    expect(shown.status).toBe(200);
    // A read answers the task as the completion did, less its lease token (told only to the worker holding it).
    const { lease_token: token, ...read } = done.body.task;
    expect(token).toBe(lease.lease_token);
    expect(shown.body.task).toEqual(read);
    expect(shown.body.events.map((e: { event: string }) => e.event)).toEqual(["created", "claimed", "started", "checkpoint", "completed"]);
    expect(shown.body.events[3]).toMatchObject({ task_id: id, to_worker_id: "w1", data: { page: 3, seen: ["a"] } });
  });

  it("claim follows seed 002: filters, sorts, batch limit, and 404 echoing the filters", async () => {
    expect(await s.call("POST", "/api/tasks/claim", { worker_id: "worker-youtube-01", task_types: ["youtube_video_scrape"], max_attempts_remaining: 1 })).toMatchObject({
      status: 404,
      body: { success: false, error: "no_tasks", message: "No pending tasks available", filters: { task_types: ["youtube_video_scrape"], max_attempts_remaining: 1 } },
    });
    const none = await s.call("POST", "/api/tasks/claim", { worker_id: "w1" });
    expect(none.body).toEqual({ success: false, error: "no_tasks", message: "No pending tasks available", filters: { task_types: null, max_attempts_remaining: null } });

    const low = await create({ task_type: "scrape", priority: 1 });
    s.clock.advance(1000);
    const high = await create({ task_type: "scrape", priority: 9 });
    s.clock.advance(1000);
    const other = await create({ task_type: "other", priority: 100 });
    expect((await claim("w1", { task_types: ["scrape"], sort_by: "created_at" })).task.id).toBe(low.id);
    const batch = await s.call("POST", "/api/tasks/claim", { worker_id: "w2", limit: 5, sort_by: "priority", sort_order: "desc" });
    expect(batch.body.tasks.map((t: { id: number }) => t.id)).toEqual([other.id, high.id]);
    expect(batch.body).toMatchObject({ message: "2 tasks claimed successfully", task: { id: other.id }, lease_token: batch.body.tasks[0].lease_token });
  });

  it("concurrent claims (shared out in one statement) each get their own task, their own filters, or 404", async () => {
    const ids = [];
    for (let i = 0; i < 10; i++) ids.push((await create({ task_type: "scrape", priority: i })).id);
    const other = await create({ task_type: "other" });
    const answers = await Promise.all([
      ...Array.from({ length: 12 }, (_, i) => s.call("POST", "/api/tasks/claim", { worker_id: `w${i}`, task_types: ["scrape"] })),
      s.call("POST", "/api/tasks/claim", { worker_id: "w-other", task_types: ["other"] }),
      s.call("POST", "/api/tasks/claim", { worker_id: "w-bad", task_types: [""] }),
    ]);
    const scrapes = answers.slice(0, 12);
    expect(scrapes.filter((a) => a.status === 404)).toHaveLength(2);
    const won = scrapes.filter((a) => a.status === 200);
    expect(won.map((a) => a.body.task.id).sort((a, b) => a - b)).toEqual(ids);
    scrapes.forEach((a, i) => a.status === 200 && expect(a.body.task).toMatchObject({ status: "claimed", worker_id: `w${i}` }));
    expect(answers[12]).toMatchObject({ status: 200, body: { task: { id: other.id, worker_id: "w-other" } } });
    expect(answers[13].status).toBe(400);
  });

  it("concurrent worker heartbeats (written together) each register their worker and learn only their own lost leases", async () => {
    await create({ task_type: "crawl" });
    const held = await claim("w0");
    const beat = (workerId: string, leases: unknown[] = []) => s.call("POST", "/api/workers/heartbeat", { worker_id: workerId, roles: ["crawl"], capacity: 2, current_load: leases.length, tasks_processed: 0, leases });
    const lease = { task_id: held.task.id, lease_token: held.lease.lease_token };
    const answers = await Promise.all([
      beat("w0", [lease]),
      ...Array.from({ length: 10 }, (_, i) => beat(`w${i + 1}`, i === 0 ? [lease] : [])),
      // The same worker twice at once: its second beat waits for the first one's batch.
      beat("w0", [lease]),
    ]);
    expect(answers.map((a) => a.status)).toEqual(Array(12).fill(200));
    expect(answers[0].body).toEqual({ success: true, message: "Heartbeat recorded", next_heartbeat_in: 30, lost: [] });
    expect(answers[1].body.lost).toEqual([held.task.id]);
    expect(answers[11].body.lost).toEqual([]);
    const workers = (await s.call("GET", "/api/workers")).body.workers as { worker_id: string; status: string }[];
    expect(workers.map((w) => w.worker_id).sort()).toEqual(Array.from({ length: 11 }, (_, i) => `w${i}`).sort());
    expect(workers.every((w) => w.status === "active")).toBe(true);
  });

  it("claim by id: 409 already_claimed when another worker holds it, 404 when it does not exist", async () => {
    const task = await create({ task_type: "crawl" });
    const mine = await s.call("POST", `/api/tasks/${task.id}/claim`, { worker_id: "w1", lease_seconds: 60 });
    expect(mine.body).toMatchObject({ success: true, message: "Task claimed successfully", task: { id: task.id, worker_id: "w1" } });
    expect(mine.body.lease_token).toEqual(expect.any(String));
    expect(await s.call("POST", `/api/tasks/${task.id}/claim`, { worker_id: "w2" })).toMatchObject({
      status: 409,
      body: { success: false, error: "already_claimed" },
    });
    // SPEC's and seed 002's wording, which clients match on, first: the task's id after it.
    expect((await s.call("POST", `/api/tasks/${task.id}/claim`, { worker_id: "w2" })).body.message).toBe(`Task already claimed by another worker (task ${task.id})`);
    const missing = await s.call("POST", "/api/tasks/999999/claim", { worker_id: "w2" });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ success: false, error: "not_found", message: "Task 999999 does not exist" });
  });

  it("a cancelled task's holder is told so as the cancel route's description says: 409 invalid_transition, and lost on a worker heartbeat", async () => {
    const task = await create({ task_type: "crawl" });
    const held = await claim("w1", { start: true });
    expect((await s.call("POST", `/api/tasks/${task.id}/cancel`, { reason: "not needed" })).status).toBe(200);
    const refused = await s.call("POST", `/api/tasks/${task.id}/heartbeat`, held.lease);
    expect(refused).toMatchObject({ status: 409, body: { error: "invalid_transition", message: `Cannot heartbeat task ${task.id}: it is cancelled` } });
    const beat = await s.call("POST", "/api/workers/heartbeat", { worker_id: "w1", leases: [{ task_id: task.id, lease_token: held.lease.lease_token }] });
    expect(beat.body.lost).toEqual([task.id]);
    // The OpenAPI document told a worker of its own to expect lease_lost, which never comes for a cancel.
    const doc = (await s.call("GET", "/openapi.json")).body;
    const description: string = doc.paths["/api/tasks/{id}/cancel"].post.description;
    expect(description).toContain("409 invalid_transition");
    expect(description).toContain("`lost`");
    expect(description).not.toContain("lease_lost");
  });

  it("a stale lease is refused over HTTP with 409 lease_lost and changes nothing", async () => {
    const task = await create({ task_type: "crawl" });
    const old = await claim("w1", { lease_seconds: 30 });
    await s.call("POST", `/api/tasks/${task.id}/start`, old.lease);
    await s.call("POST", `/api/tasks/${task.id}/checkpoint`, { ...old.lease, checkpoint: { page: 1 } });
    s.clock.advance(31_000);
    const swept = await s.call("POST", "/api/tasks/recover-stale");
    expect(swept.status).toBe(200);
    expect(swept.body).toMatchObject({ success: true, requeued: [task.id], failed: [], stale_workers: [], dead_workers: [] });
    expect(swept.body.message).toMatch(/^0 dead and 0 stale workers; 1 task requeued, 0 failed/);
    const fresh = await claim("w2");
    expect(fresh.task).toMatchObject({ id: task.id, checkpoint: { page: 1 }, attempts: 2 });

    for (const [action, extra] of [["complete", { result: { stale: true } }], ["checkpoint", { checkpoint: { page: 99 } }], ["heartbeat", {}], ["fail", { error: "late" }], ["release", {}]] as const) {
      const refused = await s.call("POST", `/api/tasks/${task.id}/${action}`, { ...old.lease, ...extra });
      expect(refused.status, action).toBe(409);
      expect(refused.body).toEqual(LEASE_LOST(task.id));
    }
    const now = (await s.call("GET", `/api/tasks/${task.id}`)).body.task;
    expect(now).toMatchObject({ status: "claimed", worker_id: "w2", checkpoint: { page: 1 }, result: null });
    expect((await s.call("POST", `/api/tasks/${task.id}/complete`, { ...fresh.lease, result: { ok: 1 } })).body.task.status).toBe("completed");
  });

  it("claim_next: complete and fail claim the worker's next task in the same request; a refused outcome or a bad claim_next claims nothing", async () => {
    const [a, b, c] = [await create({ task_type: "crawl", priority: 3 }), await create({ task_type: "crawl", priority: 2 }), await create({ task_type: "crawl", priority: 1 })];
    const other = await create({ task_type: "mail" });
    const first = await claim("w1", { task_types: ["crawl"], start: true });
    expect(first.task.id).toBe(a.id);

    const completed = await s.call("POST", `/api/tasks/${a.id}/complete`, { ...first.lease, result: { n: 1 }, claim_next: { task_types: ["crawl"], start: true } });
    expect(completed.status).toBe(200);
    expect(completed.body.task).toMatchObject({ id: a.id, status: "completed", result: { n: 1 } });
    expect(completed.body.next_tasks).toHaveLength(1);
    const next = completed.body.next_tasks[0];
    expect(next).toMatchObject({ id: b.id, status: "running", worker_id: "w1", attempts: 1 });
    expect(typeof next.lease_token).toBe("string");
    const timeline = (await s.call("GET", `/api/tasks/${b.id}`)).body.events.map((e: Body) => e.event);
    expect(timeline).toEqual(["created", "claimed"]);

    // A failure asks for up to 5: only c is ready (b backs off before its retry).
    const failed = await s.call("POST", `/api/tasks/${b.id}/fail`, { worker_id: "w1", lease_token: next.lease_token, error: "flaky", claim_next: { task_types: ["crawl"], limit: 5 } });
    expect(failed.status).toBe(200);
    expect(failed.body.task).toMatchObject({ id: b.id, status: "pending", attempts: 1 });
    expect(failed.body.next_tasks.map((t: Body) => [t.id, t.status])).toEqual([[c.id, "claimed"]]);
    const lastLease = { worker_id: "w1", lease_token: failed.body.next_tasks[0].lease_token };

    // Nothing ready of its types: the outcome is written and next_tasks is empty; without claim_next there is no next_tasks.
    const done = await s.call("POST", `/api/tasks/${c.id}/complete`, { ...lastLease, claim_next: { task_types: ["crawl"] } });
    expect(done.body).toMatchObject({ success: true, task: { id: c.id, status: "completed" }, next_tasks: [] });
    const plain = await claim("w2", { task_types: ["mail"] });
    expect(plain.task.id).toBe(other.id);

    // Refused: a stale token, and a claim_next the claim would refuse. Neither writes the outcome, and no task stays claimed.
    const spare = await create({ task_type: "mail" });
    const stale = await s.call("POST", `/api/tasks/${b.id}/complete`, { worker_id: "w1", lease_token: next.lease_token, claim_next: {} });
    expect(stale).toMatchObject({ status: 409, body: LEASE_LOST(b.id) });
    expect((await s.call("POST", `/api/tasks/${c.id}/complete`, { ...lastLease, claim_next: {} })).body.error).toBe("invalid_transition");
    for (const [claimNext, field] of [[{ limit: 0 }, "claim_next.limit"], [{ worker_id: "w9" }, "claim_next"], [{ sort_by: "size" }, "claim_next.sort_by"]] as const) {
      const refused = await s.call("POST", `/api/tasks/${other.id}/complete`, { ...plain.lease, claim_next: claimNext });
      expect(refused.status, JSON.stringify(claimNext)).toBe(400);
      expect(refused.body).toMatchObject({ success: false, error: "validation_error" });
      expect(refused.body.message).toContain(field);
    }
    expect((await s.call("GET", `/api/tasks/${other.id}`)).body.task).toMatchObject({ status: "claimed", worker_id: "w2" });
    expect((await s.call("GET", `/api/tasks/${spare.id}`)).body.task).toMatchObject({ status: "pending", worker_id: null });
    expect((await s.call("GET", `/api/tasks/${b.id}`)).body.task).toMatchObject({ status: "pending", attempts: 1 });
  });

  // On SQLite the store answers within the request's own turn of the event loop, so the answer is
  // handed to the socket before the server reads the client's hang-up: the task then goes back when
  // its lease runs out. On PostgreSQL the hang-up arrives while the statements run.
  it.runIf(kind.name === "postgres")("claim_next for a client that hung up: its next task goes back at once", async () => {
    const a = await create({ task_type: "crawl" });
    const b = await create({ task_type: "crawl" });
    const first = await claim("w1", { task_types: ["crawl"] });
    const body = JSON.stringify({ ...first.lease, claim_next: { task_types: ["crawl"] } });
    const { hostname, port } = new URL(s.url);
    const socket = connect(Number(port), hostname);
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write(`POST /api/tasks/${a.id}/complete HTTP/1.1\r\nhost: ${hostname}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    socket.destroy();
    await eventually(async () => (await s.call("GET", `/api/tasks/${b.id}`)).body.events.some((e: Body) => e.event === "released"), 10_000, "the next task released");
    expect((await s.call("GET", `/api/tasks/${a.id}`)).body.task.status).toBe("completed");
    expect((await s.call("GET", `/api/tasks/${b.id}`)).body.task).toMatchObject({ status: "pending", worker_id: null, attempts: 0 });
  });

  it("fail retries after backoff or fails for good; release keeps the attempt; retry and cancel are operator actions", async () => {
    const task = await create({ task_type: "crawl", max_attempts: 2 });
    let held = await claim("w1");
    const failed = await s.call("POST", `/api/tasks/${task.id}/fail`, { ...held.lease, error: "timeout" });
    expect(failed.body.task).toMatchObject({ status: "pending", attempts: 1, error_message: "timeout" });
    expect(Date.parse(failed.body.task.scheduled_for)).toBeGreaterThan(s.clock.now().getTime());
    s.clock.advance(3_600_000);
    held = await claim("w1");
    const released = await s.call("POST", `/api/tasks/${task.id}/release`, { ...held.lease, checkpoint: { page: 4 }, reason: "shutting down" });
    expect(released.body.task).toMatchObject({ status: "pending", attempts: 1, checkpoint: { page: 4 }, worker_id: null });
    held = await claim("w1");
    // A Java trace passes 10,000 characters easily: the failure is stored cut, not refused (its task then waited out its lease).
    const longError = `bad params: ${"x".repeat(20_000)}`;
    const dead = await s.call("POST", `/api/tasks/${task.id}/fail`, { ...held.lease, error: longError, retryable: false, stack: `at ${"Frame.call\n".repeat(3000)}` });
    expect(dead.body.task.status).toBe("failed");
    expect(dead.body.task.error_message).toBe(`${longError.slice(0, 9980)}… (truncated)`);
    const failedEvent = (await s.call("GET", `/api/tasks/${task.id}`)).body.events.at(-1);
    expect([failedEvent.event, failedEvent.data.stack.length, failedEvent.data.stack.endsWith("… (truncated)")]).toEqual(["failed", 9993, true]);
    expect((await s.call("GET", "/api/tasks?status=failed")).body.tasks.map((t: { id: number }) => t.id)).toEqual([task.id]);

    const retried = await s.call("POST", `/api/tasks/${task.id}/retry`);
    expect(retried.body.task).toMatchObject({ status: "pending", attempts: 0 });
    expect(await s.call("POST", `/api/tasks/${task.id}/retry`)).toMatchObject({
      status: 409,
      body: { success: false, error: "invalid_transition", message: `Cannot retry task ${task.id}: it is pending (only failed tasks can be retried)` },
    });
    held = await claim("w1");
    const cancelled = await s.call("POST", `/api/tasks/${task.id}/cancel`, { reason: "not needed" });
    expect(cancelled.body.task.status).toBe("cancelled");
    // The worker learns at its next call.
    expect((await s.call("POST", `/api/tasks/${task.id}/start`, held.lease)).status).toBe(409);
    expect((await s.call("POST", `/api/tasks/${task.id}/cancel`)).status).toBe(409);
    expect(await s.call("POST", "/api/tasks/424242/cancel")).toMatchObject({ status: 404, body: { error: "not_found", message: "Task 424242 does not exist" } });
  });

  it("batch create is all or nothing, naming the bad item", async () => {
    const ok = await s.call("POST", "/api/tasks/batch", { tasks: [{ task_type: "a", params: { n: 1 } }, { task_type: "b", unique_key: "k" }, { task_type: "b", unique_key: "k" }] });
    expect(ok.status).toBe(201);
    expect(ok.body.results.map((r: { created: boolean }) => r.created)).toEqual([true, true, false]);
    expect(ok.body.results[2].task.id).toBe(ok.body.results[1].task.id);
    const bad = await s.call("POST", "/api/tasks/batch", { tasks: [{ task_type: "a" }, { task_type: "1bad" }] });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({
      success: false,
      error: "validation_error",
      message: 'Invalid request body: tasks.1.task_type: must be a letter, then letters, digits, _ . : - (128 at most), e.g. product_resync (got "1bad")',
      issues: [{ path: "tasks.1.task_type", message: 'must be a letter, then letters, digits, _ . : - (128 at most), e.g. product_resync (got "1bad")' }],
    });
    expect((await s.call("GET", "/api/tasks/counts")).body.by_status.pending).toBe(2);
    // Nothing made, as a single create of a held unique key says: 200, not 201 Created.
    expect(await s.call("POST", "/api/tasks/batch", { tasks: [] })).toMatchObject({ status: 200, body: { results: [] } });
    const held = await s.call("POST", "/api/tasks/batch", { tasks: [{ task_type: "b", unique_key: "k" }] });
    expect([held.status, held.body.results[0].created]).toEqual([200, false]);
  });

  it("an item refused for its registered params schema is named by its path in the body, in a batch and in follow-ups", async () => {
    await s.call("POST", "/api/task-types", { name: "typed", params_schema: { type: "object", properties: { storeId: { type: "integer" } }, required: ["storeId"] } });
    const message = "item 1: Invalid params for typed v1: params.storeId: must be integer";
    const issues = (path: string) => [{ path, message: "must be integer" }];
    const bad = await s.call("POST", "/api/tasks/batch", { tasks: [{ task_type: "a" }, { task_type: "typed", params: { storeId: "x" } }] });
    expect(bad).toMatchObject({ status: 400, body: { error: "validation_error", message, issues: issues("tasks.1.params.storeId") } });
    await s.call("POST", "/api/tasks", { task_type: "a" });
    const { task } = (await s.call("POST", "/api/tasks/claim", { worker_id: "w1" })).body;
    const completion = { worker_id: "w1", lease_token: task.lease_token, follow_ups: [{ task_type: "a" }, { task_type: "typed", params: { storeId: "x" } }] };
    const refused = await s.call("POST", `/api/tasks/${task.id}/complete`, completion);
    expect(refused).toMatchObject({ status: 400, body: { error: "validation_error", message, issues: issues("follow_ups.1.params.storeId") } });
  });

  it("Idempotency-Key: a repeated create answers the first call's task (200, replayed), whatever its state; another request with the key is 422", async () => {
    const key = { "idempotency-key": "order-7:receipt" };
    const first = await s.call("POST", "/api/tasks", { task_type: "mail", params: { order: 7 } }, { headers: key });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ success: true, created: true });
    expect(first.body).not.toHaveProperty("replayed");
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const { lease } = await claim("w1");
    const again = await s.call("POST", "/api/tasks", { params: { order: 7 }, task_type: "mail" }, { headers: key });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ success: true, created: false, replayed: true, task: { id: first.body.task.id, status: "claimed", worker_id: lease.worker_id } });
    expect(again.headers.get("idempotent-replayed")).toBe("true");

    const other = await s.call("POST", "/api/tasks", { task_type: "mail", params: { order: 8 } }, { headers: key });
    expect(other.status).toBe(422);
    expect(other.body).toEqual({
      success: false,
      error: "idempotency_key_reused",
      message:
        'Idempotency key "order-7:receipt" was already used for a different enqueue request; a key may only be sent again with the same request (a retry): use a new key for new tasks',
    });

    const batch = { tasks: [{ task_type: "a" }, { task_type: "b", params: { n: 1 } }] };
    const made = await s.call("POST", "/api/tasks/batch", batch, { headers: { "idempotency-key": "batch-1" } });
    expect(made.status).toBe(201);
    const repeated = await s.call("POST", "/api/tasks/batch", batch, { headers: { "idempotency-key": "batch-1" } });
    expect(repeated.status).toBe(200);
    expect(repeated.headers.get("idempotent-replayed")).toBe("true");
    expect(repeated.body.results.map((r: Body) => [r.task.id, r.created, r.replayed])).toEqual(made.body.results.map((r: Body) => [r.task.id, false, true]));
    const fewer = await s.call("POST", "/api/tasks/batch", { tasks: batch.tasks.slice(1) }, { headers: { "idempotency-key": "batch-1" } });
    expect(fewer).toMatchObject({ status: 422, body: { error: "idempotency_key_reused" } });
    expect((await s.call("GET", "/api/tasks/counts")).body.by_status).toMatchObject({ pending: 2, claimed: 1 });
  });

  it("Idempotency-Key: a repeat after retention deleted the first call's task is a 404 naming it, as the OpenAPI document says", async () => {
    const key = { "idempotency-key": "order-9" };
    const first = await s.call("POST", "/api/tasks", { task_type: "mail" }, { headers: key });
    const { task, lease } = await claim("w1");
    await s.call("POST", `/api/tasks/${task.id}/complete`, lease);
    s.clock.advance(3600_000);
    await s.pool.protocol.prune({ completedAfterSeconds: 60, cancelledAfterSeconds: 60, failedAfterSeconds: null, batchSize: 500 });
    const again = await s.call("POST", "/api/tasks", { task_type: "mail" }, { headers: key });
    expect(again).toMatchObject({ status: 404, body: { error: "not_found", message: expect.stringMatching(new RegExp(`^Task ${first.body.task.id}, created by the first call with idempotency key "order-9", was deleted by retention since`)) } });
    const doc = (await s.call("GET", "/openapi.json")).body;
    for (const path of ["/api/tasks", "/api/tasks/batch"]) expect(Object.keys(doc.paths[path].post.responses), path).toContain("404");
  });

  it("a bad Idempotency-Key is a 400 naming the header and what it may hold, and creates nothing", async () => {
    for (const [path, body] of [
      ["/api/tasks", { task_type: "a" }],
      ["/api/tasks/batch", { tasks: [{ task_type: "a" }] }],
    ] as const) {
      for (const value of ["has space", "x".repeat(256), "caf\u00e9"]) {
        const answer = await s.call("POST", path, body, { headers: { "idempotency-key": value } });
        expect(answer.status, value).toBe(400);
        expect(answer.body).toMatchObject({ success: false, error: "validation_error", message: expect.stringMatching(/^Invalid headers: idempotency-key: /) });
      }
      const spaced = await s.call("POST", path, body, { headers: { "idempotency-key": "has space" } });
      expect(spaced.body.message).toBe('Invalid headers: idempotency-key: must be 1 to 255 visible ASCII characters, no spaces (a UUID is the usual choice) (got "has space")');
    }
    expect((await s.call("GET", "/api/tasks/counts")).body.by_status.pending).toBe(0);
    const doc = (await s.call("GET", "/openapi.json")).body;
    for (const path of ["/api/tasks", "/api/tasks/batch"]) {
      const header = doc.paths[path].post.parameters.find((p: Body) => p.in === "header" && p.name === "idempotency-key");
      expect(header, path).toMatchObject({ required: false, schema: { type: "string", maxLength: 255 } });
      expect(doc.paths[path].post.responses["422"]).toBeDefined();
    }
  });

  it("lists with filters and cursor paging; counts; capacity per role in seed 004's shape", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push((await create({ task_type: i < 3 ? "product_resync" : "analytics_refresh" })).id);
    await claim("w9", { task_types: ["analytics_refresh"] });

    const first = await s.call("GET", "/api/tasks?limit=2");
    expect(first.body.tasks.map((t: { id: number }) => t.id)).toEqual([ids[4], ids[3]]);
    const second = await s.call("GET", `/api/tasks?limit=2&cursor=${first.body.next_cursor}`);
    expect(second.body.tasks.map((t: { id: number }) => t.id)).toEqual([ids[2], ids[1]]);
    const last = await s.call("GET", `/api/tasks?limit=2&cursor=${second.body.next_cursor}`);
    expect(last.body).toEqual({ success: true, tasks: [expect.objectContaining({ id: ids[0] })], next_cursor: null });
    expect((await s.call("GET", "/api/tasks?task_type=product_resync&order=oldest")).body.tasks.map((t: { id: number }) => t.id)).toEqual(ids.slice(0, 3));
    expect((await s.call("GET", "/api/tasks?status=claimed&status=running&worker_id=w9")).body.tasks).toHaveLength(1);

    const counts = await s.call("GET", "/api/tasks/counts");
    expect(counts.body).toEqual({
      success: true,
      by_status: { pending: 4, claimed: 1, running: 0, completed: 0, failed: 0, cancelled: 0 },
      by_type: { product_resync: { pending: 3 }, analytics_refresh: { pending: 1, claimed: 1 } },
    });

    await s.call("POST", "/api/workers/heartbeat", { worker_id: "w9", roles: ["product_resync"], capacity: 4, current_load: 0, tasks_processed: 0 });
    const all = await s.call("GET", "/api/tasks/capacity");
    expect(all.body.capacity.map((r: { task_type: string }) => r.task_type).sort()).toEqual(["analytics_refresh", "product_resync"]);
    const one = await s.call("GET", "/api/tasks/capacity/product_resync");
    expect(one.body).toMatchObject({ success: true, task_type: "product_resync", pending_tasks: 3, running_tasks: 0, active_workers: 1, completed_last_hour: 0, max_running: null });
    expect(Object.keys(one.body).sort()).toEqual([
      "active_workers", "completed_last_hour", "estimated_hours_to_drain", "max_running", "oldest_ready_seconds", "pending_tasks", "ready_tasks",
      "running_tasks", "success", "task_type", "tasks_per_worker_hour", "workers_needed",
    ]);
    expect(Object.keys(one.body.workers_needed)).toEqual(["for_1_hour", "for_4_hours", "for_8_hours"]);
    expect(await s.call("GET", "/api/tasks/capacity/youtube")).toMatchObject({
      status: 404,
      body: { success: false, error: "not_found", message: 'No capacity figures for task type "youtube": it has no pending or running task, none completed in the last hour, no active worker and no registration' },
    });
    // A role whose only task failed for good has no figures either, and the answer must not say it has no tasks.
    const dead = await create({ task_type: "dead_end", max_attempts: 1 });
    const held = await claim("w9", { task_types: ["dead_end"] });
    expect((await s.call("POST", `/api/tasks/${dead.id}/fail`, { ...held.lease, error: "gone" })).body.task.status).toBe("failed");
    expect((await s.call("GET", "/api/tasks/capacity/dead_end")).body.message).toBe(
      'No capacity figures for task type "dead_end": it has no pending or running task, none completed in the last hour, no active worker and no registration',
    );
  });

  it("a cursor pages only the listing it was made for: another order or other filters are refused naming cursor, not read from the wrong end", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push((await create({ task_type: i < 3 ? "crawl" : "mail" })).id);
    const newest = await s.call("GET", "/api/tasks?limit=2&order=newest");
    const refused = await s.call("GET", `/api/tasks?limit=2&order=oldest&cursor=${newest.body.next_cursor}`);
    expect(refused).toMatchObject({
      status: 400,
      body: {
        error: "validation_error",
        message: "Invalid cursor: it pages newest first, and this call asks for oldest first: pass the order of the page that gave it (newest), or start again without a cursor",
        issues: [{ path: "cursor" }],
      },
    });
    // The default order is newest: the cursor goes on with it.
    expect((await s.call("GET", `/api/tasks?limit=2&cursor=${newest.body.next_cursor}`)).body.tasks.map((t: Body) => t.id)).toEqual([ids[2], ids[1]]);
    const crawl = await s.call("GET", "/api/tasks?limit=1&task_type=crawl&order=oldest&status=pending&status=failed");
    expect(crawl.body.tasks.map((t: Body) => t.id)).toEqual([ids[0]]);
    for (const other of ["task_type=mail&status=pending&status=failed", "task_type=crawl&status=pending", "task_type=crawl&status=pending&status=failed&search=x"]) {
      expect(await s.call("GET", `/api/tasks?limit=1&order=oldest&${other}&cursor=${crawl.body.next_cursor}`)).toMatchObject({
        status: 400,
        body: {
          error: "validation_error",
          message: "Invalid cursor: it was made for a listing with other filters: pass the filters of the page that gave it, or start again without a cursor",
          issues: [{ path: "cursor" }],
        },
      });
    }
    // The same filters, the statuses in another order or repeated, and another page size, go on.
    const next = await s.call("GET", `/api/tasks?limit=2&order=oldest&status=failed&status=pending&status=failed&task_type=crawl&cursor=${crawl.body.next_cursor}`);
    expect(next.body.tasks.map((t: Body) => t.id)).toEqual([ids[1], ids[2]]);
  });

  it("worker heartbeat follows seed 000; the registry shows load and active tasks; shutdown releases what it holds", async () => {
    const beat = { worker_id: "worker-youtube-01", roles: ["crawl"], hostname: "server-01", pid: 12345, version: "1.0.0", capacity: 4, current_load: 1, tasks_processed: 42, metadata: { region: "eu" } };
    const answer = await s.call("POST", "/api/workers/heartbeat", beat);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ success: true, message: "Heartbeat recorded", next_heartbeat_in: 30, lost: [] });

    const task = await create({ task_type: "crawl" });
    const held = await claim("worker-youtube-01");
    const other = await create({ task_type: "crawl" });
    const renewed = await s.call("POST", "/api/workers/heartbeat", { ...beat, leases: [{ task_id: task.id, lease_token: held.lease.lease_token }, { task_id: other.id, lease_token: "stale-token" }] });
    expect(renewed.body.lost).toEqual([other.id]);

    s.clock.advance(5000);
    const registry = await s.call("GET", "/api/workers");
    expect(registry.body.workers).toEqual([
      expect.objectContaining({
        worker_id: "worker-youtube-01",
        roles: ["crawl"],
        hostname: "server-01",
        pid: 12345,
        status: "active",
        capacity: 4,
        current_load: 1,
        tasks_processed: 42,
        metadata: { region: "eu" },
        active_tasks: 1,
        seconds_since_heartbeat: 5,
        load_percent: 25,
      }),
    ]);

    const shutdown = await s.call("POST", "/api/workers/worker-youtube-01/shutdown");
    expect(shutdown.body).toEqual({ success: true, message: "Worker worker-youtube-01 shut down; 1 task released", released: [task.id] });
    expect((await s.call("GET", `/api/tasks/${task.id}`)).body.task).toMatchObject({ status: "pending", worker_id: null });
    expect((await s.call("GET", "/api/workers")).body.workers[0].status).toBe("inactive");
    const typo = await s.call("POST", "/api/workers/worker-youtube-1/shutdown");
    expect([typo.status, typo.body]).toEqual([
      404,
      // The route that lists them, not the CLI's command: an HTTP caller may have no CLI.
      { success: false, error: "not_found", message: 'Worker "worker-youtube-1" is not in the registry: it never sent a heartbeat, or retention removed it (GET /api/workers lists them)' },
    ]);
  });

  it("the registry lists live workers and folds gone ones: counts by status, next_cursor, status/worker_id/limit filters; bad values are a 400 naming them", async () => {
    for (let i = 0; i < 5; i++) {
      await s.call("POST", "/api/workers/heartbeat", { worker_id: `gone-${i}`, roles: ["crawl"] });
      await s.call("POST", `/api/workers/gone-${i}/shutdown`);
      s.clock.advance(1000);
    }
    await s.call("POST", "/api/workers/heartbeat", { worker_id: "live-1", roles: ["crawl"] });
    const names = (answer: { body: Body }) => answer.body.workers.map((w: Body) => w.worker_id);

    const first = await s.call("GET", "/api/workers?limit=2");
    expect(names(first)).toEqual(["live-1", "gone-4", "gone-3"]);
    expect(first.body).toMatchObject({ success: true, counts: { active: 1, stale: 0, dead: 0, inactive: 5 }, next_cursor: expect.any(String) });
    const rest = await s.call("GET", `/api/workers?limit=2&cursor=${first.body.next_cursor}`);
    expect(names(rest)).toEqual(["gone-2", "gone-1"]);
    expect(names(await s.call("GET", `/api/workers?limit=2&cursor=${rest.body.next_cursor}`))).toEqual(["gone-0"]);
    expect(names(await s.call("GET", "/api/workers?status=inactive&status=dead&limit=1"))).toEqual(["gone-4"]);
    expect(names(await s.call("GET", "/api/workers?worker_id=gone-0"))).toEqual(["gone-0"]);

    for (const [query, path] of [["limit=0", "limit"], ["limit=1001", "limit"], ["status=gone", "status"], ["worker_id=not%20an%20id", "worker_id"], ["colour=red", "colour"]]) {
      const bad = await s.call("GET", `/api/workers?${query}`);
      expect([bad.status, bad.body.error], query).toEqual([400, "validation_error"]);
      expect(JSON.stringify(bad.body.issues), query).toContain(path);
    }
    expect(await s.call("GET", `/api/workers?status=active&cursor=${first.body.next_cursor}`)).toMatchObject({
      status: 400,
      body: { error: "validation_error", message: expect.stringMatching(/^Invalid cursor: it was made for a listing with other filters/), issues: [{ path: "cursor" }] },
    });
  });

  it("a shutdown may name its run (run_id): one of a run replaced since answers 200, nothing released, and changes nothing; no body is still the current run's", async () => {
    const worker = async () => (await s.call("GET", "/api/workers")).body.workers.find((w: Body) => w.worker_id === "w1");
    await s.call("POST", "/api/workers/heartbeat", { worker_id: "w1", roles: ["crawl"], run_id: "run-1" });
    // Restarted under its id before run-1's shutdown landed.
    await s.call("POST", "/api/workers/heartbeat", { worker_id: "w1", roles: ["crawl"], run_id: "run-2" });
    const task = await create({ task_type: "crawl" });
    await claim("w1");
    const late = await s.call("POST", "/api/workers/w1/shutdown", { run_id: "run-1" });
    expect([late.status, late.body]).toEqual([200, { success: true, message: "Run run-1 of worker w1 shut down; 0 tasks released", released: [] }]);
    expect(await worker()).toMatchObject({ status: "active", active_tasks: 1 });
    const camel = await s.call("POST", "/api/workers/w1/shutdown", { runId: "run-2" });
    expect([camel.status, camel.body.issues]).toEqual([400, [{ path: "runId", message: "Unexpected property (got \"run-2\"); the API's fields are snake_case: run_id" }]]);
    expect((await s.call("POST", "/api/workers/w1/shutdown", { run_id: "" })).body.issues).toEqual([{ path: "run_id", message: 'Expected string length greater or equal to 1 (got "")' }]);
    expect(await worker()).toMatchObject({ status: "active", active_tasks: 1 });
    const own = await s.call("POST", "/api/workers/w1/shutdown", { run_id: "run-2" });
    expect([own.status, own.body]).toEqual([200, { success: true, message: "Run run-2 of worker w1 shut down; 1 task released", released: [task.id] }]);
    expect(await worker()).toMatchObject({ status: "inactive", active_tasks: 0 });
  });

  it("worker heartbeat takes seed 000's body as it is (worker_id and metadata): a new worker gets defaults, a known one keeps what it said", async () => {
    const seedBeat = { worker_id: "worker-youtube-01", metadata: { hostname: "server-01", pid: 12345, version: "1.0.0", tasks_processed: 42 } };
    const answer = await s.call("POST", "/api/workers/heartbeat", seedBeat);
    expect([answer.status, answer.body]).toEqual([200, { success: true, message: "Heartbeat recorded", next_heartbeat_in: 30, lost: [] }]);
    const worker = async () => (await s.call("GET", "/api/workers")).body.workers.find((w: Body) => w.worker_id === "worker-youtube-01");
    expect(await worker()).toMatchObject({ roles: [], capacity: 1, current_load: 0, tasks_processed: 0, status: "active", metadata: seedBeat.metadata });

    // A worker that said more before keeps it when a beat leaves it out; what a beat says wins.
    await s.call("POST", "/api/workers/heartbeat", { worker_id: "worker-youtube-01", roles: ["crawl"], capacity: 4, current_load: 2, tasks_processed: 7 });
    s.clock.advance(1000);
    expect((await s.call("POST", "/api/workers/heartbeat", seedBeat)).status).toBe(200);
    expect(await worker()).toMatchObject({ roles: ["crawl"], capacity: 4, current_load: 2, tasks_processed: 7, seconds_since_heartbeat: 0, metadata: seedBeat.metadata });
    expect((await s.call("POST", "/api/workers/heartbeat", { worker_id: "worker-youtube-01", current_load: 3 })).status).toBe(200);
    expect(await worker()).toMatchObject({ roles: ["crawl"], capacity: 4, current_load: 3, tasks_processed: 7 });
    // Only worker_id is required.
    const bare = await s.call("POST", "/api/workers/heartbeat", { metadata: {} });
    expect([bare.status, bare.body.issues]).toEqual([400, [{ path: "worker_id", message: expect.any(String) }]]);
  });

  it("reassignment history and seed 003's statistics", async () => {
    const beat = (workerId: string) => s.call("POST", "/api/workers/heartbeat", { worker_id: workerId, roles: ["crawl"], capacity: 2, current_load: 0, tasks_processed: 0 });
    await beat("w1");
    const task = await create({ task_type: "crawl" });
    const held = await claim("w1");
    await s.call("POST", `/api/tasks/${task.id}/checkpoint`, { ...held.lease, checkpoint: { page: 2 } });
    s.clock.advance(121_000);
    await beat("w2");
    const swept = await s.call("POST", "/api/tasks/recover-stale");
    expect(swept.body).toMatchObject({ dead_workers: ["w1"], requeued: [task.id], reassigned: [{ task_id: task.id, worker_id: "w2" }], unassigned: [] });

    const history = await s.call("GET", `/api/reassignments?task_id=${task.id}&limit=10`);
    expect(history.body.reassignments).toEqual([
      expect.objectContaining({ task_id: task.id, from_worker_id: "w1", to_worker_id: "w2", success: true, checkpoint: { page: 2 }, error_message: null }),
    ]);
    const stats = await s.call("GET", "/api/reassignments/stats");
    expect(stats.body).toMatchObject({ success: true, last_24_hours: { total: 1, successful: 1, success_rate_percent: 100 }, failing_workers: [{ worker_id: "w1", failure_count: 1 }], repeated_tasks: [] });
    // The reservation: w2's next claim gets it.
    expect((await claim("w2")).task).toMatchObject({ id: task.id, checkpoint: { page: 2 } });
  });

  it("seed 003's scenario 2: the only worker at full capacity, the reassignment recorded with success=false, \"No healthy worker available\"", async () => {
    const beat = (workerId: string, load: number) => s.call("POST", "/api/workers/heartbeat", { worker_id: workerId, roles: ["crawl"], capacity: 10, current_load: load, tasks_processed: 0 });
    await beat("worker-1", 0);
    const task = await create({ task_type: "crawl" });
    await claim("worker-1");
    s.clock.advance(121_000);
    await beat("worker-2", 10);
    expect((await s.call("POST", "/api/tasks/recover-stale")).body).toMatchObject({ dead_workers: ["worker-1"], unassigned: [task.id] });
    const [event] = (await s.call("GET", `/api/reassignments?task_id=${task.id}`)).body.reassignments;
    expect(event).toMatchObject({ from_worker_id: "worker-1", to_worker_id: null, success: false });
    // The seed's words first, which monitoring matches; then why (add capacity, not workers of the role).
    expect(event.error_message).toBe("No healthy worker available: the only healthy worker for role crawl is at capacity");
  });

  it("the task type registry: register a version, list, show; params are checked against its schema", async () => {
    const definition = { name: "product_resync", params_schema: { type: "object", properties: { storeId: { type: "integer" } }, required: ["storeId"] }, max_attempts: 5, backoff: { base_seconds: 1 } };
    const registered = await s.call("POST", "/api/task-types", definition);
    expect(registered.status).toBe(201);
    expect(registered.body).toMatchObject({ success: true, created: true, task_type: { name: "product_resync", version: 1, max_attempts: 5, params_schema: definition.params_schema, backoff: { base_seconds: 1, factor: 2 } } });
    const again = await s.call("POST", "/api/task-types", definition);
    expect(again).toMatchObject({ status: 200, body: { created: false, task_type: { version: 1 } } });
    await s.call("POST", "/api/task-types", { ...definition, priority: 3 });
    expect((await s.call("GET", "/api/task-types")).body.task_types.map((t: { version: number }) => t.version)).toEqual([2]);
    const shown = await s.call("GET", "/api/task-types/product_resync");
    expect(shown.body.task_type).toMatchObject({ version: 2, priority: 3 });
    expect(shown.body.versions.map((t: { version: number }) => t.version)).toEqual([1, 2]);
    expect(await s.call("GET", "/api/task-types/nope")).toMatchObject({ status: 404, body: { success: false, error: "not_found", message: 'Task type "nope" is not registered' } });

    const refused = await s.call("POST", "/api/tasks", { task_type: "product_resync", params: { storeId: "42" } });
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({
      success: false,
      error: "validation_error",
      message: "Invalid params for product_resync v2: params.storeId: must be integer",
      issues: [{ path: "params.storeId", message: "must be integer" }],
    });
    expect((await create({ task_type: "product_resync", params: { storeId: 42 } })).task_type_version).toBe(2);
  });

  it("a worker id, task type or schedule name in a path may be as long as a body's (128 characters); a longer one is refused naming the field", async () => {
    // The router refused a path parameter over 100 characters: such a worker beat and claimed, then could not shut down.
    const longest = (first: string) => first + "x".repeat(127);
    const [workerId, taskType, schedule] = [longest("w"), longest("t"), longest("s")];
    const task = await create({ task_type: taskType, params: {} });
    expect((await s.call("POST", "/api/workers/heartbeat", { worker_id: workerId, roles: [taskType] })).status).toBe(200);
    await claim(workerId, { task_types: [taskType] });
    const shutdown = await s.call("POST", `/api/workers/${workerId}/shutdown`);
    expect([shutdown.status, shutdown.body.released]).toEqual([200, [task.id]]);
    expect((await s.call("GET", "/api/workers")).body.workers.find((w: Body) => w.worker_id === workerId).status).toBe("inactive");

    expect((await s.call("POST", "/api/task-types", { name: taskType })).status).toBe(201);
    expect((await s.call("GET", `/api/task-types/${taskType}`)).body.task_type.name).toBe(taskType);
    expect((await s.call("GET", `/api/tasks/capacity/${taskType}`)).body).toMatchObject({ success: true, task_type: taskType, pending_tasks: 1 });
    expect((await s.call("POST", "/api/schedules", { name: schedule, task_type: taskType, cron: "0 0 * * *" })).status).toBe(201);
    expect((await s.call("GET", `/api/schedules/${schedule}`)).body.schedule.name).toBe(schedule);
    expect((await s.call("POST", `/api/schedules/${schedule}/pause`)).body.schedule.enabled).toBe(false);
    expect((await s.call("DELETE", `/api/schedules/${schedule}`)).status).toBe(200);

    const tooLong = await s.call("POST", `/api/workers/${workerId}x/shutdown`);
    expect([tooLong.status, tooLong.body.error, tooLong.body.issues.map((i: Body) => i.path)]).toEqual([400, "validation_error", ["id"]]);
  });

  it("refuses bad input with 400 naming the field, never a 5xx, and a refused request changes nothing", async () => {
    const task = await create({ task_type: "crawl" });
    const held = await claim("w1");
    const before = await s.call("GET", `/api/tasks/${task.id}`);
    const cases: [string, string, unknown, Record<string, unknown> | null, string?][] = [
      [
        "POST",
        "/api/tasks",
        { task_type: "crawl", colour: "red" },
        { path: "colour", message: 'Unexpected property (got "red"); the fields are task_type, params, priority, scheduled_for, delay_seconds, concurrency_key, unique_key, max_attempts, backoff, timeout_seconds' },
      ],
      // Another queue's name for a field: the one this API gives it.
      ["POST", "/api/tasks", { task_type: "crawl", run_at: "2030-01-01T00:00:00Z" }, { path: "run_at", message: 'Unexpected property (got "2030-01-01T00:00:00Z"); did you mean scheduled_for or delay_seconds?' }],
      // A name Object.prototype has answered "bad_request" with an internal TypeError as its message.
      [
        "POST",
        "/api/tasks",
        JSON.parse('{"task_type":"crawl","constructor":1}'),
        { path: "constructor", message: "Unexpected property (got 1); the fields are task_type, params, priority, scheduled_for, delay_seconds, concurrency_key, unique_key, max_attempts, backoff, timeout_seconds" },
      ],
      ["POST", "/api/tasks", { params: {} }, { path: "task_type", message: "Expected required property" }],
      ["POST", "/api/tasks", { task_type: "crawl", params: { name: "a\u0000b" } }, { path: "params.name", message: "must not contain a NUL character (\\u0000) or an unpaired UTF-16 surrogate" }],
      ["POST", "/api/tasks", { task_type: "crawl", scheduled_for: "tomorrow" }, { path: "scheduled_for", message: "must be a date and time with its offset, such as 2030-01-01T09:00:00Z (got \"tomorrow\")" }],
      // Days past the month's end and 24:00 are refused, not rolled over to a later time.
      ["POST", "/api/tasks", { task_type: "crawl", scheduled_for: "2030-02-30T00:00:00Z" }, { path: "scheduled_for", message: "must be a date and time with its offset, such as 2030-01-01T09:00:00Z (got \"2030-02-30T00:00:00Z\")" }],
      ["POST", "/api/tasks", { task_type: "crawl", scheduled_for: "2030-04-31T12:00:00+02:00" }, null],
      ["POST", "/api/tasks", { task_type: "crawl", scheduled_for: "2030-01-01T12:18:34.696694" }, { path: "scheduled_for", message: "must be a date and time with its offset, such as 2030-01-01T09:00:00Z; this one has no offset: add Z (UTC) or one such as +02:00 (got \"2030-01-01T12:18:34.696694\")" }],
      ["POST", "/api/tasks", { task_type: "crawl", scheduled_for: "2030-01-01T24:00:00Z" }, null],
      ["POST", "/api/tasks", { task_type: "crawl", concurrency_key: "" }, { path: "concurrency_key", message: "Expected string length greater or equal to 1 (got \"\")" }],
      ["POST", "/api/tasks", { task_type: "crawl", priority: 2 ** 40 }, null],
      ["POST", "/api/tasks", { task_type: "crawl", params: [1, 2] }, null],
      ["POST", "/api/tasks", { task_type: "crawl", scheduled_for: "0001-01-01T00:00:00Z" }, null],
      ["POST", `/api/tasks/${task.id}/complete`, { worker_id: "w1", lease_token: held.lease.lease_token, result: { ok: 1 }, extra: 1 }, { path: "extra", message: "Unexpected property (got 1); the fields are worker_id, lease_token, result, follow_ups, claim_next" }],
      ["POST", `/api/tasks/${task.id}/checkpoint`, { worker_id: "w1", lease_token: held.lease.lease_token }, { path: "checkpoint", message: "Expected required property" }],
      ["POST", `/api/tasks/${task.id}/fail`, { worker_id: "w1", lease_token: held.lease.lease_token, error: "x".repeat(1_000_001) }, null], // past what a call may send; up to it, cut when stored
      ["POST", `/api/tasks/${task.id}/heartbeat`, { worker_id: "w 1", lease_token: held.lease.lease_token }, null],
      ["POST", `/api/tasks/${task.id}/progress`, { worker_id: "w1", lease_token: held.lease.lease_token, progress: 2 }, null],
      ["POST", "/api/tasks/claim", { worker_id: "w1", wait_ms: 30_001 }, { path: "wait_ms", message: "Expected integer to be less or equal to 30000 (got 30001)" }],
      ["POST", "/api/tasks/claim", { worker_id: "x".repeat(129) }, null],
      ["POST", "/api/tasks/complete", { completions: [{ id: task.id, lease: { ...held.lease, extra: 1 } }] }, null],
      ["POST", "/api/tasks/claim", ["w1"], null],
      // Seed 000's beat may leave the figures out, but what it gives is checked.
      ["POST", "/api/workers/heartbeat", { worker_id: "w1", metadata: { hostname: "h" }, capacity: 0 }, { path: "capacity", message: "Expected integer to be greater or equal to 1 (got 0)" }],
      ["POST", "/api/task-types", { name: "t", params_schema: { type: "nonsense" } }, null],
      ["GET", "/api/tasks?limit=0", undefined, { path: "limit", message: "Expected integer to be greater or equal to 1 (got 0)" }],
      ["GET", "/api/tasks?colour=red", undefined, null],
      ["GET", "/api/tasks?status=lost", undefined, null],
      ["GET", "/api/tasks?cursor=bogus", undefined, { path: "cursor", message: "not a cursor" }],
      ["GET", "/api/tasks/abc", undefined, { path: "id", message: "Expected integer (got \"abc\")" }],
      ["GET", "/api/tasks/0", undefined, null],
      ["GET", "/api/tasks/99999999999999999999", undefined, null],
      // Text is a number only if it reads back as itself: none of these is another task's id.
      ["GET", `/api/tasks/${task.id}.9`, undefined, { path: "id", message: `Expected integer (got "${task.id}.9")` }],
      ["POST", `/api/tasks/${task.id}.9/cancel`, undefined, null],
      ["POST", `/api/tasks/${task.id}e0/cancel`, undefined, null],
      ["POST", `/api/tasks/+${task.id}/cancel`, undefined, null],
      ["GET", "/api/tasks/true", undefined, null],
      ["GET", "/api/tasks/0x1", undefined, null],
      ["GET", "/api/tasks?limit=1.9", undefined, null],
      ["GET", "/api/reassignments?task_id=0x1", undefined, null],
      ["POST", "/api/workers/bad%20id/shutdown", undefined, null],
      ["GET", "/api/reassignments?task_id=-1", undefined, null],
      ["GET", "/api/task-types/9lives", undefined, null],
    ];
    for (const [method, path, body, issue] of cases) {
      const answer = await s.call(method, path, body);
      expect(answer.status, `${method} ${path} ${JSON.stringify(body)?.slice(0, 80)}`).toBe(400);
      expect(answer.body).toMatchObject({ success: false, error: "validation_error" });
      expect(answer.body.message).toMatch(/^Invalid /);
      if (issue) expect(answer.body.issues).toContainEqual(issue);
    }
    // A field sent in camelCase is named as sent, with its wire name: it used to be named task_types, the right name, as unexpected.
    const camel = await s.call("POST", "/api/tasks/claim", { worker_id: "w1", taskTypes: ["crawl"] });
    expect([camel.status, camel.body.message]).toEqual([400, "Invalid request body: taskTypes: Unexpected property (got a list of 1); the API's fields are snake_case: task_types"]);
    expect(camel.body.issues).toEqual([{ path: "taskTypes", message: "Unexpected property (got a list of 1); the API's fields are snake_case: task_types" }]);
    expect((await s.call("POST", "/api/tasks", { taskType: "crawl" })).body.message).toBe(
      "Invalid request body: task_type: Expected required property; taskType: Unexpected property (got \"crawl\"); the API's fields are snake_case: task_type",
    );
    // A field that is none in any casing keeps its guesses, without a snake_case name that is no field either.
    const guessed = await s.call("POST", "/api/tasks", { task_type: "crawl", runAt: "2030-01-01T00:00:00Z" });
    expect(guessed.body.message).toMatch(/^Invalid request body: runAt: Unexpected property \(got "2030-01-01T00:00:00Z"\); did you mean scheduled_for or delay_seconds\?$/);
    // A field name no pattern can hold is named as sent, not fed to one (a 500).
    const odd = await s.call("POST", "/api/tasks", { task_type: "crawl", "aB(": 1 });
    expect([odd.status, odd.body.error]).toEqual([400, "validation_error"]);
    // A missing field is said once, not once more as "Expected string".
    expect((await s.call("POST", "/api/tasks", { params: {} })).body.message).toBe("Invalid request body: task_type: Expected required property");
    const date = await s.call("POST", "/api/tasks", { task_type: "crawl", scheduled_for: "0001-01-01T00:00:00Z" });
    expect(date.body.message).toBe("Invalid task: scheduled_for: must be a date from 1970-01-01 to 9999-12-31 (got 0001-01-01T00:00:00.000Z)");

    // Malformed requests Fastify refuses before any schema: the same envelope.
    const raw: [string, Record<string, string>, number, string, RegExp][] = [
      ["{not json", {}, 400, "bad_request", /^Request body is not usable JSON: .*JSON.*; send JSON$/],
      ['{"task_type":"crawl","params":{"__proto__":{"x":1}}}', {}, 400, "bad_request", /it has a "__proto__" key.*rename the key$/],
      ['{"task_type":"crawl","constructor":{"prototype":{"x":1}}}', {}, 400, "bad_request", /"constructor" key holding "prototype"/],
      // Stored, it would have read back as 12345678901234567000.
      ['{"task_type":"crawl","params":{"id":12345678901234567890}}', {}, 400, "bad_request", /^Request body refused: params\.id: 12345678901234567890 is an integer beyond ±9007199254740991, .*: send it as a string$/],
      ["task_type=crawl", { "content-type": "application/x-www-form-urlencoded" }, 415, "unsupported_media_type", /^Request body must be JSON/],
      ['{"task_type":"crawl"}', { "content-type": "text/plain" }, 415, "unsupported_media_type", /^Request body must be JSON, sent with content-type: application\/json$/],
    ];
    for (const [text, headers, status, error, message] of raw) {
      const answer = await s.call("POST", "/api/tasks", undefined, { raw: text, headers });
      expect(answer.status, text).toBe(status);
      expect(answer.body).toEqual({ success: false, error, message: expect.stringMatching(message) });
    }
    // A refusal names 20 fields at most: 120,000 unknown ones, each listed and sifted, held the server for half a minute.
    const flood = Object.fromEntries([["task_type", "crawl"], ...Array.from({ length: 120_000 }, (_, i) => [`f${i}`, 0])]);
    const flooded = await s.call("POST", "/api/tasks", flood);
    expect([flooded.status, flooded.body.issues.length]).toEqual([400, 20]);
    expect(flooded.body.message).toMatch(/^Invalid request body: f0: Unexpected property .*; and more, not listed \(the first 20 fields refused are\)$/);
    // Bytes that are not UTF-8 are refused, not stored as U+FFFD; a compressed body is said to be one.
    const bytes = async (body: Buffer, headers: Record<string, string> = {}) => {
      const answer = await fetch(`${s.url}/api/tasks`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
      return { status: answer.status, body: (await answer.json()) as Body };
    };
    const latin1 = Buffer.concat([Buffer.from('{"task_type":"crawl","params":{"city":"Z'), Buffer.from([0xfc]), Buffer.from('rich"}}')]);
    expect(await bytes(latin1)).toEqual({ status: 400, body: { success: false, error: "bad_request", message: "Request body is not usable JSON: it is not UTF-8; send JSON encoded as UTF-8" } });
    const gzipped = await bytes(gzipSync('{"task_type":"crawl"}'), { "content-encoding": "gzip" });
    expect(gzipped.body.message).toBe("Request body is not usable JSON: it is sent with Content-Encoding: gzip, which this server does not decode; send it uncompressed");
    expect(await s.call("DELETE", "/api/tasks/counts/all")).toMatchObject({ status: 404, body: { success: false, error: "not_found", message: "No route DELETE /api/tasks/counts/all; /docs lists them" } });
    // A route called with the wrong method is said so, with the methods it takes: GET /api/tasks/claim used to be refused as a task id.
    const wrongMethod: [string, string, string][] = [
      ["GET", "/api/tasks/claim", "POST"],
      ["GET", "/api/tasks/complete", "POST"],
      ["DELETE", "/api/tasks", "GET or POST"],
      ["PUT", "/api/workers/heartbeat", "POST"],
      // Routes with a parameter: answered 404 "No route" before.
      ["GET", `/api/tasks/${task.id}/complete`, "POST"],
      ["DELETE", `/api/tasks/${task.id}`, "GET"],
      ["PUT", "/api/schedules/nightly", "DELETE or GET"],
      // With a trailing slash, the same route.
      ["DELETE", `/api/tasks/${task.id}/`, "GET"],
      ["GET", "/api/tasks/claim/", "POST"],
    ];
    for (const [method, path, allowed] of wrongMethod) {
      const answer = await s.call(method, path);
      expect(answer).toMatchObject({ status: 405, body: { success: false, error: "method_not_allowed", message: `${method} ${path} is not a route: use ${allowed}; /docs lists them` } });
      expect(answer.headers.get("allow")).toBe(allowed.replace(" or ", ", "));
    }

    // A trailing slash names the same route: the list, not a task whose id is "".
    expect((await s.call("GET", "/api/tasks/")).body).toEqual((await s.call("GET", "/api/tasks")).body);

    expect((await s.call("GET", `/api/tasks/${task.id}`)).body).toEqual(before.body);
    expect((await s.call("GET", "/api/tasks/counts")).body.by_status).toMatchObject({ pending: 0, claimed: 1 });
    expect((await s.call("GET", "/api/workers")).body.workers).toEqual([]);
    expect((await s.call("GET", "/api/task-types")).body.task_types).toEqual([]);
  });

  it("a list of statuses written as other APIs write one, or too long, is refused saying to repeat the parameter, and how often it may", async () => {
    const HINT = "for several, repeat the parameter, at most 6 times: status=pending&status=claimed";
    const refused = async (query: string) => {
      const answer = await s.call("GET", `/api/tasks?${query}`);
      expect(answer.status, query).toBe(400);
      expect(answer.body.issues, query).toHaveLength(1);
      return [answer.body.issues[0].path, answer.body.issues[0].message];
    };
    expect(await refused("status=pending,failed")).toEqual([
      "status",
      `must be one of pending, claimed, running, completed, failed, cancelled, or a list of at most 6 of them (got "pending,failed"); ${HINT}`,
    ]);
    expect(await refused(Array.from({ length: 7 }, () => "status=pending").join("&"))).toEqual([
      "status",
      // A list, too long: said as such, not as neither a status nor a list.
      `Expected array length to be less or equal to 6 (got a list of 7); ${HINT}`,
    ]);
    expect(await refused("status[]=pending")).toEqual(["status[]", `Unexpected property (got "pending"); a list is sent as status itself, without []: ${HINT}`]);
    expect(await refused("status[]=pending&status[]=failed")).toEqual(["status[]", `Unexpected property (got a list of 2); a list is sent as status itself, without []: ${HINT}`]);
    // The library's list is an array; its message says the limit, and nothing of query strings.
    await expect(s.pool.list({ status: Array.from({ length: 7 }, () => "pending" as const) })).rejects.toMatchObject({
      message: "Invalid task filter: status: Expected array length to be less or equal to 6 (got a list of 7)",
    });
  });

  it("params over the size limit are refused saying the limit is the server's, not naming the library's connect() option", async () => {
    const big = { blob: "x".repeat(1024 * 1024) };
    const one = await s.call("POST", "/api/tasks", { task_type: "crawl", params: big });
    expect(one).toMatchObject({
      status: 400,
      body: {
        message: "Invalid params: params is 1,048,587 bytes as JSON, over the limit of 1,048,576 bytes (set on this server); store large data elsewhere and pass a reference",
        issues: [{ path: "params", message: "is 1,048,587 bytes as JSON, over the limit of 1,048,576 bytes (set on this server); store large data elsewhere and pass a reference" }],
      },
    });
    const batch = await s.call("POST", "/api/tasks/batch", { tasks: [{ task_type: "crawl" }, { task_type: "crawl", params: big }] });
    expect(batch.body).toMatchObject({ message: expect.stringMatching(/^item 1: Invalid params: params is .* \(set on this server\);/), issues: [{ path: "tasks.1.params" }] });
    expect(batch.body.message).not.toContain("limits");
    // The library's caller sets the limit, and is told its name.
    await expect(s.pool.enqueue("crawl", big)).rejects.toMatchObject({ message: expect.stringContaining("over the limit of 1,048,576 bytes (limits.paramsBytes);") });
    expect((await s.pool.counts()).byStatus.pending).toBe(0);
  });

  it("throughput per minute, of every type or of one; an unknown query field is refused", async () => {
    for (const taskType of ["crawl", "crawl", "parse"]) {
      await create({ task_type: taskType });
      const { task, lease } = await claim("w1");
      expect((await s.call("POST", `/api/tasks/${task.id}/complete`, lease)).status).toBe(200);
    }
    const all = await s.call("GET", "/api/tasks/throughput?minutes=5");
    expect(all).toMatchObject({ status: 200, body: { success: true, completed: 3, failed: 0 } });
    expect(all.body.minutes).toHaveLength(5);
    expect((await s.call("GET", "/api/tasks/throughput?minutes=5&task_type=crawl")).body).toMatchObject({ completed: 2 });
    expect((await s.call("GET", "/api/tasks/throughput?task_type=parse")).body).toMatchObject({ completed: 1 });
    expect((await s.call("GET", "/api/tasks/throughput?task_type=other")).body).toMatchObject({ completed: 0, pickup_seconds: { mean: null, max: null } });
    const refused = await s.call("GET", "/api/tasks/throughput?taskType=crawl");
    expect(refused).toMatchObject({ status: 400, body: { success: false, error: "validation_error" } });
    expect(refused.body.message).toMatch(/Unexpected property/);
  });

  it("a route that takes no body or no query string refuses one rather than ignoring it, and acts on nothing", async () => {
    await s.call("POST", "/api/workers/heartbeat", { worker_id: "w1" });
    await s.call("POST", "/api/workers/w1/shutdown");
    // Read as a filter that was not applied, this answered every type's counts.
    const filtered = await s.call("GET", "/api/tasks/counts?task_type=crawl");
    expect(filtered).toMatchObject({ status: 400, body: { success: false, error: "validation_error", issues: [{ path: "task_type" }] } });
    expect(filtered.body.message).toBe("Invalid query string: task_type: Unexpected property (got \"crawl\"); GET /api/tasks/counts takes no query string");
    // The registry, which took none either and listed every worker, now applies it: the one shut down is not active.
    expect((await s.call("GET", "/api/workers?status=active")).body.workers).toEqual([]);
    // A sweep asked for as a dry run swept.
    const swept = await s.call("POST", "/api/tasks/recover-stale", { dry_run: true });
    expect(swept).toMatchObject({ status: 400, body: { error: "validation_error", issues: [{ path: "dry_run" }] } });
    expect(swept.body.message).toBe("Invalid request body: dry_run: Unexpected property (got true); POST /api/tasks/recover-stale takes no request body");
    expect((await s.call("POST", "/api/tasks/recover-stale", [1])).body.message).toBe("Invalid request body: request body: Expected object (got a list of 1); POST /api/tasks/recover-stale takes no request body");
    // JSON null is a body too: it was let through as if none had been sent.
    const nulled = await s.call("POST", "/api/tasks/recover-stale", undefined, { raw: "null" });
    expect(nulled).toMatchObject({ status: 400, body: { success: false, error: "validation_error", issues: [{ path: "request body" }] } });
    expect(nulled.body.message).toBe("Invalid request body: request body: Expected object (got null); POST /api/tasks/recover-stale takes no request body");
    // No body, an empty one, or {} is what such a route takes, as before.
    expect((await s.call("POST", "/api/tasks/recover-stale")).status).toBe(200);
    expect((await s.call("POST", "/api/tasks/recover-stale", undefined, { raw: "" })).status).toBe(200);
    expect((await s.call("POST", "/api/tasks/recover-stale", {})).status).toBe(200);
    expect((await s.call("GET", "/api/workers")).body.workers).toHaveLength(1);
    // Probes are public and may carry a prober's query string.
    expect((await s.call("GET", "/healthz?probe=lb")).status).toBe(200);
  });

  it("health, readiness, the OpenAPI document and the docs page", async () => {
    expect(await s.call("GET", "/healthz")).toMatchObject({ status: 200, body: { success: true, status: "ok", version: expect.any(String) } });
    expect((await s.call("GET", "/readyz")).body).toEqual({ success: true, status: "ready", database: kind.name, coordinator: { holder: null, lease_expires_at: null, last_swept_by: null, last_swept_at: null, seconds_since_sweep: null, sweep_interval_seconds: null, sweep_overdue: false } });
    const docs = await fetch(`${s.url}/docs/`);
    expect(docs.status).toBe(200);
    const html = await docs.text();
    expect(html).toMatch(/swagger-ui/);
    // Served from the package: every script and stylesheet is local.
    expect(html).not.toMatch(/(src|href)="https?:/);
    const bundle = await fetch(`${s.url}/docs/static/swagger-ui-bundle.js`);
    expect(bundle.status).toBe(200);
    expect((await bundle.text()).length).toBeGreaterThan(100_000);
  });

  it("a refusal of params by their registered schema names the first fault: 16,000 named took 24 s to answer", async () => {
    await s.call("POST", "/api/task-types", { name: "strict", params_schema: { type: "object", additionalProperties: false } });
    // 60,000 (under params' 1 MiB): about 15 minutes when every fault was named.
    const params = Object.fromEntries(Array.from({ length: 60_000 }, (_, i) => [`p${i}`, 0]));
    const started = performance.now();
    const refusedParams = await s.call("POST", "/api/tasks", { task_type: "strict", params });
    expect([refusedParams.status, refusedParams.body.issues]).toEqual([400, [{ path: "params.p0", message: "is not allowed" }]]);
    expect(refusedParams.body.message).toBe("Invalid params for strict v1: params.p0: is not allowed");
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it("refuses to register a params schema whose check could hold the server, and answers at once meanwhile", async () => {
    // Two ways to one part inside a recursion: 40 levels of params deep held the server for minutes.
    const twice = { type: "array", items: { $ref: "#/definitions/n" } };
    const doubling = { type: "object", definitions: { n: { anyOf: [twice, { ...twice }] } }, properties: { a: { $ref: "#/definitions/n" } } };
    const refused = await s.call("POST", "/api/task-types", { name: "doubling", params_schema: doubling });
    expect([refused.status, refused.body.error]).toEqual([400, "validation_error"]);
    expect(refused.body.message).toMatch(/^Invalid params schema for doubling: a check may apply more than 100 of its parts to one value/);
    // An anyOf of 1,000 branches over 40,000 items: every branch's fault of every item was kept, until the heap ran out.
    const wide = { type: "object", properties: { a: { type: "array", items: { anyOf: Array.from({ length: 1000 }, (_, i) => ({ const: i })) } } } };
    expect((await s.call("POST", "/api/task-types", { name: "wide", params_schema: wide })).status).toBe(400);
    expect((await s.call("GET", "/api/task-types")).body.task_types.map((t: { name: string }) => t.name)).not.toContain("doubling");
  });

  it("an empty body sent as JSON is no body: a call that needs none works with curl's usual content-type", async () => {
    const task = await create({ task_type: "crawl" });
    const answer = await s.call("POST", `/api/tasks/${task.id}/cancel`, undefined, { raw: "" });
    expect(answer).toMatchObject({ status: 200, body: { success: true, task: { status: "cancelled" } } });
    // Where a body is needed, an empty one is refused as a missing field, naming it.
    const missing = await s.call("POST", "/api/tasks", undefined, { raw: "" });
    expect(missing).toMatchObject({ status: 400, body: { success: false, error: "validation_error" } });
    expect(missing.body.message).toMatch(/task_type/);
    // Where every field is optional, an empty body is {}; JSON null is no object, and is refused as
    // one rather than read as no body: it cancelled the task.
    const other = await create({ task_type: "crawl" });
    const nulled = await s.call("POST", `/api/tasks/${other.id}/cancel`, undefined, { raw: "null" });
    expect(nulled).toEqual({
      status: 400,
      headers: expect.anything(),
      body: { success: false, error: "validation_error", message: "Invalid request body: request body: Expected object (got null)", issues: [{ path: "request body", message: "Expected object (got null)" }] },
    });
    expect((await s.call("GET", `/api/tasks/${other.id}`)).body.task.status).toBe("pending");
    expect((await s.call("POST", "/api/tasks", undefined, { raw: "null" })).body.message).toBe("Invalid request body: request body: Expected object (got null)");
    expect((await s.call("POST", `/api/tasks/${other.id}/cancel`, undefined, { raw: "" })).body.task.status).toBe("cancelled");
  });

  it("requests Node's HTTP parser refuses get the envelope too, then the connection closes", async () => {
    const { hostname, port } = new URL(s.url);
    const rawAnswer = async (head: string) => {
      const socket = connect(Number(port), hostname);
      await new Promise((resolve) => socket.once("connect", resolve));
      socket.write(head);
      const chunks: Buffer[] = [];
      for await (const chunk of socket) chunks.push(chunk as Buffer);
      const [status, ...rest] = Buffer.concat(chunks).toString().split("\r\n");
      return { status, body: JSON.parse(rest.slice(rest.indexOf("") + 1).join("\r\n")) as Body };
    };
    const huge = await rawAnswer(`GET /api/tasks HTTP/1.1\r\nhost: ${hostname}\r\nx-filler: ${"a".repeat(20_000)}\r\n\r\n`);
    expect(huge).toEqual({ status: "HTTP/1.1 431 Request Header Fields Too Large", body: { success: false, error: "headers_too_large", message: expect.stringMatching(/over 16 KiB/) } });
    const garbled = await rawAnswer(`POST /api/tasks HTTP/1.1\r\nhost: ${hostname}\r\ncontent-length: abc\r\n\r\n{}`);
    expect(garbled).toEqual({ status: "HTTP/1.1 400 Bad Request", body: { success: false, error: "bad_request", message: expect.stringMatching(/^Malformed HTTP request/) } });
  });

  it("readiness says when the last sweep is overdue: older than two of its coordinator's intervals, and than two default ones", async () => {
    const coordinator = async () => (await s.call("GET", "/readyz")).body.coordinator as Body;
    await s.pool.protocol.recordSweep("coordinator", "c1", 5);
    expect(await coordinator()).toMatchObject({ last_swept_by: "c1", seconds_since_sweep: 0, sweep_interval_seconds: 5, sweep_overdue: false });
    s.clock.advance(120_000);
    expect(await coordinator()).toMatchObject({ seconds_since_sweep: 120, sweep_overdue: false });
    s.clock.advance(1000);
    expect(await coordinator()).toMatchObject({ seconds_since_sweep: 121, sweep_overdue: true });
    // A coordinator sweeping every 200 s (serve --sweep-interval 200000) is on time 125 s after its sweep.
    await s.pool.protocol.recordSweep("coordinator", "c2", 200);
    s.clock.advance(125_000);
    expect(await coordinator()).toMatchObject({ last_swept_by: "c2", seconds_since_sweep: 125, sweep_interval_seconds: 200, sweep_overdue: false });
    s.clock.advance(276_000);
    expect(await coordinator()).toMatchObject({ seconds_since_sweep: 401, sweep_overdue: true });
  });
});

describe.each([sqliteKind, postgresKind])("lease tokens over HTTP on $name", (kind) => {
  const s = useServer(kind, { auth: "keys" });

  it("only the claiming worker is told a lease token (the claim, claim_next) and a lease call answers it to whoever presented it; no read, of any scope, answers it", async () => {
    const keys = {
      admin: (await s.pool.createApiKey({ scope: "admin" })).key,
      producer: (await s.pool.createApiKey({ scope: "producer" })).key,
      worker: (await s.pool.createApiKey({ scope: "worker" })).key,
    };
    const created = await s.call("POST", "/api/tasks", { task_type: "crawl" }, { key: keys.producer });
    const batch = await s.call("POST", "/api/tasks/batch", { tasks: [{ task_type: "crawl" }] }, { key: keys.producer });
    const claimed = await s.call("POST", "/api/tasks/claim", { worker_id: "w1", task_types: ["crawl"] }, { key: keys.worker });
    const token = claimed.body.lease_token as string;
    const id = claimed.body.task.id as number;
    expect(token).toEqual(expect.any(String));
    expect(claimed.body.task.lease_token).toBe(token);
    expect(claimed.body.tasks[0].lease_token).toBe(token);
    const lease = { worker_id: "w1", lease_token: token };
    const started = await s.call("POST", `/api/tasks/${id}/start`, lease, { key: keys.worker });
    expect(started.body.task.lease_token).toBe(token);

    const reads = [
      created.body.task,
      batch.body.results[0].task,
      ...(await Promise.all(
        Object.values(keys).flatMap((key) => [
          s.call("GET", `/api/tasks/${id}`, undefined, { key }).then((a) => a.body.task),
          s.call("GET", "/api/tasks?status=running", undefined, { key }).then((a) => a.body.tasks?.[0]),
        ]),
      )),
    ];
    // The worker key reads one task (the list is a producer's): 4 task reads by producer and admin, 1 by the worker, the two creates.
    const tasks = reads.filter((t) => t !== undefined);
    expect(tasks).toHaveLength(7);
    for (const task of tasks) expect(Object.keys(task)).not.toContain("lease_token");
    expect(tasks.slice(2).every((t) => t.id === id && t.status === "running" && t.worker_id === "w1")).toBe(true);
    const events = (await s.call("GET", `/api/tasks/${id}`, undefined, { key: keys.producer })).body.events;
    expect(JSON.stringify(events)).not.toContain(token);

    // claim_next hands the next task's token to the worker that completes.
    const completed = await s.call("POST", `/api/tasks/${id}/complete`, { ...lease, claim_next: { task_types: ["crawl"] } }, { key: keys.worker });
    expect(completed.body.task.lease_token).toBe(token);
    const next = completed.body.next_tasks[0];
    expect(next.lease_token).toEqual(expect.any(String));
    const cancelled = await s.call("POST", `/api/tasks/${next.id}/cancel`, {}, { key: keys.admin });
    expect(cancelled.body.task.status).toBe("cancelled");
    expect(Object.keys(cancelled.body.task)).not.toContain("lease_token");

    const openapi = (await s.call("GET", "/openapi.json")).body;
    const read = openapi.paths["/api/tasks/{id}"].get.responses["200"].content["application/json"].schema.properties.task;
    expect(Object.keys(read.properties)).not.toContain("lease_token");
    expect(Object.keys(read.properties)).toContain("worker_id");
    const claim = openapi.paths["/api/tasks/claim"].post.responses["200"].content["application/json"].schema.properties;
    expect(Object.keys(claim)).toContain("lease_token");
    expect(Object.keys(claim.task.properties)).toContain("lease_token");
  });
});

describe.each([sqliteKind, postgresKind])("long-poll claims on $name", (kind) => {
  // Re-checks only every minute: an answer within it proves the notification woke the claim.
  const s = useServer(kind, { auth: "none", longPollRecheckMs: 60_000 });

  it("answers as soon as work of its types appears", async () => {
    const started = performance.now();
    const waiting = s.call("POST", "/api/tasks/claim", { worker_id: "w1", task_types: ["crawl"], wait_ms: 20_000 });
    await eventually(() => s.app.taskpool.waitingClaims() === 1, 5000, "the claim to wait");
    await s.call("POST", "/api/tasks", { task_type: "other" });
    const { body } = await s.call("POST", "/api/tasks", { task_type: "crawl", params: { n: 1 } });
    const answer = await waiting;
    expect(answer.status).toBe(200);
    expect(answer.body.task).toMatchObject({ id: body.task.id, task_type: "crawl", worker_id: "w1" });
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(s.app.taskpool.waitingClaims()).toBe(0);
  });

  it("answers 404 when the wait runs out, and at once when the server closes", async () => {
    const started = performance.now();
    const short = await s.call("POST", "/api/tasks/claim", { worker_id: "w1", task_types: ["crawl"], wait_ms: 150 });
    expect(short.status).toBe(404);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);

    const waiting = s.call("POST", "/api/tasks/claim", { worker_id: "w1", wait_ms: 30_000 });
    await eventually(() => s.app.taskpool.waitingClaims() === 1, 5000, "the claim to wait");
    const closing = performance.now();
    await s.app.close();
    expect((await waiting).status).toBe(404);
    expect(performance.now() - closing).toBeLessThan(5000);
  });

  it("a response finished after the server stopped listening still lets the close complete (its connection is not kept alive)", async () => {
    const waiting = s.call("POST", "/api/tasks/claim", { worker_id: "w1", wait_ms: 30_000 });
    await eventually(() => s.app.taskpool.waitingClaims() === 1, 5000, "the claim to wait");
    // Hold the woken claim's last look at the pool until Node has stopped listening.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const claim = s.pool.protocol.claim.bind(s.pool.protocol);
    s.pool.protocol.claim = async (options) => (await gate, claim(options));
    const started = performance.now();
    const closed = s.app.close();
    await eventually(() => !s.app.server.listening, 5000, "the server to stop listening");
    open();
    expect((await waiting).status).toBe(404);
    await closed;
    expect(performance.now() - started).toBeLessThan(5000);
  });
});

describe.each([sqliteKind, postgresKind])("wake-up waits on $name", (kind) => {
  // Re-checks only every minute: an answer within it proves a notification (or the cursor) woke the wait.
  const s = useServer(kind, { auth: "none", longPollRecheckMs: 60_000 });
  const wait = async (body: Record<string, unknown>) => {
    const answer = await s.call("POST", "/api/tasks/wait", body);
    expect(answer.status).toBe(200);
    return answer.body as { woken: boolean; heard: string[]; cursor: string };
  };

  it("a wait that presents the last answer's cursor answers at once with what was announced between the two waits", async () => {
    const first = await wait({ wait_ms: 0 });
    expect(first).toMatchObject({ woken: false, heard: [], cursor: expect.stringMatching(/^[0-9a-f]{8}\.\d+$/) });
    // Announced while no wait is at the server: only the cursor can tell the next wait of it.
    await s.pool.enqueue("crawl");
    await s.pool.enqueue("mail");
    const started = performance.now();
    let caughtUp = await wait({ wait_ms: 20_000, after: first.cursor });
    expect(caughtUp.woken).toBe(true);
    // PostgreSQL hands the server each notification on its own: the second may come just after the
    // first answered. Following the cursors, each wait answers at once, and none is missed.
    const heard = new Set<string>(caughtUp.heard);
    while (heard.size < 2 && performance.now() - started < 5000) {
      caughtUp = await wait({ wait_ms: 5000, after: caughtUp.cursor });
      for (const taskType of caughtUp.heard) heard.add(taskType);
    }
    expect(performance.now() - started).toBeLessThan(5000);
    expect([...heard].sort()).toEqual(["crawl", "mail"]);
    // Of its own types only; and once caught up, nothing is answered twice.
    expect(await wait({ wait_ms: 20_000, after: first.cursor, task_types: ["mail"] })).toMatchObject({ woken: true, heard: ["mail"] });
    expect(await wait({ wait_ms: 150, after: first.cursor, task_types: ["render"] })).toMatchObject({ woken: false, heard: [] });
    expect(await wait({ wait_ms: 150, after: caughtUp.cursor })).toMatchObject({ woken: false, heard: [] });
  });

  it("a cursor of another run waits afresh; one further behind than the kept notifications is told to re-check", async () => {
    await s.pool.enqueue("crawl");
    expect(await wait({ wait_ms: 150, after: "0badc0de.0" })).toMatchObject({ woken: false });
    const { cursor } = await wait({ wait_ms: 0 });
    for (let i = 0; i < 260; i++) await s.pool.enqueue("crawl");
    // On PostgreSQL the server hears of the tasks through LISTEN, after their commits: until it has heard
    // of more than it keeps, the cursor is not behind, and a wait for another type rightly waits on.
    await eventually(async () => (await wait({ wait_ms: 0, after: cursor, task_types: ["render"] })).woken, 10_000, "the server to hear of the 260 tasks");
    expect(await wait({ wait_ms: 20_000, after: cursor, task_types: ["render"] })).toMatchObject({ woken: true, heard: [] });
  });

  it("the HTTP client's subscription is in place when subscribe() resolves, and its waits miss nothing announced between them", async () => {
    // A proxy that holds every wait but the first (of 0 ms) for 400 ms: the gap between two waits, widened.
    const proxy = createServer(async (request, response) => {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      const body = Buffer.concat(chunks).toString();
      if (request.url === "/api/tasks/wait" && JSON.parse(body).wait_ms > 0) await sleep(400);
      try {
        const answer = await fetch(s.url + request.url, { method: request.method, headers: { "content-type": "application/json" }, body: body || undefined });
        response.writeHead(answer.status, { "content-type": "application/json" }).end(await answer.text());
      } catch {
        response.destroy(); // a wait held past the test's end, when the server has closed
      }
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const client = new HttpStore(`http://127.0.0.1:${(proxy.address() as { port: number }).port}`);
    const heard: string[][] = [];
    const unsubscribe = await client.subscribe((types) => heard.push(types));
    try {
      await s.pool.enqueue("crawl");
      await eventually(() => heard.length > 0, 5000, "the subscription to hear of the task");
      expect(heard).toEqual([["crawl"]]);
      await s.pool.enqueue("mail");
      await eventually(() => heard.length > 1, 5000, "the subscription to hear of the second task");
      expect(heard).toEqual([["crawl"], ["mail"]]);
    } finally {
      await unsubscribe();
      await client.close();
      proxy.closeAllConnections();
      proxy.close();
    }
  });
});

describe("readiness while the database does not answer", () => {
  const logs = captureLogs();
  const s = useServer(sqliteKind, { auth: "none", logger: logs.logger });

  it("answers 503 not_ready each time, and logs one warning naming the cause, not one with a stack per probe", async () => {
    s.pool.protocol.leadershipStatus = async () => {
      throw new Error("connect ECONNREFUSED 127.0.0.1:5432 (simulated)");
    };
    for (let i = 0; i < 5; i++) {
      const answer = await s.call("GET", "/readyz");
      expect([answer.status, answer.body]).toEqual([503, { success: false, error: "not_ready", message: "The database did not answer; the server log says why" }]);
    }
    const said = logs.lines().filter((l) => /answered 503|Readiness/.test(l.msg));
    expect(said.filter((l) => l.level >= 40).map((l) => [l.level, l.msg, l.err])).toEqual([
      [40, "GET /readyz answered 503: The database did not answer; the server log says why (connect ECONNREFUSED 127.0.0.1:5432 (simulated))", undefined],
    ]);
    expect(said.filter((l) => l.level === 20)).toHaveLength(4);
  });
});

describe("a SQLite file another connection holds the write lock of", () => {
  it("answers a write 503 database_unavailable with retry_after and Retry-After, as the other 503s do, so clients back off", async () => {
    const path = sqlitePath();
    // Waits 200 ms for the lock, not the usual 5 s.
    const store = new SqliteStore({ path, busyTimeoutMs: 200 });
    await store.migrate();
    const app = await buildServer(new Taskpool(new CheckedStore(store), null), { auth: "none" });
    const url = await app.listen({ host: "127.0.0.1", port: 0 });
    // What a long write of another process (a big batch, a migration, one stopped mid-transaction) looks like.
    const holder = new Database(path);
    try {
      holder.exec("BEGIN IMMEDIATE");
      const answer = await request(url, "POST", "/api/tasks", { task_type: "job" }, null);
      expect(answer.status).toBe(503);
      expect(answer.body).toMatchObject({ success: false, error: "database_unavailable", message: expect.stringMatching(/stayed locked .*nothing was written/), retry_after: 1 });
      expect(answer.headers.get("retry-after")).toBe("1");
    } finally {
      holder.close();
      await app.close();
      await store.close();
      removeSqliteFiles(path);
    }
  });
});

describe("a client slow to send its request", () => {
  const s = useServer(sqliteKind, { auth: "none", requestTimeoutMs: 1000 });

  it("is answered 408 and cut off once the request timeout passes; a long-poll claim waiting longer is not", async () => {
    const { hostname, port } = new URL(s.url);
    // A byte of a 100-byte body, then nothing: without a request timeout, the connection was held for good.
    const socket = connect(Number(port), hostname);
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write(`POST /api/tasks HTTP/1.1\r\nhost: ${hostname}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{`);
    const chunks: Buffer[] = [];
    const closed = (async () => {
      for await (const chunk of socket) chunks.push(chunk as Buffer);
    })();
    // The claim's answer comes after the timeout: only receiving the request is timed.
    const claim = s.call("POST", "/api/tasks/claim", { worker_id: "w1", wait_ms: 2500 });
    await closed;
    expect(Buffer.concat(chunks).toString()).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n[\s\S]*"error":"request_timeout"/);
    expect((await claim).status).toBe(404);
  });
});

describe("the OpenAPI document's answers, against the server's", () => {
  /** A server whose PostgreSQL is not listening: every connection is refused. */
  const unreachable = async (auth: "keys" | "none") => {
    const store = new PostgresStore({ url: "postgres://postgres@127.0.0.1:1/postgres", schema: "nowhere" });
    const pool = new Taskpool(new CheckedStore(store), null);
    const app = await buildServer(pool, { auth });
    const url = await app.listen({ host: "127.0.0.1", port: 0 });
    return { url, close: async () => (await app.close(), await pool.close()) };
  };
  const operations = (doc: Body) =>
    Object.entries(doc.paths as Record<string, Record<string, Body>>).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, operation]) => ({
        method: method.toUpperCase(),
        path: path.replace("{id}", "1").replace("{task_type}", "crawl").replace("{name}", "crawl"),
        listed: Object.keys(operation.responses),
      })),
    );

  it("lists 503 on every route that answers it with the database out of reach, and 415 on every route that refuses a body not JSON", async () => {
    const keyed = await unreachable("keys");
    const keyless = await unreachable("none");
    try {
      const doc = (await request(keyed.url, "GET", "/openapi.json", undefined, null)).body;
      const ops = operations(doc);
      expect(ops.length).toBeGreaterThan(40);
      for (const { method, path, listed } of ops) {
        const what = `${method} ${path}`;
        // docs/http.md's answers for any request are listed on every route.
        expect(listed, what).toEqual(expect.arrayContaining(["400", "408", "413", "429", "431"]));
        // The key is looked up in the database before anything else.
        const answer = await request(keyed.url, method, path, method === "GET" ? undefined : {}, "tp_some-key");
        expect(answer.status === 503, `${what} answered ${answer.status} ${answer.body.error}`).toBe(listed.includes("503"));
        if (method === "GET") continue;
        const text = await request(keyless.url, method, path, undefined, null, { "content-type": "text/plain" }, "cancel it");
        expect([what, text.status === 415]).toEqual([what, listed.includes("415")]);
        if (text.status === 415) expect(text.body).toEqual({ success: false, error: "unsupported_media_type", message: "Request body must be JSON, sent with content-type: application/json" });
      }
      expect(ops.filter((o) => o.listed.includes("415")).map((o) => o.method)).not.toContain("GET");
      expect(doc.info.description).toMatch(/405 method_not_allowed/);
    } finally {
      await keyed.close();
      await keyless.close();
    }
  });
});
