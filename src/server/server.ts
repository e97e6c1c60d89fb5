/**
 * The HTTP API (SPEC "HTTP API"): a Fastify app in front of a Taskpool, so that workers and producers
 * in any language use taskpool over HTTP. Routes are grouped per resource in routes/ and only call the
 * pool; their schemas are the library's (route.ts), validated with the same TypeBox checks the library
 * runs, so the API accepts and refuses exactly what the library does, and a refused request writes
 * nothing. Errors answer in one envelope (errors.ts); keys, scopes (auth.ts) and a per-key rate limit
 * guard every route but health and docs; /openapi.json and /docs describe it all.
 */
import { isUtf8 } from "node:buffer";
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import rateLimit from "@fastify/rate-limit";
import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, LogController } from "fastify";
import { pino, type Logger } from "pino";
import type { Taskpool } from "../api/taskpool.js";
import { BeatBatcher, ClaimBatcher, WriteBatcher } from "../api/write-batcher.js";
import { type CoordinatorOptions, resolveSweepTimes } from "../coordinator/coordinator.js";
import { ValidationError } from "../core/errors.js";
import { checkedMs, MAX_TIMER_MS } from "../core/milliseconds.js";
import { counted } from "../core/counted.js";
import { inexactInteger } from "../core/exact-integers.js";
import { type TSchema, Value } from "../core/typebox.js";
import { validate } from "../core/validation.js";
import { VERSION } from "../version.js";
import { installAuth } from "./auth.js";
import type { ServerContext } from "./context.js";
import { dashboard } from "./dashboard.js";
import { DEFAULT_BODY_LIMIT, DEFAULT_CLOSE_GRACE_MS, DEFAULT_RATE_LIMIT_PER_MINUTE, DEFAULT_REQUEST_TIMEOUT_MS } from "./defaults.js";
import { errorReply, HttpError, RequestValidationError } from "./errors.js";
import { LongPoll } from "./long-poll.js";
import { type MetricsAccess, ServerMetrics } from "./metrics.js";
import { MonotonicRateLimitStore } from "./rate-limit-store.js";
import { type RouteConfig, type RouteDefinition, registerRoute } from "./route.js";
import { healthRoutes } from "./routes/health.js";
import { reassignmentRoutes } from "./routes/reassignments.js";
import { scheduleRoutes } from "./routes/schedules.js";
import { taskGenerationRoutes } from "./routes/task-generation.js";
import { taskLeaseRoutes } from "./routes/task-leases.js";
import { taskTypeRoutes } from "./routes/task-types.js";
import { taskRoutes } from "./routes/tasks.js";
import { workerTransportRoutes } from "./routes/worker-transport.js";
import { whoamiRoutes } from "./routes/whoami.js";
import { workerRoutes } from "./routes/workers.js";

