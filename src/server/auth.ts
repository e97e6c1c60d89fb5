/**
 * API keys on every route but the public ones: `X-API-Key` is looked up by its hash (one indexed
 * query), a missing, unknown or revoked key gets 401, a key whose scope the route does not allow
 * gets 403. `admin` may call everything. The key found is on `request.apiKey`, which the rate limit
 * counts per key. Failed authentications are limited per client address (FailedAuthLimit). Without
 * keys, requests that browsers mark as sent by another site get 403.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Taskpool } from "../api/taskpool.js";
import type { ApiKeyRecord } from "../core/api-key.js";
import { monotonicMs } from "../core/clock.js";
import { hostOf, isLoopback } from "../core/loopback.js";
import { DEFAULT_AUTH_FAILURES_PER_MINUTE, DEFAULT_KEY_CACHE_MS } from "./defaults.js";
import { within } from "./deadline.js";
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
  /** Keys this server accepted, by what was presented, to their id; only a real key gets in, so a guesser cannot grow it. */
  private readonly accepted = new Map<string, number>();

  constructor(private readonly ttlMs: number) {}

  async lookup(presented: string, pool: Taskpool): Promise<ApiKeyRecord | null> {
    const now = performance.now();
    const hit = this.entries.get(presented);
    if (hit && hit.until > now) return hit.key;
    let key: ApiKeyRecord | null;
    try {
      // A key accepted before is looked up again only to hear of a revocation: not worth waiting the
      // statement's timeout (10 s by default) for when the database hangs.
      key = await (hit?.key ? within(pool.authenticate(presented), KNOWN_KEY_LOOKUP_WITHIN_MS) : pool.authenticate(presented));
    } catch (error) {
      // The database out of reach: a key accepted before is accepted still, however long ago. Every
      // route needs the database but /metrics, which then says taskpool_database_up 0; refused for
      // its key instead, a scrape with a key got a 503 and the gauge never reached the alert.
      if (hit?.key) return hit.key;
      throw error;
    }
    if (key) {
      if (this.accepted.size >= MAX_CACHED_KEYS) this.accepted.clear();
      this.accepted.set(presented, key.id);
    } else this.accepted.delete(presented);
    if (this.ttlMs > 0) {
      // Bounded: presented strings are the caller's, and a scan of random keys must not grow the map.
      if (this.entries.size >= MAX_CACHED_KEYS) this.entries.clear();
      this.entries.set(presented, { key, until: now + this.ttlMs });
    }
    return key;
  }

  forget(id: number): void {
    for (const [presented, entry] of this.entries) if (entry.key?.id === id) this.entries.delete(presented);
    for (const [presented, keyId] of this.accepted) if (keyId === id) this.accepted.delete(presented);
  }

  /** Whether `presented` is a key this server accepted (and has not seen refused or revoked since). */
  known(presented: string): boolean {
    return this.accepted.has(presented);
  }
}

const MAX_CACHED_KEYS = 10_000;
const KNOWN_KEY_LOOKUP_WITHIN_MS = 1000;

/**
 * Without a bound, a client could present unlimited wrong keys, each a database lookup: guessing keys
 * or loading the database at will. Each different wrong key counts against the client's address (a
 * fixed one-minute window on the monotonic clock, as the per-key limit); over the limit its requests
 * get 429 before any lookup, except with a key this server already accepted, so a worker sharing the
 * address (behind a NAT or a proxy) keeps working. Successful authentications are never counted, nor
 * is a wrong key sent again: the key cache answers it without a lookup, and a worker left running with
 * its revoked key, retrying forty times a minute, locked every other client of its address out.
 */
class FailedAuthLimit {
  private readonly windows = new Map<string, { start: number; keys: Set<string> }>();

  constructor(private readonly perMinute: number) {}

  /** Refuses the request when `address` used up its failures in the current window. */
  check(address: string, reply: FastifyReply): void {
    const window = this.window(address);
    if (window === undefined || window.keys.size < this.perMinute) return;
    const seconds = Math.max(1, Math.ceil((window.start + WINDOW_MS - monotonicMs()) / 1000));
    void reply.header("retry-after", seconds);
    throw new HttpError("rate_limited", `Too many different wrong API keys from this address (at most ${this.perMinute} a minute); retry in ${seconds} s with a valid key`, { retryAfter: seconds });
  }

  failed(address: string, presented: string): void {
    let window = this.window(address);
    if (window === undefined) {
      // Bounded: addresses are the clients'; the windows of a minute ago are worth nothing.
      if (this.windows.size >= MAX_CACHED_KEYS) this.windows.clear();
      window = { start: monotonicMs(), keys: new Set() };
      this.windows.set(address, window);
    }
    if (window.keys.size < this.perMinute) window.keys.add(presented);
  }

  private window(address: string): { start: number; keys: Set<string> } | undefined {
    const window = this.windows.get(address);
    return window !== undefined && window.start + WINDOW_MS > monotonicMs() ? window : undefined;
  }
}

const WINDOW_MS = 60_000;

