/**
 * A refusal from the server becomes the error the same call throws on a store, so code written
 * against the library (the worker runtime aborting a handler on LeaseLostError, a caller catching
 * ValidationError) behaves the same over HTTP. The server's message is kept as it is, but for the
 * names of the fields a validation error's issues name (the library's, as a store's message has
 * them) and a not-found of what the call named, which the client says as a store does.
 */
import {
  AlreadyClaimedError,
  ConcurrencyKeyBusyError,
  IdempotencyKeyReusedError,
  InvalidTransitionError,
  LeaseLostError,
  RateLimitedError,
  ScheduleNotFoundError,
  TaskNotFoundError,
  TaskpoolError,
  TaskTypeAtCapacityError,
  UnavailableError,
  UniqueKeyTakenError,
  ValidationError,
  WorkerNotFoundError,
} from "../core/errors.js";
import { libraryListings, libraryPath, renameFields } from "../core/wire.js";

/** A refusal only HTTP has (no or a bad key, a scope, a reply that is not the API's). */
export class HttpApiError extends TaskpoolError {
  constructor(
    code: string,
    message: string,
    readonly status: number,
  ) {
    super(code, message);
  }
}

/**
 * The server could not be reached, or stopped answering, after the retries the call allowed.
 * `maybeApplied`: the connection was lost after the request was sent, so the server may have acted
 * on it (a call not safe to repeat is then not sent again, and the message says so).
 */
export class ServerUnreachableError extends UnavailableError {
  constructor(
    origin: string,
    reason: string,
    /**
     * `unsent`: the request never reached the server. `not-resent`: lost after it was sent, and not
     * sent again (not safe to). `resent`: lost after it was sent, and sent again until the retries ran
     * out, every answer lost: it may have been applied (a create, once, by its idempotency key).
     */
    fate: "unsent" | "not-resent" | "resent" = "unsent",
    /** A create's Idempotency-Key: the same call made again with it is applied at most once. */
    readonly idempotencyKey?: string,
    /** A read (a GET): sent or not, it changed nothing. */
    read = false,
  ) {
    super("server_unreachable", unreachableMessage(origin, reason, fate, idempotencyKey, read));
  }
}

/**
 * The server took the connection but gave no answer, and the call's time (ConnectOptions.callTimeoutMs)
 * ran out: `waitedMs`, from its first attempt (at most that time). `maybeApplied`: a change was sent, so it may have been
 * applied; a read (a GET) changes nothing.
 */
export class ServerTimeoutError extends ServerUnreachableError {
  constructor(
    readonly origin: string,
    readonly waitedMs: number,
    readonly maybeApplied: boolean,
    idempotencyKey?: string,
  ) {
    super(origin, `no answer within ${seconds(waitedMs)} s`, "resent", idempotencyKey);
    const silent = `The taskpool server at ${origin} gave no answer within ${seconds(waitedMs)} s`;
    this.message = maybeApplied ? `${silent} to a call it was sent: the call may have been applied${againWith(idempotencyKey)}` : `${silent}; is it overloaded or stuck?`;
  }
}

/** A wait in seconds as a person reads it: 1.2, 30. */
export const seconds = (ms: number): number => Number((ms / 1000).toFixed(ms < 10_000 ? 1 : 0));

function unreachableMessage(origin: string, reason: string, fate: "unsent" | "not-resent" | "resent", idempotencyKey: string | undefined, read: boolean): string {
  if (fate === "unsent") return `Cannot reach the taskpool server at ${origin} (${reason}); is \`taskpool serve\` running there, and is the URL right?`;
  // Every answer to a read lost (a port that hangs up on HTTP, PostgreSQL's say): it changed nothing.
  if (read) return `The taskpool server at ${origin} gave no answer (${reason}) to a read, on every try (nothing was changed); is \`taskpool serve\` running there, and is the URL right?`;
  if (fate === "not-resent") return `Lost the connection to the taskpool server at ${origin} before it answered (${reason}): the call may have been applied, so it was not sent again; check before repeating it`;
  return `The taskpool server at ${origin} gave no answer (${reason}) to a call it was sent, on every try: the call may have been applied${againWith(idempotencyKey)}`;
}