export interface ServerOptions {
  /**
   * `keys` (default): every route but /healthz, /readyz, /openapi.json and /docs needs an `X-API-Key`
   * (`taskpool keys create`). `none`: no key is asked for; only for a loopback address or a network you trust.
   */
  auth?: "keys" | "none";
  /** How long a looked-up API key is trusted before it is looked up again (default 5000 ms); a key revoked on another process is refused after at most this long. */
  apiKeyCacheMs?: number;
  /** Requests per minute per API key, unless the key sets its own (default 100, seed 002); false: no limit but the keys' own. Requests without a key are not limited. */
  rateLimitPerMinute?: number | false;
  /**
   * Failed authentications (an unknown or revoked key) allowed per client address and minute (default
   * 20); past them the address gets 429 without its key being looked up, unless the key is one this
   * server already accepted. false: no limit.
   */
  authFailuresPerMinute?: number | false;
  /**
   * The reverse proxies in front of the server, whose `X-Forwarded-For` names the client: their
   * addresses and CIDR ranges, comma-separated ("10.0.0.0/8, loopback"). The failed-key limit counts
   * by the address the header gives, and the access log shows it. Default none: the header is
   * ignored, so a client cannot pick its own address by sending one.
   */
  trustProxy?: string;
  /**
   * Without keys, answer only requests addressed to a loopback host (Host: 127.0.0.1, localhost, [::1]):
   * what `serve` sets when it goes keyless for listening on loopback, against DNS rebinding (auth.ts).
   */
  loopbackOnly?: boolean;
  /** Largest request body, in bytes (default 4 MiB: a 1 MiB params or checkpoint fits with room to spare). */
  bodyLimit?: number;
  /** Milliseconds a client has to send a whole request (answered 408 past it); default DEFAULT_REQUEST_TIMEOUT_MS. The answer, a long-poll claim's wait included, is not counted. */
  requestTimeoutMs?: number;
  /**
   * How long close() waits for the requests in flight (a client that hung up included) before it drops
   * their connections and goes on (default 20000 ms). The store must stay open until they finish.
   */
  closeGraceMs?: number;
  /**
   * What a worker heartbeat answers as `next_heartbeat_in`, in seconds: by default half the
   * coordinator's `staleAfterMs`, at most 30 (30 at the default 60 s). Refused if longer than that half.
   */
  heartbeatIntervalSeconds?: number;
  /** Thresholds of `POST /api/tasks/recover-stale`'s sweep, and of the coordinator `runCoordinator` starts. */
  coordinator?: CoordinatorOptions;
  /** Also run a coordinator in this process, from when the server listens (any number may run: one leads at a time). Default false. */
  runCoordinator?: boolean;
  /** How often a waiting claim looks again when no notification came (default 1000 ms): scheduled and backed-off tasks come due silently. */
  longPollRecheckMs?: number;
  /** Structured request logs; default none. */
  logger?: Logger;
  /** Serve the web dashboard at `/` (default true; docs/dashboard.md). */
  dashboard?: boolean;
  /** Who may read /metrics (metrics.ts): `key` (default; a producer or admin key, also as `Authorization: Bearer`) or `public`. */
  metricsAccess?: MetricsAccess;
}

export { DEFAULT_BODY_LIMIT, DEFAULT_RATE_LIMIT_PER_MINUTE };

/** Every route of the API, per resource. */
export const ROUTES: readonly RouteDefinition[] = [...taskRoutes, ...taskGenerationRoutes, ...scheduleRoutes, ...taskLeaseRoutes, ...workerTransportRoutes, ...workerRoutes, ...reassignmentRoutes, ...taskTypeRoutes, ...whoamiRoutes, ...healthRoutes];

declare module "fastify" {
  interface FastifyInstance {
    /** What the server knows beyond the database (tests and /metrics read it), and its shutdown's first step. */
    taskpool: {
      waitingClaims(): number;
      /** Requests the server has begun and not yet answered (a client that hung up does not end its request). */
      requestsInFlight(): number;
      /**
       * Before close(), for a server behind a load balancer: it goes on serving, but /readyz answers
       * 503 so the balancer stops sending it requests, and each answer closes its connection so
       * clients reconnect to another server.
       */
      drain(): void;
    };
  }
}

/**
 * Reads and drops what is left of a body refused as too large, so the answer reaches a client that
 * sends its whole body before it reads (Python's urllib, many others): answered at once and closed,
 * the connection broke under its write, and it saw a broken pipe, not the 413. Bounded, as a web
 * server's lingering close is: a client still sending after that gets the answer and the close.
 */
function discardRest(body: FastifyRequest["raw"], maxBytes = 64 * 2 ** 20, maxMs = 10_000): Promise<void> {
  if (body.complete || body.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let dropped = 0;
    const done = () => {
      clearTimeout(timer);
      body.off("data", onData).off("end", done).off("error", done).off("close", done);
      resolve();
    };
    const onData = (chunk: Buffer) => {
      dropped += chunk.length;
      if (dropped > maxBytes) done();
    };
    const timer = setTimeout(done, maxMs);
    body.on("data", onData).on("end", done).on("error", done).on("close", done);
    body.resume();
  });
}

