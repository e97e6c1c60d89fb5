import { hostname } from "node:os";
import type { Taskpool } from "../api/taskpool.js";
import type { ApiKeyRecord } from "../core/api-key.js";
import { processRuns } from "../core/process-alive.js";

const NAME = /^taskpool dev on (\S+), pid (\d+)$/;

/**
 * Revokes the keys of `taskpool dev` sessions of this machine that ended without stopping (killed):
 * each lets anyone holding it do anything, 1000 times a minute. Done first thing, before a session
 * can be refused (a killed session's schedules left behind): the key stayed active for good then.
 */
export async function revokeDeadDevKeys(pool: Taskpool): Promise<void> {
  for (const k of await pool.apiKeys()) {
    const m = k.revokedAt === null ? NAME.exec(k.name ?? "") : null;
    if (m && m[1] === hostname() && !processRuns(Number(m[2]))) await pool.revokeApiKey(k.id);
  }
}

/**
 * An admin key for one `taskpool dev` session, to print and use from the dashboard. A stored key cannot
 * be shown again (only its hash is kept), so each session makes its own and revokes it when it stops.
 * A room of 1000 requests a minute: the dashboard alone polls about 50 times a minute per tab.
 */
export async function createDevKey(pool: Taskpool): Promise<{ key: string; apiKey: ApiKeyRecord }> {
  return pool.createApiKey({ scope: "admin", name: `taskpool dev on ${hostname()}, pid ${process.pid}`, rateLimitPerMinute: 1000 });
}
