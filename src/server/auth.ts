/**
 * API keys on every route but the public ones: `X-API-Key` is looked up by its hash (one indexed
 * query), a missing, unknown or revoked key gets 401, a key whose scope the route does not allow
 * gets 403. `admin` may call everything. The key found is on `request.apiKey`, which the rate limit
 * counts per key. Without keys, requests that browsers mark as sent by another site get 403.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Taskpool } from "../api/taskpool.js";
import type { ApiKeyRecord } from "../core/api-key.js";
import { HttpError } from "./errors.js";
import type { RouteConfig } from "./route.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The key the request presented; null on public routes and when the server runs without auth. */
    apiKey: ApiKeyRecord | null;
  }
}

export const API_KEY_HEADER = "x-api-key";

/**
 * Keys looked up in the last `ttlMs`, so a busy worker's requests cost no query each (the lookup was
 * half the database round trips of a claim). The price: a key revoked elsewhere is still accepted
 * here for up to `ttlMs`; one revoked through this server's own pool is dropped at once. Unknown
 * keys are remembered too, so a flood of bad keys does not become a flood of queries.
 */
class KeyCache {
  private readonly entries = new Map<string, { key: ApiKeyRecord | null; until: number }>();

  constructor(private readonly ttlMs: number) {}

  async lookup(presented: string, pool: Taskpool): Promise<ApiKeyRecord | null> {
    const now = performance.now();
    const hit = this.entries.get(presented);
    if (hit && hit.until > now) return hit.key;
    const key = await pool.authenticate(presented);
    if (this.ttlMs > 0) {
      // Bounded: presented strings are the caller's, and a scan of random keys must not grow the map.
      if (this.entries.size >= MAX_CACHED_KEYS) this.entries.clear();
      this.entries.set(presented, { key, until: now + this.ttlMs });
    }
    return key;
  }

  forget(id: number): void {
    for (const [presented, entry] of this.entries) if (entry.key?.id === id) this.entries.delete(presented);
  }
}

const MAX_CACHED_KEYS = 10_000;
/** How long a looked-up key is trusted before it is looked up again (and so how late a revocation made elsewhere applies). */
export const DEFAULT_KEY_CACHE_MS = 5000;

export function installAuth(app: FastifyInstance, pool: Taskpool, enabled: boolean, keyCacheMs = DEFAULT_KEY_CACHE_MS): void {
  app.decorateRequest("apiKey", null);
  if (!enabled) {
    refuseOtherSites(app);
    return;
  }
  const cache = new KeyCache(keyCacheMs);
  const stopHearing = pool.onApiKeyRevoked((id) => cache.forget(id));
  app.addHook("onClose", async () => stopHearing());
  app.addHook("onRequest", async (request: FastifyRequest) => {
    const { access, acceptsBearer } = request.routeOptions.config as Partial<RouteConfig>;
    // Routes taskpool did not define (the docs' assets, 404s) are public, like those marked so.
    if (access === undefined || access === "public") return;
    const presented = request.headers[API_KEY_HEADER] ?? (acceptsBearer ? bearerToken(request.headers.authorization) : undefined);
    if (presented === undefined || presented === "") {
      const where = acceptsBearer ? "the X-API-Key header or as Authorization: Bearer <key>" : "the X-API-Key header";
      throw new HttpError("unauthorized", `Missing API key: send it in ${where} (\`taskpool keys create\` makes one)`);
    }
    const key = typeof presented === "string" ? await cache.lookup(presented, pool) : null;
    if (!key) throw new HttpError("unauthorized", "Invalid or revoked API key");
    if (key.scope !== "admin" && !access.includes(key.scope)) {
      const allowed = [...new Set([...access, "admin"])].join(" or ");
      throw new HttpError("forbidden", `This API key's scope is ${key.scope}; ${request.method} ${request.routeOptions.url} needs ${allowed}`);
    }
    request.apiKey = key;
  });
}

/** The token of an `Authorization: Bearer <token>` header, if that is what it holds. */
function bearerToken(header: string | undefined): string | undefined {
  const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1] : undefined;
}

/**
 * Without keys, a server on 127.0.0.1 is open to every page its users' browsers open: a page anywhere
 * may POST to it with no body and no header that makes the browser ask the server first (fetch in
 * no-cors mode), and cancel, retry or shut down at will. Browsers say where such a request comes from
 * (Sec-Fetch-Site); anything but the server's own pages (same-origin) or a typed URL (none) is refused.
 * Scripts and clients send no such header. With keys this is not needed: another site cannot add
 * X-API-Key without the server's consent (CORS, which it does not give).
 */
function refuseOtherSites(app: FastifyInstance): void {
  app.addHook("onRequest", async (request: FastifyRequest) => {
    const { access } = request.routeOptions.config as Partial<RouteConfig>;
    if (access === undefined || access === "public") return;
    const site = request.headers["sec-fetch-site"];
    if (site === "cross-site" || site === "same-site") throw new HttpError("forbidden", `A page on another site may not call this server's API (Sec-Fetch-Site: ${site})`);
  });
}