/** Each route's method and path as a pattern, a parameter matching one segment (`/api/tasks/:id/complete`). */
const ROUTE_PATHS = ROUTES.map((route) => ({
  method: route.method,
  path: new RegExp(`^${route.url.replace(/:[^/]+/g, "[^/]+")}$`),
  fixed: !route.url.includes(":"),
}));

/** The request's path, without its query string. */
const pathOf = (request: FastifyRequest) => request.url.split("?")[0];

/**
 * The methods a request's path is a route for, other than its own. A path a route names outright
 * takes that route's methods alone: `/api/tasks/claim` is POST, not also GET as an id "claim".
 */
function otherMethods(request: FastifyRequest): string[] {
  // A trailing slash names the same route (ignoreTrailingSlash).
  const path = pathOf(request).replace(/(.)\/$/, "$1");
  const matching = ROUTE_PATHS.filter((route) => route.path.test(path));
  const fixed = matching.filter((route) => route.fixed);
  const methods = new Set((fixed.length > 0 ? fixed : matching).map((route) => route.method));
  return [...methods].filter((method) => method !== request.method).sort();
}

/** 405 with the methods the path takes (`allowed`): a request with the wrong method is not a bad id nor a missing route. */
function wrongMethod(request: FastifyRequest, reply: FastifyReply, allowed: string[]) {
  return reply
    .code(405)
    .header("allow", allowed.join(", "))
    .send({ success: false, error: "method_not_allowed", message: `${request.method} ${pathOf(request)} is not a route: use ${allowed.join(" or ")}; /docs lists them` });
}

const PART_NAMES: Record<string, string> = { body: "request body", querystring: "query string", params: "path", headers: "headers" };

/**
 * Query strings and paths are text: "10" becomes 10 where the schema wants a number. Only text that
 * reads back as itself is converted: Value.Convert alone reads "2.9" as 2, "3e5" as 3 and "true" as
 * 1, so a mistyped id acted on another task. Other text stays text, which the check refuses, naming
 * the field.
 */
