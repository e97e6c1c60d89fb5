/**
 * The server's defaults, in a module of their own so the CLI can show them in its help without
 * loading Fastify and the routes, which only `serve` and `dev` need.
 */

/** Requests per key and minute (seed 002's 100). */
export const DEFAULT_RATE_LIMIT_PER_MINUTE = 100;
/** Largest request body, in bytes (4 MiB: a 1 MiB params or checkpoint fits with room to spare). */
export const DEFAULT_BODY_LIMIT = 4 * 1024 * 1024;
/**
 * How long a client has to send a whole request, headers and body (a 4 MiB body at 70 KB/s). A client
 * sending a byte every few seconds otherwise held its connection for good; a few hundred such, with
 * no key, used up the server's file descriptors and every other request was reset.
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
/** How long a looked-up key is trusted before it is looked up again (and so how late a revocation made elsewhere applies). */
export const DEFAULT_KEY_CACHE_MS = 5000;
/** Failed authentications allowed per client address and minute before it is refused without a lookup. */
export const DEFAULT_AUTH_FAILURES_PER_MINUTE = 20;
/** How long closing waits for the requests in flight: a statement's default 10 s limit, twice, under an orchestrator's usual 30 s. */
export const DEFAULT_CLOSE_GRACE_MS = 20_000;
