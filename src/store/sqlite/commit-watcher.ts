import { type FSWatcher, watch } from "node:fs";
import type { SqliteConnection } from "./connection.js";
import { monotonicMs } from "../../core/clock.js";

type Listener = (taskTypes: string[]) => void;

/**
 * When a subscribed store looks for other connections' commits. One look takes ~3 µs (it reads the
 * WAL index in shared memory); the timer costs more. Looking every 50 ms, an idle store spends ~5 ms
 * of CPU per second; every 5 ms, ~20 ms per second.
 *
 * - `afterWrite`, for `writeWindow` after the WAL file changed: a commit writes its pages to the file
 *   and only then (after its fsync) publishes them in the WAL index, which is what a look reads and
 *   which no change event reports. So a look right at the event can come too early, and the ones
 *   after it catch the commit within about a millisecond of its end.
 * - `busy` for a second after a change was seen, where the file cannot be watched: wake-ups within
 *   ~3 ms under load.
 * - `quiet` otherwise: with the file watched, in case a change goes unreported (the file replaced,
 *   say); without, the first task after a lull waits ~25 ms on average.
 */
const CHECK_MS = { afterWrite: 1, writeWindow: 20, busy: 5, quiet: 50 };
const BUSY_FOR_MS = 1000;

/**
 * Wake-ups from other processes on the same file. SQLite has no NOTIFY, but `PRAGMA data_version`
 * changes on a connection whenever another connection, in any process, has committed to the file since
 * it last looked (its own commits and transactions that wrote nothing leave it alone). While anyone
 * listens, the store's connection looks (see CHECK_MS), and on a change calls the listeners with []:
 * "something changed, re-check". The commit may have added or requeued tasks, or only recorded a
 * heartbeat; which task types, if any, it cannot tell. Stores in this process also get the typed,
 * immediate wake-up of local-signal.ts, so a commit from one of them wakes its listeners twice.
 *
 * It watches the WAL file (fs.watch: inotify on Linux), which every commit writes to, so a task that
 * another process enqueues wakes a worker about a millisecond after its commit rather than at the
 * next look of a fixed timer. Its times are the process's monotonic clock: with the wall clock, a step
 * back of an hour (NTP, an operator) made the last write look an hour ahead, and the store looked every
 * millisecond until the clock caught up (20 times its idle CPU).
 */
export class CommitWatcher {
  private readonly listeners = new Set<Listener>();
  private watching = false;
  private timer: NodeJS.Timeout | null = null;
  private timerDue = 0;
  private wal: FSWatcher | null = null;
  private seen = 0;
  private lastChange = 0;
  private lastWrite = 0;

  constructor(
    private readonly conn: SqliteConnection,
    /** The database's WAL file: its path and "-wal". */
    private readonly walPath: string,
    private readonly checkMs = CHECK_MS,
  ) {}

  add(listener: Listener): () => void {
    if (!this.watching) {
      this.watching = true;
      this.seen = this.version();
      this.wal = this.watchWal();
      this.schedule();
    }
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stop();
    };
  }

  /** Stops looking (last unsubscribe, or the store closing). */
  stop(): void {
    this.watching = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.wal?.close();
    this.wal = null;
    this.listeners.clear();
  }

  /** null where the file cannot be watched: none yet, or a file system without change events. */
  private watchWal(): FSWatcher | null {
    try {
      const watcher = watch(this.walPath, { persistent: false }, () => {
        this.lastWrite = monotonicMs();
        // Sooner than the timer was due: many writes in a row move it once.
        if (this.timerDue > this.lastWrite + this.checkMs.afterWrite) this.schedule();
      });
      watcher.on("error", () => {
        watcher.close();
        if (this.wal === watcher) this.wal = null;
      });
      return watcher;
    } catch {
      return null;
    }
  }

  private schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    const ms = this.nextLookMs(monotonicMs());
    this.timerDue = monotonicMs() + ms;
    // unref'd: a subscription alone must not keep the process alive.
    this.timer = setTimeout(() => {
      this.timer = null;
      this.look();
      if (this.watching) this.schedule();
    }, ms).unref();
  }

  private nextLookMs(now: number): number {
    const { afterWrite, writeWindow, busy, quiet } = this.checkMs;
    if (this.wal !== null) return now - this.lastWrite < writeWindow ? afterWrite : quiet;
    return now - this.lastChange < BUSY_FOR_MS ? busy : quiet;
  }

  private look(): void {
    try {
      const version = this.version();
      if (version !== this.seen) {
        this.seen = version;
        this.lastChange = monotonicMs();
        for (const l of [...this.listeners]) l([]);
      }
    } catch {
      // e.g. the file is briefly busy: look again next time; at worst the next poll finds the work
    }
  }

  private version(): number {
    return (this.conn.stmt("PRAGMA data_version").get() as { data_version: number }).data_version;
  }
}