const againWith = (idempotencyKey: string | undefined): string =>
  idempotencyKey === undefined ? "" : `; make it again with idempotencyKey "${idempotencyKey}" to have it applied at most once`;

/** A call the HTTP transport does not make: it belongs next to the database. */
export class NotOverHttpError extends TaskpoolError {
  constructor(what: string, instead: string) {
    super("not_over_http", `${what} is not available over HTTP: ${instead}`);
  }
}

/** Key management over HTTP: the transport's refusal, and the CLI's for `taskpool keys --url`. */
export const keysNotOverHttp = () => new NotOverHttpError("Managing API keys", "use taskpool keys --db … on the server's database");

/** Recounting over HTTP: the transport's refusal, and the CLI's for `taskpool recount --url`. */
export const recountNotOverHttp = () => new NotOverHttpError("Recounting the completed tasks", "use taskpool recount --db … on the server's database");

/** A coordinator over HTTP: the pool's refusal, and the CLI's for `taskpool coordinator --url`. */
export const coordinatorNotOverHttp = () =>
  new NotOverHttpError("A coordinator", "run it where the database is (taskpool serve runs one, or taskpool coordinator --db …)");

type Envelope = { error?: unknown; message?: unknown; issues?: unknown; retry_after?: unknown };

const withMessage = <E extends Error>(error: E, message: string): E => Object.assign(error, { message });

/** What a call was about: a task, a schedule or a worker. */
export type Subject = { taskId: number } | { scheduleName: string } | { workerId: string } | { idempotencyKey: string };

/** The library error for an error envelope; `subject` is what the call was about. */
export function errorFromReply(status: number, body: Record<string, unknown>, subject?: Subject): TaskpoolError {
  const { error, message, issues, retry_after } = body as Envelope;
  const code = typeof error === "string" ? error : "bad_reply";
  const text = typeof message === "string" ? message : `the server answered ${status} without an error envelope`;
  const taskId = subject && "taskId" in subject ? subject.taskId : undefined;
  const id = taskId ?? 0;
  // The server failed rather than refused (its database out of reach, a bug): the call may succeed later.
  if (status >= 500) return new UnavailableError(code, text);
  switch (code) {
    case "validation_error": {
      // The server names fields as the request did (snake_case): back to the library's names, in the
      // message too, which the CLI then says in its flags' names as it does a database's refusal; and
      // the listings it points to are the library's (the CLI's commands), as a store's refusal says.
      const wire = Array.isArray(issues) ? (issues as { path: string; message: string }[]) : [];
      const list = wire.map((i) => ({ path: libraryPath(i.path), message: i.message }));
      return new ValidationError(libraryListings(renameFields(text, wire.map((i) => i.path), libraryPath)), list);
    }
    case "lease_lost":
      return withMessage(new LeaseLostError(id), text);
    case "not_found":
      // Said as a store says it, pointing where the library's callers look (the server's points to its
      // routes): it tells nothing the name does not.
      if (subject && "scheduleName" in subject) return new ScheduleNotFoundError(subject.scheduleName);
      if (subject && "workerId" in subject) return new WorkerNotFoundError(subject.workerId);
      return taskId === undefined ? new HttpApiError(code, text, status) : withMessage(new TaskNotFoundError(id), text);
    case "already_claimed":
      return withMessage(new AlreadyClaimedError(id, null), text);
    case "concurrency_key_busy":
      return withMessage(new ConcurrencyKeyBusyError(id, ""), text);
    case "type_at_capacity":
      return withMessage(new TaskTypeAtCapacityError(id, ""), text);
    case "invalid_transition":
      return withMessage(new InvalidTransitionError(taskId ?? null, "", ""), text);
    case "unique_key_taken":
      return withMessage(new UniqueKeyTakenError(id), text);
    case "rate_limited":
      return new RateLimitedError(text, typeof retry_after === "number" && retry_after > 0 ? retry_after : 1);
    case "idempotency_key_reused":
      return withMessage(new IdempotencyKeyReusedError(subject && "idempotencyKey" in subject ? subject.idempotencyKey : ""), text);
    default:
      return new HttpApiError(code, text, status);
  }
}
