import { MAX_CLAIM_LIMIT } from "../core/schemas.js";

/**
 * How many claimed tasks a worker keeps waiting for a free slot, so a slot that frees is refilled
 * without a round trip. Only worth it for short tasks: a long task held in a buffer is a task another
 * worker could be running. So the buffer holds what the worker's handlers get through in
 * HORIZON_MS at their recent pace, at most `max`, and nothing until a handler has finished.
 */
export class Prefetch {
  private static readonly HORIZON_MS = 50;
  /** Recent handler duration (exponential moving average), ms; null before the first. */
  private averageMs: number | null = null;

  constructor(
    private readonly concurrency: number,
    private readonly max: number,
  ) {}

  finished(durationMs: number): void {
    this.averageMs = this.averageMs === null ? durationMs : 0.9 * this.averageMs + 0.1 * durationMs;
  }

  /** Tasks to hold ready beyond those running. */
  get target(): number {
    if (this.averageMs === null || this.max === 0) return 0;
    return Math.min(this.max, Math.floor((this.concurrency * Prefetch.HORIZON_MS) / Math.max(this.averageMs, 0.1)));
  }

  /**
   * How many tasks to claim now (0: none), given the handlers running, the tasks held ready and all
   * the tasks leased (those two plus finished ones whose outcome is still being written).
   *
   * Room is what it may run and hold; at most as many outcomes as that may wait on the database. A
   * claim costs a round trip whatever its size, so it claims at once for a slot that would sit idle
   * but tops the buffer up only once it is half empty. Topping it up for every task that left it made
   * every other claim a claim of one or two, and the buffer ran dry during the big ones.
   *
   * A window can exceed what one claim may take (100 × concurrency of short tasks from 10 slots up):
   * asking for more was refused, every time, and the worker stopped claiming for good.
   */
  claimLimit(handling: number, ready: number, leased: number): number {
    const target = this.target;
    const window = this.concurrency + target;
    const free = Math.min(window - handling - ready, 2 * window - leased);
    const refill = handling + ready < this.concurrency || ready <= target / 2;
    return refill ? Math.min(Math.max(free, 0), MAX_CLAIM_LIMIT) : 0;
  }
}
