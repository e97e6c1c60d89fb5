/** Where "now" comes from. Stores and services take one so expiry and backoff are testable without sleeping. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/**
 * Milliseconds on the monotonic clock, for durations and deadlines within a process: a step of the
 * wall clock (NTP, an operator) does not move it, and every thread of the process reads the same one
 * (performance.now() counts from each thread's own start).
 */
export const monotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/** A clock that only moves when told to (tests, simulations). */
export class ManualClock implements Clock {
  private current: number;

  constructor(start: Date = new Date("2030-01-01T00:00:00.000Z")) {
    this.current = start.getTime();
  }

  now(): Date {
    return new Date(this.current);
  }

  advance(ms: number): void {
    this.current += ms;
  }

  set(to: Date): void {
    this.current = to.getTime();
  }
}