export interface AuthOptions {
  /** Ask for keys (false: the server runs without them). */
  enabled: boolean;
  keyCacheMs?: number;
  /** Failed authentications per client address and minute (false: no limit). */
  failuresPerMinute?: number | false;
  /** Without keys: refuse requests addressed to any but a loopback host (see refuseOtherSites). */
  loopbackOnly?: boolean;
}

export function installAuth(app: FastifyInstance, pool: Taskpool, options: AuthOptions): void {
  app.decorateRequest("apiKey", null);
  if (!options.enabled) {
    refuseOtherSites(app, options.loopbackOnly === true);
    return;
  }
  const cache = new KeyCache(options.keyCacheMs ?? DEFAULT_KEY_CACHE_MS);
  const failuresPerMinute = options.failuresPerMinute ?? DEFAULT_AUTH_FAILURES_PER_MINUTE;
  const failures = failuresPerMinute === false ? null : new FailedAuthLimit(failuresPerMinute);
  const stopHearing = pool.onApiKeyRevoked((id) => cache.forget(id));
  app.addHook("onClose", async () => stopHearing());
  app.addHook("onRequest", async (request: FastifyRequest, reply: FastifyReply) => {
    const { access, acceptsBearer } = request.routeOptions.config as Partial<RouteConfig>;
    // Routes taskpool did not define (the docs' assets, 404s) are public, like those marked so.
    if (access === undefined || access === "public") return;
    const presented = request.headers[API_KEY_HEADER] ?? (acceptsBearer ? bearerToken(request.headers.authorization) : undefined);
    if (presented === undefined || presented === "") {
      const where = acceptsBearer ? "the X-API-Key header or as Authorization: Bearer <key>" : "the X-API-Key header";
      // A key sent the other common way is no missing key: say where this route looks for it.
      const sentElsewhere = !acceptsBearer && request.headers.authorization !== undefined ? "; the Authorization header is read on /metrics only" : "";
      throw new HttpError("unauthorized", `Missing API key: send it in ${where} (\`taskpool keys create\` makes one)${sentElsewhere}`);
    }
    // Node joins a repeated header with ", ", and no key has a comma: two keys are no wrong key, nor a guess to count.
    const sent = typeof presented === "string" ? presented.split(",").length : presented.length;
    if (sent > 1) {
      // Said of the header the keys came in: on /metrics that may be Authorization, which Node does not join.
      const [header, how] =
        request.headers[API_KEY_HEADER] === undefined ? ["Authorization: Bearer", "keys joined with a comma"] : ["X-API-Key", "a header repeated, or keys joined with a comma"];
      throw new HttpError("bad_request", `Send one ${header} header, with one key: this request sent ${sent} (${how})`);
    }
    if (typeof presented !== "string" || !cache.known(presented)) failures?.check(request.ip, reply);
    const key = typeof presented === "string" ? await cache.lookup(presented, pool) : null;
    if (!key) {
      failures?.failed(request.ip, typeof presented === "string" ? presented : JSON.stringify(presented));
      throw new HttpError("unauthorized", "Invalid or revoked API key");
    }
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
 * Scripts and clients send no such header. A page can still make its own name point at 127.0.0.1
 * (DNS rebinding), and then it is the same origin: so a server keyless for listening on loopback
 * (`loopbackOnly`) answers only requests addressed to a loopback host, which no rebound name is. With
 * keys none of this is needed: another site cannot add X-API-Key without the server's consent (CORS,
 * which it does not give).
 */
/** Whether the origin a browser sent names `host` (with its port), as its own pages' requests do; "null" (a sandboxed or file page) does not. */
function sameHost(origin: string, host: string): boolean {
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

function refuseOtherSites(app: FastifyInstance, loopbackOnly: boolean): void {
  app.addHook("onRequest", async (request: FastifyRequest) => {
    const { access } = request.routeOptions.config as Partial<RouteConfig>;
    if (access === undefined || access === "public") return;
    const site = request.headers["sec-fetch-site"];
    if (site === "cross-site" || site === "same-site") throw new HttpError("forbidden", `A page on another site may not call this server's API (Sec-Fetch-Site: ${site})`);
    // Browsers without Sec-Fetch-Site (Safari before 16.4, and plain-HTTP pages on a network address)
    // still say the page's origin on a POST: one that is not this server's own is another site's.
    const origin = request.headers.origin;
    if (origin !== undefined && !sameHost(origin, request.host)) throw new HttpError("forbidden", `A page on another site may not call this server's API (Origin: ${origin})`);
    const host = request.headers.host ?? "";
    if (loopbackOnly && !isLoopback(hostOf(host))) {
      throw new HttpError(
        "forbidden",
        `This server has no API key, so it answers only requests addressed to this machine (Host: 127.0.0.1, localhost or [::1]), not to ${JSON.stringify(host)}: ` +
          "a page can point a name of its own at this machine. Use http://127.0.0.1:<port>, or create a key (taskpool keys create) and restart",
      );
    }
  });
}