function fromText(schema: TSchema, data: unknown): unknown {
  // Convert changes what it is given in place: it gets a copy, so the text is still there to compare.
  const converted = Value.Convert(schema, Value.Clone(data));
  if (!isObject(data) || !isObject(converted)) return converted;
  const value = { ...converted };
  for (const [key, text] of Object.entries(data)) if (!readsBack(text, converted[key])) value[key] = text;
  return value;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * A query string sends a list by repeating its parameter (`status=pending&status=failed`). Other APIs
 * write one as `status=pending,failed` or `status[]=pending`: a refusal of a list field, or of its
 * name with `[]`, says how to send one here, and how many it takes.
 */
function withRepeatHint(schema: TSchema, error: ValidationError): ValidationError {
  const properties = (schema as { properties?: Record<string, TSchema> }).properties ?? {};
  const issues = error.issues.map((issue) => {
    const bracketed = issue.path.endsWith("[]");
    const name = bracketed ? issue.path.slice(0, -2) : issue.path;
    const field = Object.hasOwn(properties, name) ? (properties[name] as { anyOf?: TSchema[] }) : undefined;
    const list = (field?.anyOf ?? [field]).find((s) => (s as { type?: string } | undefined)?.type === "array") as { items: { anyOf?: { const?: unknown }[] }; maxItems?: number } | undefined;
    if (!list) return issue;
    const [a, b] = (list.items.anyOf ?? []).map((s) => s.const).filter((v) => typeof v === "string");
    const example = a !== undefined && b !== undefined ? `${name}=${a}&${name}=${b}` : `${name}=…&${name}=…`;
    const hint = `for several, repeat the parameter${list.maxItems === undefined ? "" : `, at most ${list.maxItems} times`}: ${example}`;
    if (bracketed && issue.message.startsWith("Unexpected property")) {
      return { path: issue.path, message: `${issue.message.replace(/; (did you mean|the fields are) .*$/, "")}; a list is sent as ${name} itself, without []: ${hint}` };
    }
    return bracketed ? issue : { path: issue.path, message: `${issue.message}; ${hint}` };
  });
  return new ValidationError(error.message, issues, error.unlisted);
}

function readsBack(text: unknown, value: unknown): boolean {
  if (Array.isArray(text)) return Array.isArray(value) && text.length === value.length && text.every((t, i) => readsBack(t, value[i]));
  return typeof text !== "string" || String(value) === text;
}

/**
 * JSON bodies, and nothing else (a text/plain body is refused with 415, not read as a string). An
 * empty body sent as JSON is no body: curl's usual `-H "content-type: application/json"` on a call that
 * needs none (`POST /api/tasks/7/cancel`) was refused. A refused body says why: Fastify's message was
 * the same for broken JSON and for a `__proto__` key (refused: it can poison objects). Bytes that are
 * not UTF-8 are refused, not decoded: read as text, each became U+FFFD in the params stored, and a
 * compressed body was answered with its bytes as garbage in the message.
 */
function installJsonParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser(["application/json", "text/plain"]);
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (request, body, done) => {
    const bytes = body as Buffer;
    if (!isUtf8(bytes)) {
      const encoding = request.headers["content-encoding"];
      const reason = encoding === undefined || encoding === "identity" ? "it is not UTF-8; send JSON encoded as UTF-8" : `it is sent with Content-Encoding: ${encoding}, which this server does not decode; send it uncompressed`;
      return done(new HttpError("bad_request", `Request body is not usable JSON: ${reason}`), undefined);
    }
    const text = bytes.toString("utf8");
    // Left unset, as with no body at all: null is what a body of JSON `null` parses to, and is refused (route.ts).
    if (text === "") return done(null, undefined);
    parse(request, text, (error, value) => {
      if (error === null) {
        const inexact = inexactInteger(text, value);
        return inexact === null ? done(null, value) : done(new HttpError("bad_request", `Request body refused: ${inexact}`), undefined);
      }
      let reason: string;
      try {
        JSON.parse(text);
        reason = 'it has a "__proto__" key, or a "constructor" key holding "prototype": refused, since they can poison objects; rename the key';
      } catch (syntax) {
        reason = `${(syntax as Error).message}; send JSON`;
      }
      done(new HttpError("bad_request", `Request body is not usable JSON: ${reason}`), undefined);
    });
  });
}

/**
 * A request Node's HTTP parser refused before Fastify saw it (headers or URL over Node's 16 KiB, a
 * bad Content-Length), answered in the envelope like every other refusal, as Fastify's default does
 * otherwise (same statuses, then the connection closed).
 */
function answerUnparsable(error: Error & { code?: string }, socket: Socket): void {
  // A reset connection is gone: nothing to answer.
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  const [status, code, message] =
    error.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? [408, "request_timeout", "The request was not received in time; send it again"]
      : error.code === "HPE_HEADER_OVERFLOW"
        ? [431, "headers_too_large", "Request headers (the URL included) are over 16 KiB; send less in them (long filters belong in a body)"]
        : [400, "bad_request", `Malformed HTTP request (${error.code ?? error.message}); send a well-formed HTTP/1.1 request`];
  const body = JSON.stringify({ success: false, error: code, message });
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy(error);
}

/** The longest `next_heartbeat_in` a server advertises unless told otherwise, in seconds. */
const MAX_DEFAULT_HEARTBEAT_SECONDS = 30;

/**
 * The heartbeat interval the server tells HTTP workers (`next_heartbeat_in`): it must let a worker
 * that follows it beat at least twice within stale_after, or the coordinator calls every such worker
 * stale (no more targeted work) between two beats, and past dead_after dead, its tasks taken back.
 * Half of stale_after by default; one set that does not fit is refused, saying what to change.
 */
