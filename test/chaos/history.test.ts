import { describe, expect, it } from "vitest";
import type { EventType, TaskEvent } from "../../src/core/event.js";
import type { Json, Task, TaskStatus } from "../../src/core/task.js";
import { WORKER_DIED } from "../../src/core/worker.js";
import { checkHistory, type HistoryEntry, type Rule } from "./history.js";

/** Hand-made histories of task 1: a clean one, then each rule broken on purpose. */
const ID = 1;
const A = "worker-a";
const B = "worker-b";

function trail(...rows: [EventType, Partial<TaskEvent>?][]): TaskEvent[] {
  return rows.map(([event, fields], i) => ({
    id: i + 1,
    taskId: ID,
    event,
    fromWorkerId: null,
    toWorkerId: null,
    message: null,
    data: null,
    createdAt: new Date(1000 + i),
    ...fields,
  }));
}

const task = (status: TaskStatus) => ({ id: ID, status }) as Task;

/** A's claim dies with A; the sweep requeues it and reserves it for B, who resumes from page 2 and completes. */
const cleanTrail = () =>
  trail(
    ["created"],
    ["claimed", { toWorkerId: A, data: { attempt: 1, started: true } }],
    ["checkpoint", { toWorkerId: A, data: { step: 1 } }],
    ["checkpoint", { toWorkerId: A, data: { step: 2 } }],
    ["requeued", { fromWorkerId: A, message: WORKER_DIED, data: { step: 2 } }],
    ["reassigned", { fromWorkerId: A, toWorkerId: B }],
    ["claimed", { toWorkerId: B, data: { attempt: 2, started: true } }],
    ["checkpoint", { toWorkerId: B, data: { step: 3 } }],
    ["completed", { fromWorkerId: B }],
  );

const cleanLog = (): HistoryEntry[] => [
  { kind: "claimed", worker: A, taskId: ID, token: "ta", attempt: 1, at: 100 },
  { kind: "handler", worker: A, taskId: ID, token: "ta", attempt: 1, checkpoint: null, at: 101 },
  { kind: "write", worker: A, taskId: ID, token: "ta", op: "checkpoint", ok: true, data: { step: 1 }, sentAt: 110, at: 112 },
  { kind: "write", worker: A, taskId: ID, token: "ta", op: "checkpoint", ok: true, data: { step: 2 }, sentAt: 120, at: 122 },
  { kind: "claimed", worker: B, taskId: ID, token: "tb", attempt: 2, at: 500 },
  { kind: "handler", worker: B, taskId: ID, token: "tb", attempt: 2, checkpoint: { step: 2 }, at: 501 },
  { kind: "write", worker: B, taskId: ID, token: "tb", op: "checkpoint", ok: true, data: { step: 3 }, sentAt: 510, at: 512 },
  { kind: "write", worker: B, taskId: ID, token: "tb", op: "complete", ok: true, sentAt: 520, at: 525 },
];

function rules(status: TaskStatus, events: TaskEvent[], log: HistoryEntry[], killed: string[] = []): Rule[] {
  const summary = checkHistory({ tasks: [task(status)], events: new Map([[ID, events]]), log, killed: new Set(killed) });
  return [...new Set(summary.violations.map((v) => v.rule))].sort();
}

