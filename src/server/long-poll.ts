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
 *
 * A remote worker's wake-ups are a loop of waits (`waitForWork`), and a notification that comes
 * between one wait's answer and the next wait's arrival has no waiter to wake. So every notification
 * is numbered and the last few are kept: each answer carries a cursor, and a wait that presents it
 * answers at once with what it missed since.
 */
import { randomUUID } from "node:crypto";
import { CANCEL_NOTICE_PREFIX } from "../core/notices.js";
import type { CheckedStore } from "../api/checked-store.js";
import type { ClaimedTask, ClaimOptions } from "../core/task.js";

class Waiter {
  private woken = false;
  private resolve: ((woken?: boolean) => void) | null = null;

  constructor(
    readonly taskTypes: string[] | null,
    /** A remote worker's wake-up wait hears notices (a task cancelled: core/notices.ts) whatever its types; a long-poll claim has no use for them. */
    private readonly hearsNotices = false,
  ) {}

  matches(entries: string[]): boolean {
    if (entries.length === 0) return true;
    return entries.some((e) => (e.startsWith(CANCEL_NOTICE_PREFIX) ? this.hearsNotices : this.taskTypes === null || this.taskTypes.includes(e)));
  }

  /** The task types of the notification that last woke it (`[]`: unknown, re-check everything). */
  heard: string[] = [];
  /** That notification's number (what a cursor answered with the wake-up must not go past). */
  heardSeq = 0;

  wake(taskTypes: string[] = [], seq = 0): void {
    this.heard = taskTypes;
    this.heardSeq = seq;
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

/** How many of the latest notifications a wait's cursor can catch up on; one further behind is told "re-check". */
const KEPT_NOTIFICATIONS = 256;

/** What a wait for work came to: the task types it heard of (null: none came), and where the next wait takes up. */
export interface WaitAnswer {
  heard: string[] | null;
  cursor: string;
}

export class LongPoll {
  private readonly waiters = new Set<Waiter>();
  /** Cursors name this server's run: one from another run (a restart, another server behind the balancer) is not caught up on. */
  private readonly run = randomUUID().slice(0, 8);
  private seq = 0;
  private readonly recent: { seq: number; taskTypes: string[] }[] = [];
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
   * claiming: what a remote worker's wake-up subscription (the HTTP transport) listens to. Answers
   * the task types the notification named (`[]`: unknown) when one came, and null when the wait ran
   * out, `signal` aborted or the server is closing; with a cursor for the next wait. Given the cursor
   * of the previous answer (`after`), it first answers at once with any matching notification that
   * came since.
   */
  async waitForWork(taskTypes: string[] | null, waitMs: number, signal: AbortSignal, after?: string): Promise<WaitAnswer> {
    if (this.closed || signal.aborted) return { heard: null, cursor: this.cursor(this.seq) };
    const waiter = new Waiter(taskTypes, true);
    const hangUp = () => waiter.wake();
    signal.addEventListener("abort", hangUp);
    this.waiters.add(waiter);
    try {
      await this.subscribe().catch(() => (this.subscription = null));
      const missed = after === undefined ? null : this.missedSince(after, waiter);
      if (missed !== null) return { heard: missed, cursor: this.cursor(this.seq) };
      const woken = await waiter.wait(waitMs);
      if (woken && !signal.aborted && !this.closed) return { heard: waiter.heard, cursor: this.cursor(waiter.heardSeq) };
      // Not woken: whatever came meanwhile did not match, so the next wait need not hear of it.
      return { heard: null, cursor: this.cursor(this.seq) };
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
      const seq = ++this.seq;
      this.recent.push({ seq, taskTypes });
      if (this.recent.length > KEPT_NOTIFICATIONS) this.recent.shift();
      for (const w of this.waiters) if (w.matches(taskTypes)) w.wake(taskTypes, seq);
    });
    return this.subscription;
  }

  private cursor(seq: number): string {
    return `${this.run}.${seq}`;
  }

  /**
   * The task types of the notifications after `cursor` that `waiter` would have woken for (`[]` when
   * one was unknown, or when more came than are kept); null when none did, or when the cursor is not
   * this run's (another server's notifications are numbered apart, and the wait then starts afresh).
   */
  private missedSince(cursor: string, waiter: Waiter): string[] | null {
    const [run, number] = cursor.split(".");
    const after = Number(number);
    if (run !== this.run || !Number.isSafeInteger(after) || after < 0 || after > this.seq) return null;
    if (after === this.seq) return null;
    const oldest = this.recent[0]?.seq ?? this.seq + 1;
    if (after + 1 < oldest) return [];
    const heard = new Set<string>();
    for (const { seq, taskTypes } of this.recent) {
      if (seq <= after || !waiter.matches(taskTypes)) continue;
      if (taskTypes.length === 0) return [];
      for (const t of taskTypes) heard.add(t);
    }
    return heard.size > 0 ? [...heard] : null;
  }
}
