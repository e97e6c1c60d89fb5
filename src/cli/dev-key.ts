import { hostname } from "node:os";
import type { Taskpool } from "../api/taskpool.js";
import type { ApiKeyRecord } from "../core/api-key.js";
import { processRuns } from "../core/process-alive.js";

const NAME = /^taskpool dev on (\S+), pid (\d+)$/;

/**
 * An admin key for one `taskpool dev` session, to print and use from the dashboard. A stored key cannot
 * be shown again (only its hash is kept), so each session makes its own and revokes it when it stops;
 * keys left by sessions of this machine that ended without stopping (killed) are revoked here.
 * A room of 1000 requests a minute: the dashboard alone polls about 50 times a minute per tab.
 */
export async function createDevKey(pool: Taskpool): Promise<{ key: string; apiKey: ApiKeyRecord }> {
  for (const k of await pool.apiKeys()) {
    const m = k.revokedAt === null ? NAME.exec(k.name ?? "") : null;
    if (m && m[1] === hostname() && !processRuns(Number(m[2]))) await pool.revokeApiKey(k.id);
  }
  return pool.createApiKey({ scope: "admin", name: `taskpool dev on ${hostname()}, pid ${process.pid}`, rateLimitPerMinute: 1000 });
}
