import type { Logger } from "pino";
import { monotonicMs } from "../core/clock.js";
import { isRefusal, LeaseLostError, retryAfterMs, TaskpoolError } from "../core/errors.js";
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
  /**
   * Fires when the worker begins a graceful stop (SIGTERM, `worker.stop()`), before the grace period
   * runs: a long handler can save a checkpoint and call `ctx.stopping.throwIfAborted()`, which gives the
   * task back at once (released, checkpoint kept, no attempt charged) for another worker to resume.
   * Returning completes the task as usual; a handler that ignores it runs on until the grace period ends.
   */
  stopping: AbortSignal;
  logger: Logger;
  /** Saves a resume point; it survives retries and reassignment to another worker. */
  saveCheckpoint(data: Json): Promise<void>;
  /** How far the run has come, a fraction from 0 to 1 (0.4 is 40 %, not a percentage); anything else is a ValidationError. */
  progress(value: number): Promise<void>;
  /** A follow-up task, created in the same transaction as this task's completion (none if it fails); call it before the handler returns. */
  enqueue(taskType: string, params?: JsonObject, options?: Omit<EnqueueInput, "taskType" | "params">): void;
}


/** Builds the context of one run; writes made through it are fenced by the run's lease. */
export function createTaskContext(
  store: Store,
  task: ClaimedTask,
  abort: RunAbort,
  /** The worker's stopping signal, shared by every run. */
  stopping: AbortSignal,
  /** The run's logger, made when first asked for (see Worker.execute). */
  logger: () => Logger,
  followUps: EnqueueInput[],
  /** Whether the handler has returned (or thrown): its outcome, follow-ups included, is being written. */
  returned: () => boolean,
  /** The worker's lease length: how long a write that cannot get through is retried. */
  leaseMs: number,
): TaskContext {
  const lease = { workerId: task.workerId, leaseToken: task.leaseToken };
  // A dropped connection (a database restart, a failover, a taskpool server being redeployed) is
  // retried here rather than thrown into the handler, which would fail the run and cost the task an
  // attempt for an outage its lease outlives. It is retried for the lease's length (while
  // heartbeats fail too, the worker fences the run sooner: abort), not a fixed few seconds: a
  // server restart of 20-40 s failed every run that checkpointed meanwhile. Saving the same
  // checkpoint or progress twice is harmless; a refusal (isRefusal) is final and thrown at once.
  const fenced = async <T>(write: () => Promise<T>): Promise<T> => {
    let failingSince: number | null = null;
    for (let attempt = 1; ; attempt++) {
      try {
        const value = await write();
        if (failingSince !== null) logger().info(`Saved task ${task.id}'s checkpoint or progress after ${Math.round((monotonicMs() - failingSince) / 1000)} s of retries`);
        return value;
      } catch (error) {
        if (error instanceof LeaseLostError) abort.abort("lease_lost");
        failingSince ??= monotonicMs();
        if (isRefusal(error) || abort.aborted || monotonicMs() - failingSince >= leaseMs) throw error;
        // Once, not per try: over HTTP a try is a few seconds of the client's own retries, for every running task.
        if (attempt === 1) logger().warn({ err: (error as Error).message }, `Could not save task ${task.id}'s checkpoint or progress; retrying for up to the lease's ${leaseMs / 1000} s`);
        await new Promise((resolve) => setTimeout(resolve, Math.max(retryAfterMs(error), Math.min(2000, 100 * 2 ** attempt))));
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
    stopping,
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
