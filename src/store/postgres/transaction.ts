import type pg from "pg";

/** `work` in a transaction on one of the pool's connections: committed if it returns, rolled back if it throws. */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    client.release();
    return result;
  } catch (error) {
    // A statement past its timeout still holds the connection: pg queues anything after it until its
    // answer comes, and on a link gone silent a ROLLBACK would wait out a timeout of its own. Dropping
    // the connection rolls back as surely, and keeps it out of the pool.
    const usable = !timedOut(error) && (await client.query("ROLLBACK").then(() => true, () => false));
    client.release(usable ? undefined : true);
    throw error;
  }
}

/** pg's error for a statement that passed its query_timeout. */
function timedOut(error: unknown): boolean {
  return error instanceof Error && error.message === "Query read timeout";
}

/** PostgreSQL's error for the statement it ended to break a cycle of waits. */
const DEADLOCK_DETECTED = "40P01";
const DEADLOCK_TRIES = 3;

/**
 * `work` again when PostgreSQL ended it to break a deadlock, at most DEADLOCK_TRIES times in all. Only
 * for work that is one statement outside a transaction, or one whole transaction: the victim's
 * statement and transaction are rolled back, so nothing of it was written, and the other side has gone
 * on. Not for a caller's own transaction, whose earlier statements are lost with it.
 */
export async function retriedOnDeadlock<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (!isDeadlock(error) || attempt >= DEADLOCK_TRIES) throw error;
    }
  }
}

export function isDeadlock(error: unknown): boolean {
  return (error as { code?: string } | null)?.code === DEADLOCK_DETECTED;
}
