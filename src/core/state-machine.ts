import { InvalidTransitionError } from "./errors.js";
import type { TaskStatus } from "./task.js";

/**
 * The task lifecycle in one table. Stores put `from` into their WHERE clauses, so a transition is
 * checked by the same statement that performs it and cannot race with another.
 *
 *   pending ──claim──▶ claimed ──start──▶ running ──complete──▶ completed
 *      ▲                  │                  ├──fail, attempts left──▶ pending (after backoff)
 *      └────release───────┘                  ├──fail, none left / not retryable──▶ failed
 *                                            └──worker died / lease expired──▶ pending or failed
 *   any non-terminal ──cancel──▶ cancelled        failed ──retry──▶ pending
 *
 * complete and fail are accepted from `claimed` too: a worker that never called start has still
 * finished (or failed) the work it holds.
 */
export const TRANSITIONS = {
  claim: { from: ["pending"], to: ["claimed"] },
  start: { from: ["claimed"], to: ["running"] },
  heartbeat: { from: ["claimed", "running"], to: [] },
  checkpoint: { from: ["claimed", "running"], to: [] },
  progress: { from: ["claimed", "running"], to: [] },
  complete: { from: ["claimed", "running"], to: ["completed"] },
  fail: { from: ["claimed", "running"], to: ["pending", "failed"] },
  release: { from: ["claimed", "running"], to: ["pending"] },
  recover: { from: ["claimed", "running"], to: ["pending", "failed"] },
  cancel: { from: ["pending", "claimed", "running"], to: ["cancelled"] },
  retry: { from: ["failed"], to: ["pending"] },
  reserve: { from: ["pending"], to: [] },
} as const satisfies Record<string, { from: readonly TaskStatus[]; to: readonly TaskStatus[] }>;

export type TaskAction = keyof typeof TRANSITIONS;

/** Statuses no worker moves a task out of: only an operator's retry does (failed). */
export const FINISHED_STATUSES = ["completed", "failed", "cancelled"] as const satisfies readonly TaskStatus[];

/** Statuses that hold a lease (a worker owns the task). */
export const LEASED_STATUSES = ["claimed", "running"] as const satisfies readonly TaskStatus[];

export function canPerform(action: TaskAction, status: TaskStatus): boolean {
  return (TRANSITIONS[action].from as readonly TaskStatus[]).includes(status);
}

/** Throws the typed error for an action the task's current status does not allow. */
export function assertCanPerform(action: TaskAction, status: TaskStatus, taskId: number | null = null): void {
  if (!canPerform(action, status)) throw new InvalidTransitionError(taskId, status, action);
}
