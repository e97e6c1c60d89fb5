/**
 * Every error the HTTP API answers, in one place: the status of each TaskpoolError code, the
 * errors only the server raises (auth, rate limit, no task to claim), and Fastify's own (bad JSON,
 * body too large) turned into the same envelope: `{ "success": false, "error": code, "message": … }`.
 */
import { TaskpoolError, ValidationError, type Vocabulary } from "../core/errors.js";
import { Type } from "../core/typebox.js";
import { invalidMessage } from "../core/validation.js";
import { renameFields, toSnake, toWire, WIRE_LISTINGS, wirePath } from "../core/wire.js";

/** The status each error code answers with; an unlisted code is a bug (500). */
export const STATUS_BY_CODE: Readonly<Record<string, number>> = {
  validation_error: 400,
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  no_tasks: 404,
  lease_lost: 409,
  already_claimed: 409,
  concurrency_key_busy: 409,
  type_at_capacity: 409,
  invalid_transition: 409,
  unique_key_taken: 409,
  idempotency_key_reused: 422,
  request_timeout: 408,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  headers_too_large: 431,
  not_ready: 503,
  database_unavailable: 503,
  database_read_only: 503,
  pool_closed: 503,
  shutting_down: 503,
};

/** An error only the server raises, with extra envelope fields (`filters`, `retryAfter`), in camelCase. */
export class HttpError extends TaskpoolError {
  constructor(
    code: keyof typeof STATUS_BY_CODE,
    message: string,
    readonly details: { filters?: Record<string, unknown>; retryAfter?: number } = {},
  ) {
    super(code, message);
  }
}

/**
 * A request refused by its route's wire schema: its fields are named as the request names them
 * (snake_case), not as the library does. A field sent in camelCase is unknown on the wire, and is
 * named as sent, with the name the API gives it.
 */
export class RequestValidationError extends ValidationError {
  constructor(
    error: ValidationError,
    /** Which part of the request: body, querystring, params or headers. */
    readonly part: string,
    /** How the message names that part ("request body"). */
    what: string,
  ) {
    const issues = error.issues.map((issue) => {
      const field = issue.path.split(".").at(-1) ?? issue.path;
      const wireName = toSnake(field);
      // Said as the casing it is, rather than as a guess at what was meant; only when its snake_case name is
      // a field (the message offers or lists it): `runAt` is no field in any casing, and its guesses stand.
      const offered = issue.message.split(/[\s,?]+/).includes(wireName);
      if (!issue.message.startsWith("Unexpected property") || wireName === field || !offered) return issue;
      const sent = issue.message.replace(`; did you mean ${wireName}?`, "").replace(/; the fields are .*$/, "");
      return { ...issue, message: `${sent}; the API's fields are snake_case: ${wireName}` };
    });
    super(invalidMessage(what, issues, ": ", error.unlisted), issues, error.unlisted);
  }
}

/** The error envelope (camelCase; the wire has it in snake_case like everything else). */
export const ErrorEnvelope = Type.Object(
  {
    success: Type.Literal(false),
    error: Type.String({ description: `a stable code: ${Object.keys(STATUS_BY_CODE).join(", ")}, internal_error` }),
    message: Type.String({ description: "what was wrong and how to fix it" }),
    /** validation_error: every bad field, named as the request names it. */
    issues: Type.Optional(Type.Array(Type.Object({ path: Type.String(), message: Type.String() }))),
    /** no_tasks: the filters of the claim that found nothing (seed 002). */
    filters: Type.Optional(Type.Object({ taskTypes: Type.Union([Type.Array(Type.String()), Type.Null()]), maxAttemptsRemaining: Type.Union([Type.Integer(), Type.Null()]) })),
    /** rate_limited, database_unavailable and shutting_down: seconds to wait before calling again (also in the Retry-After header). */
    retryAfter: Type.Optional(Type.Integer()),
  },
  { description: "an error" },
);

interface FastifyLikeError {
  code?: string;
  /** Node's network errors: the call that failed (`connect`, `getaddrinfo`). */
  syscall?: string;
  statusCode?: number;
  message?: string;
}

/**
 * What a 503 `database_unavailable` tells clients to wait (Retry-After): a restart or failover takes
 * seconds, a retry after one finds out. The same for a SQLite file other processes' writes held locked
 * past the busy timeout: the request waited that long already, and the lock is free once they end.
 */
const DATABASE_RETRY_SECONDS = 1;

/**
 * How an HTTP caller knows what it can change or look at: the fields by the names it sent them with,
 * the pool's limits as the server's own (no request sets them), and the routes it can call.
 */
const WIRE_VOCABULARY: Vocabulary = {
  field: wirePath,
  setting: (name) => (name === "requireRegistered" ? "taskpool serve --require-registered" : "set on this server"),
  call: (method) => WIRE_CALLS[method] ?? method,
  listing: (what) => WIRE_LISTINGS[what],
};

