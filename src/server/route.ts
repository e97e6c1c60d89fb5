/**
 * How a route is written: one definition per endpoint whose schemas are the library's own (camelCase
 * TypeBox, from core/schemas.ts and core/record-schemas.ts). registerRoute derives the wire schemas
 * from them (core/wire.ts) for validation and the OpenAPI document, converts the request into library
 * values before the handler runs and the handler's answer into wire JSON after, and puts both in the
 * envelope. A handler only calls the pool: no SQL, no rule of its own.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ApiKeyScope } from "../core/api-key.js";
import { ValidationError } from "../core/errors.js";
import { type Static, type TComposite, type TObject, type TProperties, type TSchema, Type } from "../core/typebox.js";
import { validate } from "../core/validation.js";
import { fromWire, toWire, wireSchema } from "../core/wire.js";
import type { ServerContext } from "./context.js";
import { ErrorEnvelope, RequestValidationError } from "./errors.js";

/** Who may call a route: nobody needs a key (`public`), or these scopes (admin always may). */
export type Access = "public" | readonly ApiKeyScope[];

/** What every route's config carries (read by the auth hook). */
export interface RouteConfig {
  access: Access;
  /** Also take the key from `Authorization: Bearer <key>` (what Prometheus sends; /metrics only). */
  acceptsBearer?: boolean;
}

/** A route's request, as the library types it (camelCase, Dates). */
export interface RouteInput<B extends TSchema, Q extends TSchema, P extends TSchema> {
  body: Static<B>;
  query: Static<Q>;
  params: Static<P>;
  /** The request's headers (lower-case names), those the route's `headers` schema names checked. */
  headers: Record<string, string | string[] | undefined>;
}

export interface RouteDefinition<B extends TSchema = TSchema, Q extends TSchema = TSchema, P extends TSchema = TSchema, R extends TProperties = TProperties> {
  method: "GET" | "POST" | "DELETE";
  url: string;
  /** One line for the OpenAPI document. */
  summary: string;
  description?: string;
  /** The resource it belongs to (the OpenAPI tag). */
  tag: string;
  access: Access;
  body?: B;
  query?: Q;
  params?: P;
  /**
   * Request headers the route reads, by their lower-case wire names (not converted, unlike the other
   * parts); other headers pass, so the schema must allow additional properties.
   */
  headers?: TObject;
  /** The success statuses, the usual one first (default [200]); the handler may pick another with reply.code(). */
  status?: number[];
  /** The fields of the success envelope besides `success`. */
  reply: R;
  /** Error statuses worth documenting besides 400, 401, 403, 413 and 429, which every route may answer. */
  errors?: number[];
  handler(input: RouteInput<B, Q, P>, ctx: ServerContext & { request: FastifyRequest; reply: FastifyReply }): Promise<Static<TObject<R>>>;
}

/** Declares a route; the generic parameters let TypeScript check the handler against the schemas. */
export function defineRoute<B extends TSchema, Q extends TSchema, P extends TSchema, R extends TProperties>(definition: RouteDefinition<B, Q, P, R>): RouteDefinition {
  return definition as unknown as RouteDefinition;
}

/** Builds a request body from library schemas and HTTP-only fields; unknown fields are refused. */
export function bodyOf<T extends TObject[]>(...parts: [...T]): TComposite<[...T]> {
  return Type.Composite<[...T]>(parts, { additionalProperties: false });
}

/**
 * The answers every route can give, listed in the OpenAPI document here rather than route by route
 * (docs/http.md's table says when each comes): a refused request (400), one not received in time
 * (408), a body over the limit (413), a rate limit (429), headers over 16 KiB (431).
 */
const COMMON_ERRORS = [400, 408, 413, 429, 431];
/**
 * A guarded route looks its key up in the database before anything else, so besides 401 and 403 it
 * answers 503 database_unavailable when the database cannot be reached.
 */
const GUARDED_ERRORS = [401, 403, 503];
/** A method that carries a body: one that is not JSON is refused with 415 (a GET's body is not read). */
const BODY_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** The success envelope of a route, camelCase. */
export const successEnvelope = (reply: TProperties) => Type.Object({ success: Type.Literal(true), ...reply });

export function registerRoute(app: FastifyInstance, route: RouteDefinition, ctx: ServerContext): void {
  const success = successEnvelope(route.reply);
  const statuses = route.status ?? [200];
  const errors = [
    ...new Set([...COMMON_ERRORS, ...(route.access === "public" ? [] : GUARDED_ERRORS), ...(BODY_METHODS.has(route.method) ? [415] : []), ...(route.errors ?? [])]),
  ].sort();
  const response: Record<number, TSchema> = {};
  const successWire = wireSchema(success);
  for (const status of statuses) response[status] = successWire;
  const errorWire = wireSchema(ErrorEnvelope);
  for (const status of errors) response[status] = errorWire;
  const config: RouteConfig = { access: route.access };
  app.route({
    method: route.method,
    url: route.url,
    config,
    schema: {
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: [route.tag],
      security: route.access === "public" ? [] : [{ apiKey: [] }],
      ...(route.body ? { body: wireSchema(route.body) } : {}),
      ...(route.query ? { querystring: wireSchema(route.query) } : {}),
      ...(route.params ? { params: wireSchema(route.params) } : {}),
      ...(route.headers ? { headers: route.headers } : {}),
      response,
    },
    // Fastify hands the body's check null for no body at all, and the check takes that as {}: a body
    // of JSON `null` passed for none, and `POST /api/tasks/7/cancel` with it cancelled. Refused here,
    // where it can still be told apart (no body, or an empty one, leaves request.body undefined).
    preValidation: async (request) => {
      if (route.body && request.body === null) refuse(wireSchema(route.body), null, "body", "request body", "");
    },
    handler: async (request, reply) => {
      // A route that takes no body or query string refuses one, as the others refuse a field they do not
      // take: `GET /api/workers?status=active` listed every worker, and `recover-stale` with
      // {"dry_run": true} swept. Probes (public) may carry a prober's query string.
      if (route.access !== "public") {
        if (!route.body) refuseAny(request.body, "body", "request body", route);
        if (!route.query) refuseAny(request.query, "querystring", "query string", route);
      }
      const input = {
        body: route.body ? fromWire(route.body, request.body) : undefined,
        query: route.query ? fromWire(route.query, request.query) : undefined,
        params: route.params ? fromWire(route.params, request.params) : undefined,
        headers: request.headers,
      };
      reply.code(statuses[0]);
      const result = await route.handler(input as RouteInput<TSchema, TSchema, TSchema>, { ...ctx, request, reply });
      return toWire(success, { success: true, ...result });
    },
  });
}

/** What a route without a body or query string takes: nothing, or an empty object. */
const NOTHING = Type.Object({}, { additionalProperties: false });

/** Refuses anything but nothing or {} (JSON null included), saying the route takes none. */
function refuseAny(value: unknown, part: string, what: string, route: RouteDefinition): void {
  if (value !== undefined) refuse(NOTHING, value, part, what, `; ${route.method} ${route.url} takes no ${what}`);
}

/** Throws the request's refusal when `value` does not match `schema`, each issue's message followed by `hint`. */
function refuse(schema: TSchema, value: unknown, part: string, what: string, hint: string): void {
  try {
    validate(schema, value, what);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    const issues = error.issues.map((issue) => ({ ...issue, message: issue.message + hint }));
    throw new RequestValidationError(new ValidationError(error.message, issues, error.unlisted), part, what);
  }
}
