import type { SqliteConnection } from "./connection.js";

type Listener = (taskTypes: string[]) => void;

/**
 * How often a subscribed store looks for other connections' commits. One look takes ~3 µs (it reads
 * the WAL index in shared memory); the timer costs more. Looking every 50 ms, an idle store spends
 * ~5 ms of CPU per second; every 5 ms, ~20 ms per second. So it looks every 5 ms for a second after
 * each commit it saw (a busy queue: wake-ups within ~3 ms) and every 50 ms once things are quiet
 * (the first task after a lull waits ~25 ms on average, far below any poll interval).
 */
const BUSY_CHECK_MS = 5;
const QUIET_CHECK_MS = 50;
const QUIET_AFTER_MS = 1000;

/**
 * Wake-ups from other processes on the same file. SQLite has no NOTIFY, but `PRAGMA data_version`
 * changes on a connection whenever another connection, in any process, has committed to the file since
 * it last looked (its own commits and transactions that wrote nothing leave it alone). While anyone
 * listens, the store's connection looks every CHECK_MS and on a change calls the listeners with []:
 * "something changed, re-check". The commit may have added or requeued tasks, or only recorded a
 * heartbeat; which task types, if any, it cannot tell. Stores in this process also get the typed,
 * immediate wake-up of local-signal.ts, so a commit from one of them wakes its listeners twice.
 */
export class CommitWatcher {
  private readonly listeners = new Set<Listener>();
  private timer: NodeJS.Timeout | null = null;
  private seen = 0;
  private lastChange = 0;

  constructor(private readonly conn: SqliteConnection) {}

  add(listener: Listener): () => void {
    if (!this.timer) {
      this.seen = this.version();
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
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.listeners.clear();
  }

  private schedule(): void {
    const quiet = Date.now() - this.lastChange > QUIET_AFTER_MS;
    // unref'd: a subscription alone must not keep the process alive.
    this.timer = setTimeout(() => this.check(), quiet ? QUIET_CHECK_MS : BUSY_CHECK_MS).unref();
  }

  private check(): void {
    try {
      const version = this.version();
      if (version !== this.seen) {
        this.seen = version;
        this.lastChange = Date.now();
        for (const l of [...this.listeners]) l([]);
      }
    } catch {
      // e.g. the file is briefly busy: look again next tick; at worst the next poll finds the work
    }
    if (this.timer) this.schedule();
  }

  private version(): number {
    return (this.conn.stmt("PRAGMA data_version").get() as { data_version: number }).data_version;
  }
}
