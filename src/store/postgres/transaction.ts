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
