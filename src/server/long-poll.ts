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
  private resolve: ((woken?: boolean) => void) | null = null;

  constructor(readonly taskTypes: string[] | null) {}

  matches(taskTypes: string[]): boolean {
    return taskTypes.length === 0 || this.taskTypes === null || taskTypes.some((t) => this.taskTypes?.includes(t));
  }

  /** The task types of the notification that last woke it (`[]`: unknown, re-check everything). */
  heard: string[] = [];

  wake(taskTypes: string[] = []): void {
    this.heard = taskTypes;
    this.woken = true;
    this.resolve?.();
  }

  /** Until woken (or already woken since the last wait) or `ms` pass; true when woken. */
  wait(ms: number): Promise<boolean> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.resolve?.(false), ms);
      this.resolve = (woken = true) => {
        clearTimeout(timer);
        this.resolve = null;
        this.woken = false;
        resolve(woken);
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
    /** How a claim reaches the store (the server's ClaimBatcher: concurrent claims share a statement). */
    private readonly claimNow: (options: ClaimOptions) => Promise<ClaimedTask[]>,
    private readonly recheckMs: number,
    /** Told how long each claim in the store took and how many tasks it found (metrics). */
    private readonly onClaim: (seconds: number, claimed: number) => void = () => {},
  ) {}

  /** Claims as `options` say; with nothing to claim, waits up to `waitMs` for work (none when the server closes or `signal` aborts). */
  async claim(options: ClaimOptions, waitMs: number, signal: AbortSignal): Promise<ClaimedTask[]> {
    const first = await this.claimOnce(options);
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
        const tasks = await this.claimOnce(options);
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

  /**
   * Waits up to `waitMs` for a notification of work of `taskTypes` (any type when null) without
   * claiming: what a remote worker's wake-up subscription (the HTTP transport) listens to. The task
   * types the notification named (`[]`: unknown) when one came; null when the wait ran out, `signal`
   * aborted or the server is closing.
   */
  async waitForWork(taskTypes: string[] | null, waitMs: number, signal: AbortSignal): Promise<string[] | null> {
    if (this.closed || signal.aborted) return null;
    const waiter = new Waiter(taskTypes);
    const hangUp = () => waiter.wake();
    signal.addEventListener("abort", hangUp);
    this.waiters.add(waiter);
    try {
      await this.subscribe().catch(() => (this.subscription = null));
      const woken = await waiter.wait(waitMs);
      return woken && !signal.aborted && !this.closed ? waiter.heard : null;
    } finally {
      this.waiters.delete(waiter);
      signal.removeEventListener("abort", hangUp);
    }
  }

  /** How many claims and wake-up waits are waiting now. */
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

  private async claimOnce(options: ClaimOptions): Promise<ClaimedTask[]> {
    const started = performance.now();
    const tasks = await this.claimNow(options);
    this.onClaim((performance.now() - started) / 1000, tasks.length);
    return tasks;
  }

  private subscribe(): Promise<unknown> {
    if (this.closed) return Promise.resolve();
    this.subscription ??= this.protocol.subscribe((taskTypes) => {
      for (const w of this.waiters) if (w.matches(taskTypes)) w.wake(taskTypes);
    });
    return this.subscription;
  }
}
