/**
 * The limit on the database's side (each connection's statement_timeout), unless the store is given
 * another (PostgresStoreOptions.statementTimeoutMs). A call the client gave up on otherwise ran on in
 * PostgreSQL: a burst of slow searches left scans running 55 s after their callers had gone, on
 * connections beyond the pool's. Cancelled there, the statement is rolled back, so the caller is told
 * nothing was written (503), where a call timed out by the client alone may have committed.
 */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 10_000;
/** The range statementTimeoutMs may take: a tenth of a second to an hour. */
export const STATEMENT_TIMEOUT_RANGE = { min: 100, max: 3_600_000 };

/**
 * How long one of the store's transactions may sit open between two statements before PostgreSQL ends
 * its session, rolling it back. Its process sends them back to back, so a longer wait means the
 * process is frozen (SIGSTOP, a paused VM, a blocked event loop) with the transaction's row locks
 * held: a coordinator frozen inside its sweep kept the dead worker's row locked, every sweep of its
 * successor waited on it until the statement timeout and failed, and no dead worker's task was
 * recovered until the frozen process woke. The statement timeout's length, and never under its
 * default, so that a passing stall of a busy process does not lose its transaction; never over 30 s,
 * since a statement timeout raised for slow reads (up to an hour) would leave recovery halted as long.
 */
export const idleInTransactionTimeoutMs = (statementTimeoutMs: number) => Math.min(Math.max(statementTimeoutMs, DEFAULT_STATEMENT_TIMEOUT_MS), 30_000);

/**
 * How long any statement waits for its answer on the client's side, set on the pool so that none is
 * left without one (transactions' BEGIN, COMMIT and ROLLBACK, sweeps, schedule runs). A connection can
 * go silent without closing (a network partition, a half-open proxy, a failover that leaves the old
 * socket open); without a limit the call, and the worker, server or coordinator waiting on it, hangs
 * for good although new connections would work. Past it the call fails and its connection is
 * discarded: the caller retries on a fresh one (a write that did land is then refused by its lease,
 * never applied twice). Every call is an indexed statement or a small batch, a sweep's or a run's too.
 * A second past the database's own limit, which answers first on a connection that still works.
 */
export const clientTimeoutMs = (statementTimeoutMs: number) => statementTimeoutMs + 1000;

/**
 * How long opening a connection, or waiting for a free one of the pool, may take: the client's limit,
 * at most the default's. A longer statement limit, set for slow searches, must not leave every call
 * waiting minutes on a database address that swallows packets.
 */
export const connectTimeoutMs = (statementTimeoutMs: number) => Math.min(clientTimeoutMs(statementTimeoutMs), clientTimeoutMs(DEFAULT_STATEMENT_TIMEOUT_MS));

/**
 * For the statements that may rightly run long (a migration building an index on a large table, a
 * recount reading every completed task, waiting for another process's migration): pg cannot lift
 * the pool's limit for one statement (0 means "the pool's"), so they ask for the longest a Node.js
 * timer waits, 24.8 days. They run in a transaction that lifts the database's limit first (LIFT_STATEMENT_TIMEOUT).
 */
export const UNTIMED = { query_timeout: 2_147_483_647 };

export const LIFT_STATEMENT_TIMEOUT = "SET LOCAL statement_timeout = 0";
