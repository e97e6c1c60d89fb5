/**
 * API keys on every route but the public ones: `X-API-Key` is looked up by its hash (one indexed
 * query), a missing, unknown or revoked key gets 401, a key whose scope the route does not allow
 * gets 403. `admin` may call everything. The key found is on `request.apiKey`, which the rate limit
 * counts per key.
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

export function installAuth(app: FastifyInstance, pool: Taskpool, enabled: boolean): void {
  app.decorateRequest("apiKey", null);
  if (!enabled) return;
  app.addHook("onRequest", async (request: FastifyRequest) => {
    const { access, acceptsBearer } = request.routeOptions.config as Partial<RouteConfig>;
    // Routes taskpool did not define (the docs' assets, 404s) are public, like those marked so.
    if (access === undefined || access === "public") return;
    const presented = request.headers[API_KEY_HEADER] ?? (acceptsBearer ? bearerToken(request.headers.authorization) : undefined);
    if (presented === undefined || presented === "") {
      const where = acceptsBearer ? "the X-API-Key header or as Authorization: Bearer <key>" : "the X-API-Key header";
      throw new HttpError("unauthorized", `Missing API key: send it in ${where} (\`taskpool keys create\` makes one)`);
    }
    const key = typeof presented === "string" ? await pool.authenticate(presented) : null;
    if (!key) throw new HttpError("unauthorized", "Invalid or revoked API key");
    if (key.scope !== "admin" && !access.includes(key.scope)) {
      const allowed = [...access, "admin"].join(" or ");
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
