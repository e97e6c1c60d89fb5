import { monotonicMs } from "../core/clock.js";

/** Bound on the windows kept: keys are API key ids, but the map must not grow without limit. */
const MAX_WINDOWS = 10_000;

type Answer = (error: Error | null, result: { current: number; ttl: number }) => void;

/**
 * @fastify/rate-limit's in-process counters (its LocalStore, as configured in server.ts: a fixed
 * window from a key's first request), timed by the monotonic clock. LocalStore times them with
 * Date.now(): a wall-clock step back on the server's host (NTP, an operator) kept a limited key
 * refused, and told it to wait, that much longer (5 minutes back: Retry-After 359 s); a step
 * forward reopened every window early.
 */
export class MonotonicRateLimitStore {
  private readonly windows = new Map<string, { count: number; start: number }>();

  incr(key: string, answer: Answer, timeWindow: number): void {
    const now = monotonicMs();
    let window = this.windows.get(key);
    if (window === undefined || window.start + timeWindow <= now) {
      if (window === undefined && this.windows.size >= MAX_WINDOWS) this.windows.clear();
      window = { count: 0, start: now };
      this.windows.set(key, window);
    }
    window.count++;
    answer(null, { current: window.count, ttl: Math.ceil(window.start + timeWindow - now) });
  }

  /** The state without counting a request (the plugin's `increment: false`). */
  read(key: string, answer: Answer, timeWindow: number): void {
    const now = monotonicMs();
    const window = this.windows.get(key);
    if (window === undefined || window.start + timeWindow <= now) answer(null, { current: 0, ttl: 0 });
    else answer(null, { current: window.count, ttl: Math.ceil(window.start + timeWindow - now) });
  }

  /** A route with a configuration of its own counts apart (none does here). */
  child(): MonotonicRateLimitStore {
    return new MonotonicRateLimitStore();
  }
}
