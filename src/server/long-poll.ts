/**
 * Long-poll claims (`wait_ms`): a claim that finds nothing waits until work of its types may have
 * appeared, then claims again, until the wait runs out.
 *
 * The server subscribes to the store's notifications once (PostgreSQL LISTEN, SQLite's commit
 * watcher), at the first long-poll, and wakes the waiters whose types a notification names (all of
 * them for `[]`, "something changed": a sweep that requeued or reserved tasks says that). A waiter
 * registers before its second claim, so a task enqueued between the first claim and the subscription
 * is found by that claim rather than missed. Work that becomes ready without a notification (a
 * scheduled time or a retry backoff passing) is found by a re-check every `recheckMs`.
 */
import type { CheckedStore } from "../api/checked-store.js";
import type { ClaimedTask, ClaimOptions } from "../core/task.js";

class Waiter {
  private woken = false;
  private resolve: (() => void) | null = null;

  constructor(readonly taskTypes: string[] | null) {}

  matches(taskTypes: string[]): boolean {
    return taskTypes.length === 0 || this.taskTypes === null || taskTypes.some((t) => this.taskTypes?.includes(t));
  }

  wake(): void {
    this.woken = true;
    this.resolve?.();
  }

  /** Until woken (or already woken since the last wait) or `ms` pass. */
  wait(ms: number): Promise<void> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.resolve?.(), ms);
      this.resolve = () => {
        clearTimeout(timer);
        this.resolve = null;
        this.woken = false;
        resolve();
      };
    });
  }
}

export class LongPoll {
  private readonly waiters = new Set<Waiter>();
  private subscription: Promise<() => Promise<void>> | null = null;
  private closed = false;

  constructor(
    private readonly protocol: CheckedStore,
    private readonly recheckMs: number,
  ) {}

  /** Claims as `options` say; with nothing to claim, waits up to `waitMs` for work (none when the server closes or `signal` aborts). */
  async claim(options: ClaimOptions, waitMs: number, signal: AbortSignal): Promise<ClaimedTask[]> {
    const first = await this.protocol.claim(options);
    if (first.length > 0 || waitMs <= 0 || this.closed) return first;
    const deadline = performance.now() + waitMs;
    const waiter = new Waiter(options.taskTypes ?? null);
    const hangUp = () => waiter.wake();
    signal.addEventListener("abort", hangUp);
    this.waiters.add(waiter);
    try {
      // Without notifications (the subscription failed) the re-checks still find the work, later.
      await this.subscribe().catch(() => (this.subscription = null));
      for (;;) {
        const tasks = await this.protocol.claim(options);
        if (tasks.length > 0) return tasks;
        const left = deadline - performance.now();
        if (left <= 0 || signal.aborted || this.closed) return [];
        await waiter.wait(Math.min(left, this.recheckMs));
      }
    } finally {
      this.waiters.delete(waiter);
      signal.removeEventListener("abort", hangUp);
    }
  }

  /** How many claims are waiting now. */
  get waiting(): number {
    return this.waiters.size;
  }

  /** Ends every wait at once (they answer "no task") and stops listening; the server is closing. */
  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.waiters) w.wake();
    const subscription = this.subscription;
    this.subscription = null;
    if (subscription) await (await subscription.catch(() => async () => {}))();
  }

  private subscribe(): Promise<unknown> {
    if (this.closed) return Promise.resolve();
    this.subscription ??= this.protocol.subscribe((taskTypes) => {
      for (const w of this.waiters) if (w.matches(taskTypes)) w.wake();
    });
    return this.subscription;
  }
}
