/**
 * The history checker: judges a finished chaos run from two independent records.
 *
 *   - The database's audit trail (task_events, read through the pool), which says what was accepted
 *     and in which order: a write is in it only if its lease check passed.
 *   - Each worker process's own append-only log (see HistoryEntry), which says what the workers
 *     asked for, with which lease token, when, and what they were told.
 *
 * Rules, each reported with its name so a test can tell which promise broke:
 *   transition     the events of every task replay through the state machine (core/state-machine.ts)
 *                  from `created` to the task's stored status;
 *   completion     a completed task has exactly one `completed` event and no worker was told "yes"
 *                  to two completions; a task that did not complete has none;
 *   stale_write    no write accepted from a superseded lease: in the trail, every write is by the
 *                  worker holding the current claim; in the logs, no write was accepted that was
 *                  sent after another lease on the task had been granted;
 *   non_terminal   every task ended completed, failed or cancelled;
 *   checkpoint     every handler resumed from exactly the last checkpoint saved before its claim
 *                  (by a predecessor), or from nothing if none was saved;
 *   abort          every handler whose checkpoint write was refused for a lost lease saw its signal
 *                  fire (unless its process was killed).
 *
 * Lease tokens are not in the trail, so the trail identifies a run by (worker, attempt) of its
 * `claimed` event; the logs map each token to that pair.
 */
import { isDeepStrictEqual } from "node:util";
import type { TaskEvent } from "../../src/core/event.js";
import { canPerform, TRANSITIONS, type TaskAction } from "../../src/core/state-machine.js";
import type { Json, Task, TaskStatus } from "../../src/core/task.js";
import { LEASE_EXPIRED, WORKER_DIED } from "../../src/core/worker.js";

/** One line of a worker process's append-only log. Times are Date.now() of that process (one machine, one clock). */
export type HistoryEntry =
  /** A lease granted: logged when the claim's answer arrived. */
  | { kind: "claimed"; worker: string; taskId: number; token: string; attempt: number; at: number }
  /** A handler began, with the checkpoint it was handed. */
  | { kind: "handler"; worker: string; taskId: number; token: string; attempt: number; checkpoint: Json | null; at: number }
  /** A handler's signal fired. */
  | { kind: "aborted"; worker: string; taskId: number; token: string; reason: string; at: number }
  /**
   * A fenced write and its answer: ok true (accepted), false (refused with `code`), or null (no answer:
   * the connection failed, so the outcome is unknown). `sentAt` is when it was sent.
   */
  | { kind: "write"; worker: string; taskId: number; token: string; op: WriteOp; ok: boolean | null; code?: string; data?: Json; sentAt: number; at: number };

export type WriteOp = "start" | "checkpoint" | "progress" | "complete" | "fail" | "release";

export type Rule = "transition" | "completion" | "stale_write" | "non_terminal" | "checkpoint" | "abort";

export interface Violation {
  rule: Rule;
  taskId: number;
  detail: string;
}

/** What the run amounted to, for the report and docs/reliability.md. */
export interface HistorySummary {
  tasks: number;
  completed: number;
  runs: number;
  resumedFromCheckpoint: number;
  recoveries: number;
  /** Handler failures that scheduled a retry (each charged an attempt). */
  retries: number;
  refusedWrites: number;
  aborts: number;
  violations: Violation[];
}

export interface History {
  /** Every task at the end (the final stored row). */
  tasks: Task[];
  /** The audit trail of each task, oldest first. */
  events: Map<number, TaskEvent[]>;
  /** Every worker log line, any order. */
  log: HistoryEntry[];
  /** Workers whose process was SIGKILLed: their last lines may be missing. */
  killed?: Set<string>;
}

const TERMINAL: readonly TaskStatus[] = ["completed", "failed", "cancelled"];

