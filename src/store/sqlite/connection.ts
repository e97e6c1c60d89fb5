import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import { DatabaseReadOnlyError, UnavailableError } from "../../core/errors.js";
import type { TaskEvent } from "../../core/event.js";
import type { Json } from "../../core/task.js";
import { INSERT_EVENT } from "./queries.js";

export interface EventInput {
  taskId: number | null;
  event: TaskEvent["event"];
  fromWorkerId?: string | null;
  toWorkerId?: string | null;
  message?: string | null;
  data?: Json;
}

/**
 * The size the WAL file is cut back to once it has been checkpointed and starts over. It grows as long
 * as a reader holds an old snapshot (a slow query, another tool on the file) and SQLite otherwise keeps
 * the file at its largest for as long as any connection is open: one long read under load left
 * hundreds of MB on disk for good. 4 times what a checkpoint normally leaves (1000 pages of 4 KiB), so
 * ordinary bursts do not shrink and regrow it.
 */
const WAL_SIZE_LIMIT = 16 * 1024 * 1024;

/** How long one try at the write lock waits inside SQLite (see tx), and the longest pause between tries. */
const LOCK_TRY_MS = 10;
const MAX_LOCK_PAUSE_MS = 2;

/**
 * One better-sqlite3 connection with what every SQLite operation needs: cached prepared statements,
 * transactions with a chosen durability, and the audit-event insert.
 */
export class SqliteConnection {
  readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement>();
  private synchronous: "NORMAL" | "FULL" | null = null;
  /** The busy timeout of one try at the write lock, and the usual one (reads), prepared once: a pragma call prepares a statement each time. */
  private readonly tryWait: Database.Statement;
  private readonly usualWait: Database.Statement;
  /** Settles when the write transaction called last has ended: the next one waits for it (see tx). */
  private writing: Promise<void> = Promise.resolve();

