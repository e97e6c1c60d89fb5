import { InvalidTransitionError, LeaseLostError, TaskNotFoundError } from "../core/errors.js";
import type { TaskAction } from "../core/state-machine.js";
import type { Lease, TaskStatus } from "../core/task.js";

/** The three columns that explain why a guarded write matched no row. */
export interface LeaseRow {
  status: TaskStatus;
  worker_id: string | null;
  lease_token: string | null;
}

/**
 * Guarded writes match zero rows for one of three reasons; this turns the row as it is now into the
 * right typed error. It runs only on the refusal path, so the happy path stays one statement.
 */
export function refusalError(id: number, row: LeaseRow | undefined, action: TaskAction, lease?: Lease): Error {
  if (!row) return new TaskNotFoundError(id);
  if (lease && (row.worker_id !== lease.workerId || row.lease_token !== lease.leaseToken)) return new LeaseLostError(id);
  return new InvalidTransitionError(id, row.status, action);
}