/** Checks every rule for every task; an empty `violations` means the history is clean. */
export function checkHistory(history: History): HistorySummary {
  const violations: Violation[] = [];
  const byTask = new Map<number, HistoryEntry[]>();
  for (const e of history.log) {
    const list = byTask.get(e.taskId) ?? [];
    list.push(e);
    byTask.set(e.taskId, list);
  }
  const summary: HistorySummary = { tasks: history.tasks.length, completed: 0, runs: 0, resumedFromCheckpoint: 0, recoveries: 0, retries: 0, refusedWrites: 0, aborts: 0, violations };
  const known = new Set(history.tasks.map((t) => t.id));
  for (const id of byTask.keys()) if (!known.has(id)) violations.push({ rule: "transition", taskId: id, detail: "a worker logged a task the database does not have" });

  for (const task of history.tasks) {
    const events = history.events.get(task.id) ?? [];
    const log = byTask.get(task.id) ?? [];
    const fail = (rule: Rule, detail: string) => violations.push({ rule, taskId: task.id, detail });
    if (task.status === "completed") summary.completed++;
    summary.runs += events.filter((e) => e.event === "claimed").length;
    summary.recoveries += events.filter((e) => (e.event === "requeued" || e.event === "failed") && isRecovery(e)).length;
    summary.retries += events.filter((e) => e.event === "retry_scheduled").length;
    summary.refusedWrites += log.filter((e) => e.kind === "write" && e.ok === false).length;
    summary.aborts += log.filter((e) => e.kind === "aborted").length;

    if (!TERMINAL.includes(task.status)) fail("non_terminal", `ended ${task.status}`);
    replay(task, events, fail);
    checkCompletions(task, events, log, fail);
    checkLeases(log, fail);
    summary.resumedFromCheckpoint += checkResumes(events, log, fail);
    checkAborts(log, history.killed ?? new Set(), fail);
  }
  return summary;
}

/** Sweep recoveries carry the reason the coordinator took the task back; a handler's own failure carries attempt data. */
function isRecovery(e: TaskEvent): boolean {
  return e.message === WORKER_DIED || e.message === LEASE_EXPIRED;
}

/** Which state-machine action an event records, given the status before it. */
function actionOf(event: TaskEvent, status: TaskStatus | null): TaskAction | "create" | null {
  switch (event.event) {
    case "created":
      return "create";
    case "claimed":
      return "claim";
    case "started":
      return "start";
    case "checkpoint":
      return "checkpoint";
    case "completed":
      return "complete";
    case "retry_scheduled":
      return "fail";
    case "failed":
      return isRecovery(event) ? "recover" : "fail";
    case "released":
      return "release";
    case "requeued":
      return status === "failed" ? "retry" : "recover";
    case "reassigned":
      return "reserve";
    case "cancelled":
      return "cancel";
    default:
      return null; // worker_dead: about a worker, not a transition
  }
}

function statusAfter(event: TaskEvent, status: TaskStatus): TaskStatus {
  switch (event.event) {
    case "claimed":
      return (event.data as { started?: boolean } | null)?.started ? "running" : "claimed";
    case "started":
      return "running";
    case "completed":
      return "completed";
    case "failed":
      return "failed";
    case "cancelled":
      return "cancelled";
    case "retry_scheduled":
    case "released":
    case "requeued":
      return "pending";
    default:
      return status;
  }
}

/** The worker an event says acted under a lease (null for the coordinator, operators and producers). */
function actor(event: TaskEvent): string | null {
  switch (event.event) {
    case "started":
    case "checkpoint":
      return event.toWorkerId;
    case "completed":
    case "retry_scheduled":
    case "released":
      return event.fromWorkerId;
    case "failed":
      return isRecovery(event) ? null : event.fromWorkerId;
    default:
      return null;
  }
}

/** Rules transition and stale_write (trail side): every event is legal from the status before it, by the lease holder. */
function replay(task: Task, events: TaskEvent[], fail: (rule: Rule, detail: string) => void): void {
  let status: TaskStatus | null = null;
  let holder: string | null = null;
  for (const event of events) {
    const action = actionOf(event, status);
    if (action === null) continue;
    if (action === "create") {
      if (status !== null) fail("transition", `event ${event.id}: created twice`);
      status = "pending";
      continue;
    }
    if (status === null) {
      fail("transition", `event ${event.id}: ${event.event} before created`);
      status = "pending";
    }
    if (!canPerform(action, status)) fail("transition", `event ${event.id}: ${event.event} (${action}) from ${status}`);
    const next = statusAfter(event, status);
    if (next !== status && !(TRANSITIONS[action].to as readonly TaskStatus[]).includes(next)) {
      // claim-and-start is one event: claim's target is claimed, start's running.
      if (!(action === "claim" && next === "running")) fail("transition", `event ${event.id}: ${event.event} cannot lead to ${next}`);
    }
    const by = actor(event);
    if (by !== null && by !== holder) fail("stale_write", `event ${event.id}: ${event.event} accepted from ${by} while ${holder ?? "nobody"} held the task`);
    if (event.event === "claimed") holder = event.toWorkerId;
    status = next;
    if (status !== "claimed" && status !== "running") holder = null;
  }
  if (status !== task.status) fail("transition", `the trail ends ${status ?? "empty"} but the task is ${task.status}`);
}