function heartbeatInterval(options: ServerOptions): number {
  const { staleAfterMs, deadAfterMs } = resolveSweepTimes(options.coordinator ?? {});
  const longest = staleAfterMs / 2000;
  const seconds = options.heartbeatIntervalSeconds;
  if (seconds === undefined) return Math.min(MAX_DEFAULT_HEARTBEAT_SECONDS, longest);
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds <= 0) {
    throw new ValidationError(`Invalid server option heartbeatIntervalSeconds: ${JSON.stringify(seconds)} (must be a positive number of seconds)`, [
      { path: "heartbeatIntervalSeconds", message: "out of range" },
    ]);
  }
  if (seconds > longest) {
    throw new ValidationError(
      `Invalid server options: heartbeatIntervalSeconds (${seconds}) must let a worker beat twice within coordinator.staleAfterMs (${staleAfterMs}), ` +
        `or every HTTP worker following it turns stale between two beats (dead past deadAfterMs, ${deadAfterMs}, and its tasks taken back): ` +
        `set heartbeatIntervalSeconds to ${longest} or less, raise staleAfterMs to ${seconds * 2000} or more, or leave heartbeatIntervalSeconds out to have it follow staleAfterMs`,
      [{ path: "heartbeatIntervalSeconds", message: "longer than half of staleAfterMs" }],
    );
  }
  return seconds;
}

/** The router's limit on one path parameter: Node's limit on a request's headers and URL together (16 KiB). */
const MAX_PATH_PARAMETER = 16 * 1024;

/** What a request refused because the server is shutting down tells its client to wait: a restart, or the balancer's next pick, takes about that. */
const SHUTDOWN_RETRY_SECONDS = 1;

