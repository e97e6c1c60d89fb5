import Database from "better-sqlite3";
import { UnavailableError } from "../../core/errors.js";
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

/**
 * One better-sqlite3 connection with what every SQLite operation needs: cached prepared statements,
 * transactions with a chosen durability, and the audit-event insert.
 */
export class SqliteConnection {
  readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement>();
  private synchronous: "NORMAL" | "FULL" | null = null;

  constructor(
    path: string,
    private busyTimeoutMs: number,
  ) {
    this.db = new Database(path);
    this.db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    this.db.pragma("journal_mode = WAL");
    this.db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT}`);
    this.db.pragma("foreign_keys = ON");
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
   * Another process holding the write lock past the busy timeout fails the BEGIN, before anything
   * was written: that is an UnavailableError, which a worker retries, a server answers 503 and the
   * CLI prints as one line, rather than a bare "database is locked".
   */
  tx<T>(durable: boolean, fn: () => T): T {
    const level = durable ? "FULL" : "NORMAL";
    if (this.synchronous !== level) {
      this.db.pragma(`synchronous = ${level}`);
      this.synchronous = level;
    }
    try {
      return this.db.transaction(fn).immediate();
    } catch (error) {
      if (!isBusy(error)) throw error;
      throw new UnavailableError(
        "database_unavailable",
        `The SQLite file ${this.db.name} stayed locked by another process's write for ${this.busyTimeoutMs} ms; nothing was written: try again shortly`,
      );
    }
  }

  /** Runs `fn` with `ms` as the busy timeout: how long its writes wait for another process's write lock. */
  waitingUpTo<T>(ms: number, fn: () => T): T {
    const usual = this.busyTimeoutMs;
    this.db.pragma(`busy_timeout = ${(this.busyTimeoutMs = ms)}`);
    try {
      return fn();
    } finally {
      this.db.pragma(`busy_timeout = ${(this.busyTimeoutMs = usual)}`);
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