describe("the history checker", () => {
  it("passes a clean history: a dead worker's task recovered, resumed from its checkpoint and completed once", () => {
    const summary = checkHistory({ tasks: [task("completed")], events: new Map([[ID, cleanTrail()]]), log: cleanLog() });
    expect(summary.violations).toEqual([]);
    expect(summary).toMatchObject({ tasks: 1, completed: 1, runs: 2, resumedFromCheckpoint: 1, recoveries: 1 });
  });

  it("transition: a completion with no claim, and a trail that disagrees with the stored status", () => {
    expect(rules("completed", trail(["created"], ["completed", { fromWorkerId: null }]), [])).toEqual(["transition"]);
    expect(rules("pending", cleanTrail(), cleanLog())).toEqual(["completion", "non_terminal", "transition"]);
  });

  it("transition: a task recovered twice from one claim", () => {
    const twice = trail(
      ["created"],
      ["claimed", { toWorkerId: A, data: { attempt: 1 } }],
      ["requeued", { fromWorkerId: A, message: WORKER_DIED }],
      ["requeued", { fromWorkerId: A, message: WORKER_DIED }],
      ["claimed", { toWorkerId: B, data: { attempt: 2 } }],
      ["completed", { fromWorkerId: B }],
    );
    expect(rules("completed", twice, [])).toEqual(["transition"]);
  });

  it("completion: two completed events, or two workers told their completion was accepted", () => {
    const events = cleanTrail();
    events.push({ ...events.at(-1)!, id: 99 });
    expect(rules("completed", events, cleanLog())).toContain("completion");
    const log = cleanLog();
    log.push({ kind: "write", worker: A, taskId: ID, token: "ta", op: "complete", ok: true, sentAt: 130, at: 131 });
    expect(rules("completed", cleanTrail(), log)).toContain("completion");
  });

  it("completion: a failed task with a completed event", () => {
    const events = trail(["created"], ["claimed", { toWorkerId: A, data: { attempt: 1 } }], ["completed", { fromWorkerId: A }]);
    expect(rules("failed", events, [])).toContain("completion");
  });

  it("stale_write: the trail shows a checkpoint by A after B claimed the task", () => {
    const events = cleanTrail();
    events.splice(7, 0, { ...events[2], id: 50, data: { step: 9 } });
    expect(rules("completed", events, cleanLog())).toEqual(["stale_write"]);
  });

  it("stale_write: a worker was told yes to a write sent after another lease was granted", () => {
    const log = cleanLog();
    log.push({ kind: "write", worker: A, taskId: ID, token: "ta", op: "checkpoint", ok: true, data: { step: 3 }, sentAt: 600, at: 601 });
    expect(rules("completed", cleanTrail(), log)).toEqual(["stale_write"]);
    // The same write refused is what should happen: no violation (A's handler saw its signal fire).
    log[log.length - 1] = { ...(log.at(-1) as Extract<HistoryEntry, { kind: "write" }>), ok: false, code: "lease_lost" };
    log.push({ kind: "aborted", worker: A, taskId: ID, token: "ta", reason: "lease_lost", at: 602 });
    expect(rules("completed", cleanTrail(), log)).toEqual([]);
  });

  it("non_terminal: a task still running at the end", () => {
    const events = trail(["created"], ["claimed", { toWorkerId: A, data: { attempt: 1, started: true } }]);
    expect(rules("running", events, [])).toEqual(["non_terminal"]);
  });

  it("checkpoint: a successor that resumed from something its predecessor never saved", () => {
    const forged = (checkpoint: Json | null) =>
      cleanLog().map((e) => (e.kind === "handler" && e.worker === B ? { ...e, checkpoint } : e));
    expect(rules("completed", cleanTrail(), forged({ step: 1 }))).toEqual(["checkpoint"]);
    expect(rules("completed", cleanTrail(), forged(null))).toEqual(["checkpoint"]);
    expect(rules("completed", cleanTrail(), forged({ step: 7 }))).toEqual(["checkpoint"]);
  });

  it("checkpoint: a handler running an attempt the trail never granted its worker", () => {
    const log = cleanLog().map((e) => (e.kind === "handler" && e.worker === B ? { ...e, attempt: 5 } : e));
    expect(rules("completed", cleanTrail(), log)).toEqual(["checkpoint"]);
  });

  it("abort: a refused checkpoint whose handler was never aborted, unless its process was killed", () => {
    const log = cleanLog();
    log.push({ kind: "write", worker: A, taskId: ID, token: "ta", op: "checkpoint", ok: false, code: "lease_lost", sentAt: 600, at: 601 });
    expect(rules("completed", cleanTrail(), log)).toEqual(["abort"]);
    expect(rules("completed", cleanTrail(), log, [A])).toEqual([]);
  });
});