/** The app, ready to listen; closing it ends waiting claims, waits for the requests in flight, stops its coordinator, and leaves the pool open (the caller owns it). */
export async function buildServer(pool: Taskpool, options: ServerOptions = {}): Promise<FastifyInstance> {
  // Refused before anything is set up: a bad setting leaves nothing to close.
  const heartbeatIntervalSeconds = heartbeatInterval(options);
  const bodyLimit = options.bodyLimit ?? DEFAULT_BODY_LIMIT;
  const requestTimeout = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const perMinute = options.rateLimitPerMinute ?? DEFAULT_RATE_LIMIT_PER_MINUTE;
  const logger = options.logger ?? pino({ level: "silent" });
  const closeGraceMs = checkedMs("server option closeGraceMs", options.closeGraceMs ?? DEFAULT_CLOSE_GRACE_MS, 0, MAX_TIMER_MS);
  // While closing, requests still arriving on open connections are refused in the envelope (below),
  // not with Fastify's own 503 body.
  const app = Fastify({
    loggerInstance: logger,
    // Fastify logs two lines at info per request: six per task of an HTTP worker, and every probe and
    // scrape. One line per request, at debug (LOG_LEVEL=debug), is the access log; errors say themselves.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit,
    requestTimeout,
    // Node arms the timeout only when the server is made with it (Fastify sets it after), and looks for
    // requests past their time every 30 s by default: a slow client held on up to that much longer.
    http: { requestTimeout, connectionsCheckingInterval: requestTimeout > 0 ? Math.min(5000, Math.ceil(requestTimeout / 4)) : 30_000 },
    // `GET /api/tasks/` is the list, not a task whose id is "". The router's default limit on a path
    // parameter (100 characters) is under the 128 a worker id, task type or schedule name may have: a
    // worker with a longer id beat and claimed, then could not shut down. Past this limit, which no
    // valid parameter nears, the route's own check says which field is too long and its limit.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PATH_PARAMETER },
    trustProxy: options.trustProxy ?? false,
    // Fastify bounds each preClose hook by the plugin timeout (10 s by default): the close's wait for the
    // requests in flight, up to closeGraceMs, failed the close with "Plugin did not start in time" at 10 s.
    pluginTimeout: Math.max(10_000, closeGraceMs + 5000),
    return503OnClosing: false,
    // The router's own refusals (a path parameter over its length limit, a malformed URL) in the envelope too.
    frameworkErrors: (error, _request, reply) => {
      const { status, body } = errorReply(error, bodyLimit);
      void (reply as unknown as FastifyReply).code(status).send(body);
    },
    clientErrorHandler: answerUnparsable,
  }) as unknown as FastifyInstance;

  installJsonParser(app);
  if (logger.isLevelEnabled("debug")) {
    app.addHook("onResponse", async (request, reply) => {
      request.log.debug(`${request.method} ${pathOf(request)} ${reply.statusCode} ${reply.elapsedTime.toFixed(1)} ms`);
    });
  }

  // Requests are checked with the library's own TypeBox checks (core/validation.ts), on the wire
  // schemas: the same messages as the library's, unknown fields refused rather than dropped.
  app.setValidatorCompiler(({ schema, httpPart }) => {
    const what = PART_NAMES[httpPart ?? ""] ?? String(httpPart);
    return (data: unknown) => {
      try {
        // No body at all is an empty object: `POST /api/tasks/7/cancel` needs none.
        let value = httpPart === "body" && data === null ? {} : data;
        if (httpPart !== "body") value = fromText(schema as TSchema, value);
        return { value: validate(schema as TSchema, value, what) };
      } catch (error) {
        if (!(error instanceof ValidationError)) return { error: error as Error };
        const refused = httpPart === "querystring" ? withRepeatHint(schema as TSchema, error) : error;
        return { error: new RequestValidationError(refused, httpPart ?? "", what) };
      }
    };
  });
  // Handlers answer wire values already (route.ts); the response schemas document them.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  let unavailableLoggedAt = Number.NEGATIVE_INFINITY;
  app.setErrorHandler(async (error, request, reply) => {
    // `GET /api/tasks/claim` matched `GET /api/tasks/:id`, whose id "claim" is no number: the method is what is wrong.
    const allowed = error instanceof RequestValidationError && error.part === "params" ? otherMethods(request) : [];
    if (allowed.length > 0) return wrongMethod(request, reply, allowed);
    const { status, body } = errorReply(error, bodyLimit);
    if (status === 413) await discardRest(request.raw);
    const retryAfter = (body as { retry_after?: number }).retry_after;
    if (retryAfter !== undefined) void reply.header("retry-after", retryAfter);
    if (status === 503) {
      // Expected while the database is away, and answered as such: a warning every 10 s, not an error with its stack per request.
      const now = performance.now();
      const quiet = now - unavailableLoggedAt < 10_000;
      if (!quiet) unavailableLoggedAt = now;
      const { cause } = error as { cause?: unknown };
      const why = cause instanceof Error ? ` (${cause.message})` : "";
      // A drain (serve --shutdown-delay) and a close are planned: their 503s are said, not warned about.
      const level = quiet ? "debug" : context.lifecycle.draining || closing ? "info" : "warn";
      request.log[level](`${request.method} ${pathOf(request)} answered 503: ${(body as { message: string }).message}${why}`);
    } else if (status >= 500) request.log.error({ err: error }, `Request failed: ${(error as Error).message}`);
    return reply.code(status).send(body);
  });
  app.setNotFoundHandler((request, reply) => {
    const allowed = otherMethods(request);
    if (allowed.length > 0) return wrongMethod(request, reply, allowed);
    return reply.code(404).send({ success: false, error: "not_found", message: `No route ${request.method} ${pathOf(request)}; /docs lists them` });
  });

  // Counted from the first hook, before the key lookup reads the database, until the answer is
  // handed to Node: a request whose client hung up still runs, and the store must outlive it too.
  const inFlight = new Set<FastifyRequest>();
  let allSettled: (() => void) | null = null;
  const settle = (request: FastifyRequest) => {
    if (inFlight.delete(request) && inFlight.size === 0) allSettled?.();
  };
  let closing = false;
  app.addHook("onRequest", async (request, reply) => {
    // A request that arrives once the close has begun (on a connection still open) is refused with
    // nothing done: the store may close before it could finish. Clients send a 503 again, elsewhere.
    if (closing) {
      void reply.header("retry-after", SHUTDOWN_RETRY_SECONDS);
      throw new HttpError("shutting_down", "This server is shutting down; nothing was done: send the request again (to another server, or to this one once it is back)", { retryAfter: SHUTDOWN_RETRY_SECONDS });
    }
    inFlight.add(request);
  });
  app.addHook("onSend", async (request) => settle(request));
  app.addHook("onResponse", async (request) => settle(request));

  installAuth(app, pool, { enabled: options.auth !== "none", keyCacheMs: options.apiKeyCacheMs, failuresPerMinute: options.authFailuresPerMinute, loopbackOnly: options.loopbackOnly });

  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "taskpool",
        version: VERSION,
        description:
          "A task queue and worker coordinator. Every answer is an envelope: `{\"success\": true, …}` or " +
          "`{\"success\": false, \"error\": code, \"message\": …}`. Send the API key in the X-API-Key header. " +
          "Besides each operation's answers, a path sent with a method it does not take is answered 405 method_not_allowed " +
          "(the Allow header lists its methods), and a path no route has 404 not_found.",
      },
      components: { securitySchemes: { apiKey: { type: "apiKey", in: "header", name: "X-API-Key" } } },
    },
  });
  // Served from the package's own copy of Swagger UI: no CDN. Under the plugin's CSP (its inline scripts'
  // hashes), framed by no page, as the dashboard is: it shares their origin, and its key in localStorage.
  // Changed from the plugin's: nothing from other sites; inline styles, which Swagger UI sets as it
  // renders the (static) document, so no hash can list them; and no upgrade-insecure-requests, which on a
  // plain-HTTP server asked for its own assets over https.
  await app.register(swaggerUi, {
    routePrefix: "/docs",
    staticCSP: true,
    transformStaticCSP: (csp) =>
      csp
        .replace("frame-ancestors 'self'", "frame-ancestors 'none'")
        .replace(/style-src [^;]*/, "style-src 'self' 'unsafe-inline'")
        .replace("font-src 'self' https: data:", "font-src 'self' data:")
        // The validator badge's host: the UI is set to no validator (validatorUrl null), so nothing loads from it.
        .replace(" validator.swagger.io", "")
        .replace(/\s*upgrade-insecure-requests;?/, ""),
    uiHooks: {
      onRequest: (_request, reply, done) => {
        reply.header("x-frame-options", "DENY").header("x-content-type-options", "nosniff").header("referrer-policy", "no-referrer");
        done();
      },
    },
  });

  // A key's own limit holds even when the server sets none (rateLimitPerMinute: false, `--rate-limit 0`):
  // that only lifts the default of keys that set none. Requests without a key are never counted.
  const limitOf = (request: FastifyRequest) => request.apiKey?.rateLimitPerMinute ?? (request.apiKey && perMinute !== false ? perMinute : null);
  await app.register(rateLimit, {
    global: true,
    hook: "onRequest",
    timeWindow: 60_000,
    store: MonotonicRateLimitStore,
    allowList: (request) => limitOf(request) === null,
    // Never null here: allowList has let those through.
    max: (request) => limitOf(request) ?? Infinity,
    keyGenerator: (request) => `key:${request.apiKey?.id}`,
    errorResponseBuilder: (request, context) => {
      const seconds = Math.max(1, Math.ceil(context.ttl / 1000));
      return new HttpError("rate_limited", `Rate limit exceeded: this API key may make ${context.max} requests per minute; retry in ${seconds} s`, { retryAfter: seconds });
    },
  });

  const metrics = new ServerMetrics(pool, () => app.taskpool.waitingClaims());
  const claims = new ClaimBatcher(pool.protocol);
  const longPoll = new LongPoll(pool.protocol, (o) => claims.claim(o), options.longPollRecheckMs ?? 1000, (seconds, claimed) => metrics.observeClaim(seconds, claimed));
  const coordinator = pool.coordinator({
    logger,
    ...options.coordinator,
    onSweep: (result, durationMs) => {
      metrics.observeSweep(result, durationMs);
      options.coordinator?.onSweep?.(result, durationMs);
    },
  });
  const context: ServerContext = {
    pool,
    longPoll,
    coordinator,
    writes: new WriteBatcher(pool.protocol, { returnTasks: true }, {
      // claim_next: claimed beside the outcomes' write (see writeWithNextClaims), and timed like any other claim.
      release: (id, lease, releaseOptions) => pool.protocol.release(id, lease, releaseOptions),
      async claimEach(next) {
        const started = performance.now();
        const outcomes = await pool.protocol.claimEach(next);
        const seconds = (performance.now() - started) / 1000;
        for (const outcome of outcomes) if (outcome.ok) metrics.observeClaim(seconds, outcome.value.length);
        return outcomes;
      },
    }),
    beats: new BeatBatcher(pool.protocol),
    heartbeatIntervalSeconds,
    lifecycle: { draining: false },
  };
  for (const route of ROUTES) registerRoute(app, route, context);

  app.decorate("taskpool", { waitingClaims: () => longPoll.waiting, requestsInFlight: () => inFlight.size, drain: () => void (context.lifecycle.draining = true) });
  const publicRoute: RouteConfig = { access: "public" };
  app.get("/openapi.json", { schema: { hide: true }, config: publicRoute }, async () => app.swagger());
  if (options.dashboard !== false) await app.register(dashboard);
  metrics.install(app, options.metricsAccess ?? "key");

  // The close stops accepting connections first, then answers waiting claims at once (no task), so
  // closing does not wait out their wait_ms, and waits for the requests in flight, up to closeGraceMs.
  // Only then does close() resolve and the caller close the store: Fastify's own close waited for
  // the connections alone, so a request whose client had hung up (a worker stopping, a client's
  // timeout) went on running on a closed store and failed, 500 "Cannot use a pool after calling end".
  // A response finished meanwhile ends its connection: Node closes only the connections idle when
  // close() is called, and a kept-alive one would hold the close for keepAliveTimeout.
  // The coordinator stops as the close begins, beside the requests still in flight: stopped after them,
  // it went on sweeping while they finished, and with the database hanging each of its ticks and then
  // its resignation waited out a statement's timeout in turn (28 s of a 30 s kill timeout).
  let coordinatorStopped: Promise<void> | null = null;
  app.addHook("preClose", async () => {
    closing = true;
    // Fastify closes the server after these hooks; closed here, no connection is taken meanwhile.
    if (app.server.listening) app.server.close();
    coordinatorStopped = coordinator.stop();
    await longPoll.close();
    if (inFlight.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const settled = await Promise.race([
      new Promise<true>((resolve) => (allSettled = () => resolve(true))),
      new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), closeGraceMs))),
    ]);
    clearTimeout(timer);
    if (!settled) {
      logger.warn(`Closing with ${counted(inFlight.size, "request")} still in flight after ${closeGraceMs} ms; their connections are dropped, and what they still do fails`);
      app.server.closeAllConnections();
    }
  });
  app.addHook("onSend", async (_request, reply) => {
    if (closing || context.lifecycle.draining) reply.header("connection", "close");
  });
  // Only once the port is ours: a server that cannot listen (the port taken) exits, and must not have
  // taken the leadership, and swept, on its way out.
  if (options.runCoordinator) app.addHook("onListen", async () => coordinator.start());
  app.addHook("onClose", async () => {
    await longPoll.close();
    await (coordinatorStopped ?? coordinator.stop());
  });
  return app;
}
