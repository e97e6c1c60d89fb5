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
    answer(null, this.count(key, timeWindow));
  }

  /** The state without counting a request (the plugin's `increment: false`). */
  read(key: string, answer: Answer, timeWindow: number): void {
    answer(null, this.peek(key, timeWindow));
  }

  /** Counts one more in `key`'s window (opened now if none is open): how many it holds, and the ms until it closes. */
  count(key: string, timeWindow: number): { current: number; ttl: number } {
    const now = monotonicMs();
    let window = this.windows.get(key);
    if (window === undefined || window.start + timeWindow <= now) {
      if (window === undefined && this.windows.size >= MAX_WINDOWS) this.windows.clear();
      window = { count: 0, start: now };
      this.windows.set(key, window);
    }
    window.count++;
    return { current: window.count, ttl: Math.ceil(window.start + timeWindow - now) };
  }

  /** What `key`'s window holds, without counting. */
  peek(key: string, timeWindow: number): { current: number; ttl: number } {
    const now = monotonicMs();
    const window = this.windows.get(key);
    if (window === undefined || window.start + timeWindow <= now) return { current: 0, ttl: 0 };
    return { current: window.count, ttl: Math.ceil(window.start + timeWindow - now) };
  }

  /** A route with a configuration of its own counts apart (none does here). */
  child(): MonotonicRateLimitStore {
    return new MonotonicRateLimitStore();
  }
}
