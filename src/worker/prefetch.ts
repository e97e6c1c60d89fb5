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
}
