import { hostname } from "node:os";
import type { Taskpool } from "../api/taskpool.js";
import type { ApiKeyRecord } from "../core/api-key.js";

const NAME = /^taskpool dev on (\S+), pid (\d+)$/;

/** Whether a process of this machine is still running (one of another user counts as running). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * An admin key for one `taskpool dev` session, to print and use from the dashboard. A stored key cannot
 * be shown again (only its hash is kept), so each session makes its own and revokes it when it stops;
 * keys left by sessions of this machine that ended without stopping (killed) are revoked here.
 * A room of 1000 requests a minute: the dashboard alone polls about 50 times a minute per tab.
 */
export async function createDevKey(pool: Taskpool): Promise<{ key: string; apiKey: ApiKeyRecord }> {
  for (const k of await pool.apiKeys()) {
    const m = k.revokedAt === null ? NAME.exec(k.name ?? "") : null;
    if (m && m[1] === hostname() && !running(Number(m[2]))) await pool.revokeApiKey(k.id);
  }
  return pool.createApiKey({ scope: "admin", name: `taskpool dev on ${hostname()}, pid ${process.pid}`, rateLimitPerMinute: 1000 });
}
