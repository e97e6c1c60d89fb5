import type { FastifyInstance } from "fastify";
import type { Taskpool } from "../api/taskpool.js";
import { listenError } from "./errors.js";

/**
 * The server on its port, answering its address; if it cannot listen (the port taken), the server and
 * the pool are closed and the reason is one CLI line. Called before anything else starts (workers, a
 * coordinator), so there is nothing more to undo.
 */
export async function listenOrExplain(app: FastifyInstance, pool: Taskpool, host: string, port: number): Promise<string> {
  try {
    return await app.listen({ host, port });
  } catch (error) {
    await app.close();
    await pool.close();
    throw listenError(error as NodeJS.ErrnoException, host, port);
  }
}