/** The routes of the pool's methods that refusals point to. */
const WIRE_CALLS: Record<string, string> = { registerTaskType: "POST /api/task-types" };

/** The status and wire body of any error a request ended with. */
export function errorReply(error: unknown, bodyLimit?: number): { status: number; body: unknown } {
  if (error instanceof TaskpoolError && STATUS_BY_CODE[error.code] !== undefined) {
    const message = error.messageIn(WIRE_VOCABULARY);
    const body: Record<string, unknown> = { success: false, error: error.code, message };
    if (error instanceof RequestValidationError) body.issues = error.issues;
    else if (error instanceof ValidationError) {
      // The library names fields as it does (camelCase): the HTTP caller sent them in snake_case.
      body.issues = error.issuesIn(WIRE_VOCABULARY).map((i) => ({ path: wirePath(i.path), message: i.message }));
      // A message worded for either vocabulary says the wire's names itself. One given as text names a
      // batch item's field as the item has it ("item 1: …: maxAttempts: …"), not by its whole path.
      body.message = renameFields(message, error.issues.map((i) => i.path), wirePath);
    }
    // SQLite's file held locked past the busy timeout: the store's own error, with no wait of its own in it.
    if (error.code === "database_unavailable") body.retryAfter = DATABASE_RETRY_SECONDS;
    if (error instanceof HttpError) Object.assign(body, error.details);
    return { status: STATUS_BY_CODE[error.code], body: toWire(ErrorEnvelope, body) };
  }
  const e = (error ?? {}) as FastifyLikeError;
  const status = e.statusCode ?? 500;
  // Fastify's own refusals of a request (unparseable JSON, an empty body, a body over the limit…).
  if (status >= 400 && status < 500) {
    const code = e.code === "FST_ERR_CTP_BODY_TOO_LARGE" ? "payload_too_large" : status === 415 ? "unsupported_media_type" : status === 404 ? "not_found" : "bad_request";
    const message =
      code === "payload_too_large"
        ? `Request body is larger than the server's limit of ${bodyLimit ?? "its"} bytes; send less (e.g. split a batch) or raise the limit (taskpool serve --body-limit)`
        : code === "unsupported_media_type"
          ? "Request body must be JSON, sent with content-type: application/json"
          : (e.message ?? "Bad request");
    return { status: STATUS_BY_CODE[code], body: { success: false, error: code, message } };
  }
  if (e.code === CANCELLED_STATEMENT) {
    const message = "The database cancelled the statement (past its time limit, 10 s unless the server was started with --statement-timeout, or cancelled by an operator); nothing was written: send the request again shortly, or ask for less (a narrower search)";
    return { status: STATUS_BY_CODE.database_unavailable, body: { success: false, error: "database_unavailable", message, retry_after: DATABASE_RETRY_SECONDS } };
  }
  if (unreachableDatabase(e)) {
    const message = `The database cannot be reached (${e.message ?? e.code}); nothing was written: send the request again shortly`;
    return { status: STATUS_BY_CODE.database_unavailable, body: { success: false, error: "database_unavailable", message, retry_after: DATABASE_RETRY_SECONDS } };
  }
  return { status: 500, body: { success: false, error: "internal_error", message: "Internal server error; the server log has the details" } };
}

/**
 * PostgreSQL SQLSTATEs a server answers a new connection with before running anything: starting up,
 * shutting down or in recovery (57P03, a restart or a failover), or out of connection slots (53300).
 */
const REFUSED_CONNECTION_STATES = new Set(["57P03", "53300"]);

/** query_canceled: the statement timeout (the store sets one on every connection) or pg_cancel_backend. Its transaction is rolled back. */
const CANCELLED_STATEMENT = "57014";

/** pg's words for no connection within the store's time limit (pg-pool's, then the client's): nothing was sent. */
const CONNECT_TIMEOUT = /^(timeout exceeded when trying to connect|Connection terminated due to connection timeout)$/;

/**
 * Whether a request failed because no connection to the database could be opened (it is down,
 * restarting, failing over, its name does not resolve, or it did not answer in time): then the
 * request certainly wrote nothing, and 503 tells clients so (both taskpool clients send any call
 * again after a 503, a claim or an enqueue included). A connection lost during a statement is not one of these: the statement may
 * have committed, so that stays a 500, which clients repeat only for calls safe to repeat.
 */
function unreachableDatabase(error: FastifyLikeError): boolean {
  return error.syscall === "connect" || error.syscall === "getaddrinfo" || REFUSED_CONNECTION_STATES.has(error.code ?? "") || CONNECT_TIMEOUT.test(error.message ?? "");
}