  constructor(
    path: string,
    private readonly busyTimeoutMs: number,
  ) {
    this.db = new Database(path);
    this.db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    this.tryWait = this.db.prepare(`PRAGMA busy_timeout = ${LOCK_TRY_MS}`);
    this.usualWait = this.db.prepare(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
    this.enterWal();
    this.db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT}`);
    this.db.pragma("foreign_keys = ON");
    // Lower case as JavaScript has it: SQLite's lower() changes ASCII letters only, so a search for
    // "zürich" missed "ZÜRICH" (the params search, queries.ts).
    this.db.function("tp_lower", { deterministic: true }, (text: unknown) => (typeof text === "string" ? text.toLowerCase() : text));
  }

  /**
   * Puts the file in WAL mode (a no-op once it is: the mode is kept in the file). On a file still in
   * rollback mode, a new one, this needs the exclusive lock, and SQLite fails at once, without its busy
   * wait, when another connection is taking the same lock for the same reason (it would deadlock):
   * processes opening one new file together failed with "database is locked". So the switch is tried
   * again, a few milliseconds apart, for up to the busy timeout. The constructor is synchronous, and so
   * is this wait; it happens at most once per file.
   */
  private enterWal(): void {
    const deadline = performance.now() + this.busyTimeoutMs;
    for (;;) {
      try {
        this.db.pragma("journal_mode = WAL");
        return;
      } catch (error) {
        if (!isBusy(error) || performance.now() >= deadline) throw error;
      }
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, LOCK_TRY_MS * Math.random());
    }
  }

  stmt(text: string): Database.Statement {
    let s = this.statements.get(text);
    if (!s) {
      s = this.db.prepare(text);
      this.statements.set(text, s);
    }
    return s;
  }

  /**
   * Runs `fn` in a BEGIN IMMEDIATE transaction (the write lock up front, so two writers never
   * deadlock upgrading read locks). `durable` picks synchronous=FULL (fsync at commit) over NORMAL
   * (survives a process crash; the last commits may be lost on power failure).
   *
   * The lock is waited for here, not in SQLite: each try waits LOCK_TRY_MS inside SQLite, then this
   * loop pauses a few jittered milliseconds, the event loop free, and tries again. SQLite's own wait
   * sleeps up to 100 ms between its tries, so under steady writes from several processes a waiter
   * lost the lock to every newer one and failed after the whole busy timeout, although no write held
   * the lock for more than a few milliseconds; and it blocked the thread (a worker's handlers and
   * timers, a server's every request) as long. Waiting past `waitMs` (the busy timeout) fails before
   * anything was written: an UnavailableError, which a worker retries, a server answers 503 and the
   * CLI prints as one line, rather than a bare "database is locked".
   */
  async tx<T>(durable: boolean, fn: () => T, waitMs = this.busyTimeoutMs): Promise<T> {
    // Inside another transaction's function it would wait for that transaction, which waits for nothing.
    if (this.db.inTransaction) throw new Error("SqliteConnection.tx called inside a transaction: write within the outer one");
    const deadline = performance.now() + waitMs;
    // One call at a time waits for the lock, in the order the calls came, as when each waited inside
    // SQLite: tries of two calls interleaved on one connection could starve one of them, which then
    // failed after its whole timeout although the lock had long been free (seen, its cause not pinned down).
    const before = this.writing;
    let done = () => {};
    this.writing = new Promise<void>((resolve) => (done = resolve));
    await before;
    try {
      return await this.waitForLock(durable, fn, deadline, waitMs);
    } finally {
      done();
    }
  }

  private async waitForLock<T>(durable: boolean, fn: () => T, deadline: number, waitMs: number): Promise<T> {
    for (let pause = 1; ; pause = Math.min(pause * 2, MAX_LOCK_PAUSE_MS)) {
      try {
        return this.tryTx(durable, fn);
      } catch (error) {
        if (isReadOnly(error)) throw new DatabaseReadOnlyError(this.db.name);
        if (!isBusy(error)) throw error;
      }
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new UnavailableError(
          "database_unavailable",
          `The SQLite file ${this.db.name} stayed locked by other processes' writes for ${waitMs} ms (one long write, or too many at once); nothing was written: try again shortly`,
        );
      }
      await sleep(Math.min(left, pause * (0.5 + Math.random())));
    }
  }

  /**
   * One try: SQLite waits LOCK_TRY_MS for the write lock, then gives up (SQLITE_BUSY). The durability is
   * set here, at each try: while one call paused, another of this connection may have set the other.
   */
  private tryTx<T>(durable: boolean, fn: () => T): T {
    const level = durable ? "FULL" : "NORMAL";
    if (this.synchronous !== level) {
      this.db.pragma(`synchronous = ${level}`);
      this.synchronous = level;
    }
    this.tryWait.get();
    try {
      return this.db.transaction(fn).immediate();
    } finally {
      this.usualWait.get();
    }
  }

  logEvent(e: EventInput, now: string): void {
    this.stmt(INSERT_EVENT).run({
      taskId: e.taskId,
      event: e.event,
      fromWorkerId: e.fromWorkerId ?? null,
      toWorkerId: e.toWorkerId ?? null,
      message: e.message ?? null,
      data: e.data === undefined || e.data === null ? null : JSON.stringify(e.data),
      now,
    });
  }

  close(): void {
    this.db.close();
  }
}

/** True when `error` is SQLite refusing to write a file it opened (SQLITE_READONLY and its extended codes). */
function isReadOnly(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return typeof code === "string" && code.startsWith("SQLITE_READONLY");
}

/** True when `error` is SQLite giving up on a lock another connection holds (SQLITE_BUSY and its extended codes). */
function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return typeof code === "string" && code.startsWith("SQLITE_BUSY");
}

/** True when `error` is SQLite refusing a second row in a unique index on tasks.`column`. */
export function isUniqueViolation(error: unknown, column: string): boolean {
  const e = error as { code?: string; message?: string };
  return e?.code === "SQLITE_CONSTRAINT_UNIQUE" && (e.message ?? "").includes(`tasks.${column}`);
}
