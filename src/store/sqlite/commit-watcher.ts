import type { SqliteConnection } from "./connection.js";

type Listener = (taskTypes: string[]) => void;

/**
 * How often a subscribed store looks for other connections' commits: wake-ups within ~50 ms, far below
 * any poll interval. Measured: one look takes ~3 µs (it reads the WAL index in shared memory); an idle
 * subscribed store spent 2–5 ms of CPU per second, about what an empty 50 ms interval costs alone.
 */
const CHECK_MS = 50;

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

  constructor(private readonly conn: SqliteConnection) {}

  add(listener: Listener): () => void {
    if (!this.timer) {
      this.seen = this.version();
      // unref'd: a subscription alone must not keep the process alive.
      this.timer = setInterval(() => this.check(), CHECK_MS).unref();
    }
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stop();
    };
  }

  /** Stops looking (last unsubscribe, or the store closing). */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.listeners.clear();
  }

  private check(): void {
    let version: number;
    try {
      version = this.version();
    } catch {
      return; // e.g. the file is briefly busy: look again next tick; at worst the next poll finds the work
    }
    if (version === this.seen) return;
    this.seen = version;
    for (const l of [...this.listeners]) l([]);
  }

  private version(): number {
    return (this.conn.stmt("PRAGMA data_version").get() as { data_version: number }).data_version;
  }
}
