import type { Logger } from "pino";
import { isRefusal, LeaseLostError, TaskpoolError } from "../core/errors.js";
import type { ClaimedTask, EnqueueInput, Json, JsonObject, Task } from "../core/task.js";
import type { Store } from "../store/store.js";
import type { RunAbort } from "./run-abort.js";

/** Why a handler's signal fired. */
export type AbortReason = "lease_lost" | "cancelled" | "timeout" | "shutdown";

/** What a handler gets besides its params. */
export interface TaskContext {
  task: Task;
  /** 1 for the first run; counts runs that ended in failure or a dead worker, not releases. */
  attempt: number;
  /** The last checkpoint saved by any earlier attempt (null if none): resume from here. */
  checkpoint: Json | null;
  /** Fires on lease loss, cancellation, timeout or shutdown; `signal.reason` is an AbortReason. */
  signal: AbortSignal;
  logger: Logger;
  /** Saves a resume point; it survives retries and reassignment to another worker. */
  saveCheckpoint(data: Json): Promise<void>;
  progress(value: number): Promise<void>;
  /** A follow-up task, created in the same transaction as this task's completion (none if it fails); call it before the handler returns. */
  enqueue(taskType: string, params?: JsonObject, options?: Omit<EnqueueInput, "taskType" | "params">): void;
}

/** Tries of a checkpoint or progress write while the database cannot be reached (~6 s in all). */
const WRITE_ATTEMPTS = 6;

/** Builds the context of one run; writes made through it are fenced by the run's lease. */
export function createTaskContext(
  store: Store,
  task: ClaimedTask,
  abort: RunAbort,
  /** The run's logger, made when first asked for (see Worker.execute). */
  logger: () => Logger,
  followUps: EnqueueInput[],
  /** Whether the handler has returned (or thrown): its outcome, follow-ups included, is being written. */
  returned: () => boolean,
): TaskContext {
  const lease = { workerId: task.workerId, leaseToken: task.leaseToken };
  // A dropped connection (a database restart, a failover) is retried here rather than thrown into the
  // handler, which would fail the run and cost the task an attempt for a blip. Saving the same
  // checkpoint or progress twice is harmless; a refusal (isRefusal) is final and thrown at once.
  const fenced = async <T>(write: () => Promise<T>): Promise<T> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await write();
      } catch (error) {
        if (error instanceof LeaseLostError) abort.abort("lease_lost");
        if (isRefusal(error) || attempt >= WRITE_ATTEMPTS || abort.aborted) throw error;
        logger().warn({ err: (error as Error).message }, `Could not save task ${task.id}'s checkpoint or progress; retrying`);
        await new Promise((resolve) => setTimeout(resolve, Math.min(2000, 100 * 2 ** attempt)));
      }
    }
  };
  return {
    task,
    attempt: task.attempts,
    checkpoint: task.checkpoint,
    get signal() {
      return abort.signal;
    },
    get logger() {
      return logger();
    },
    saveCheckpoint: (data) => fenced(() => store.checkpoint(task.id, lease, data)).then(() => undefined),
    progress: (value) => fenced(() => store.progress(task.id, lease, value)).then(() => undefined),
    enqueue: (taskType, params, options) => {
      // Too late to join the completion's transaction: taken in silence, the follow-up was lost.
      if (returned()) {
        throw new TaskpoolError("invalid_state", `Task ${task.id}'s handler has returned: ctx.enqueue("${taskType}") must be called before it returns (await the work that enqueues)`);
      }
      followUps.push({ ...options, taskType, params });
    },
  };
}