/** Rule completion. */
function checkCompletions(task: Task, events: TaskEvent[], log: HistoryEntry[], fail: (rule: Rule, detail: string) => void): void {
  const completions = events.filter((e) => e.event === "completed").length;
  const expected = task.status === "completed" ? 1 : 0;
  if (completions !== expected) fail("completion", `${completions} completed events for a ${task.status} task`);
  const accepted = log.filter((e) => e.kind === "write" && e.op === "complete" && e.ok === true);
  if (accepted.length > expected) fail("completion", `workers were told ${accepted.length} completions were accepted (${accepted.map((e) => e.worker).join(", ")})`);
}

/** Rule stale_write (log side): a write sent after another lease was granted must have been refused. */
function checkLeases(log: HistoryEntry[], fail: (rule: Rule, detail: string) => void): void {
  const claims = log.filter((e): e is Extract<HistoryEntry, { kind: "claimed" }> => e.kind === "claimed");
  for (const w of log) {
    if (w.kind !== "write" || w.ok !== true) continue;
    const newer = claims.find((c) => c.token !== w.token && c.at < w.sentAt && c.attempt >= attemptOf(claims, w.token));
    if (newer) fail("stale_write", `${w.op} by ${w.worker} (lease ${w.token.slice(0, 8)}) accepted, sent ${w.sentAt - newer.at} ms after ${newer.worker} was granted lease ${newer.token.slice(0, 8)}`);
  }
}

/** The attempt a token was granted for (0 when its claim line was lost to a kill, which only widens the check). */
function attemptOf(claims: Extract<HistoryEntry, { kind: "claimed" }>[], token: string): number {
  return claims.find((c) => c.token === token)?.attempt ?? 0;
}

/**
 * Rule checkpoint: the checkpoint a handler was handed must be the last one the trail shows saved
 * (or carried by a release) before the claim that started it. Returns how many runs resumed from one.
 */
function checkResumes(events: TaskEvent[], log: HistoryEntry[], fail: (rule: Rule, detail: string) => void): number {
  let resumed = 0;
  for (const h of log) {
    if (h.kind !== "handler") continue;
    const claimAt = events.findLastIndex((e) => e.event === "claimed" && e.toWorkerId === h.worker && (e.data as { attempt?: number } | null)?.attempt === h.attempt);
    if (claimAt < 0) {
      fail("checkpoint", `${h.worker} ran attempt ${h.attempt}, which the trail never granted it`);
      continue;
    }
    const saved = events.slice(0, claimAt).findLast((e) => e.event === "checkpoint" || (e.event === "released" && e.data !== null));
    const expected = saved?.data ?? null;
    if (!isDeepStrictEqual(h.checkpoint, expected)) {
      fail("checkpoint", `${h.worker} attempt ${h.attempt} resumed from ${JSON.stringify(h.checkpoint)}, but the last checkpoint saved before its claim was ${JSON.stringify(expected)}`);
    }
    if (h.checkpoint !== null) resumed++;
  }
  return resumed;
}

/** Rule abort: a handler refused a checkpoint for a lost lease must have been told to stop. */
function checkAborts(log: HistoryEntry[], killed: Set<string>, fail: (rule: Rule, detail: string) => void): void {
  for (const w of log) {
    if (w.kind !== "write" || w.op !== "checkpoint" || w.ok !== false || w.code !== "lease_lost" || killed.has(w.worker)) continue;
    if (!log.some((a) => a.kind === "aborted" && a.token === w.token)) fail("abort", `${w.worker}'s checkpoint was refused (lease_lost) but its handler was never aborted`);
  }
}
