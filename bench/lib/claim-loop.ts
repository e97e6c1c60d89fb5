import { performance } from "node:perf_hooks";
import type { Store } from "../../src/store/store.js";

/** What a claimer calls: a store, or the server's batchers in front of one (see bench/claim.ts). */
export type ClaimPath = Pick<Store, "claim" | "complete">;

/** What one claimer measured: one claim and one complete latency (ms) per cycle. */
export interface ClaimerSamples {
  cycles: number;
  claimMs: number[];
  completeMs: number[];
  /** Calls that failed with a retryable error and were tried again (their time is in the latency). */
  retries: number;
}

/** Cycles left to run, shared by the claimers that are given the same object. */
export interface CycleBudget {
  left: number;
}

export interface ClaimLoopOptions {
  signal?: AbortSignal;
  /** Stop once this budget is spent (each cycle takes one before claiming); without it, run until drained. */
  budget?: CycleBudget;
  /**
   * Errors a real worker would simply try again, such as SQLite's "database is locked" after
   * busy_timeout. They are counted rather than fatal, so one starved call does not void a run.
   */
  retryable?: (error: unknown) => boolean;
}

/** A call failing this often is not contention any more; stop the run and show the error. */
const MAX_ATTEMPTS = 5;

/**
 * Claims one task and completes it, over and over, until the budget is spent, a claim comes back
 * empty (the pending set is drained) or the signal aborts. The final empty claim is not recorded: it
 * measures an idle poll, not the claim of a task.
 */
export async function claimCycles(store: ClaimPath, workerId: string, options: ClaimLoopOptions = {}): Promise<ClaimerSamples> {
  const samples: ClaimerSamples = { cycles: 0, claimMs: [], completeMs: [], retries: 0 };
  const attempt = async <T>(call: () => Promise<T>): Promise<T> => {
    for (let n = 1; ; n++) {
      try {
        return await call();
      } catch (error) {
        if (n >= MAX_ATTEMPTS || !options.retryable?.(error)) throw error;
        samples.retries++;
      }
    }
  };

  const { budget } = options;
  while (!options.signal?.aborted && (budget === undefined || budget.left-- > 0)) {
    const t0 = performance.now();
    const [task] = await attempt(() => store.claim({ workerId, limit: 1 }));
    const t1 = performance.now();
    if (task === undefined) break;
    await attempt(() => store.complete(task.id, task));
    const t2 = performance.now();
    samples.claimMs.push(t1 - t0);
    samples.completeMs.push(t2 - t1);
    samples.cycles++;
  }
  return samples;
}
