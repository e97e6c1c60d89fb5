import { redactUrl } from "./redact-url.js";

/**
 * Every error taskpool raises on purpose. `code` is stable (the HTTP layer maps it to a status and
 * the `error` field); the message says what was wrong and how to fix it.
 */
export class TaskpoolError extends Error {
  /** What `message` says, as given: text, or a wording for any vocabulary (see messageIn). */
  protected wording: string | Wording;

  constructor(
    readonly code: string,
    /** Text, or a wording when it names what the caller can change or look at: the HTTP layer words it in the wire's terms. */
    message: string | Wording,
  ) {
    super(say(message, LIBRARY_VOCABULARY));
    this.name = new.target.name;
    this.wording = message;
  }

  /** The message in `vocabulary`'s terms (`message` is the library's). */
  messageIn(vocabulary: Vocabulary): string {
    return typeof this.wording === "string" ? this.message : this.wording(vocabulary);
  }
}

/**
 * The store could not be reached, or failed before it answered (over HTTP: the server out of reach
 * after the client's retries, or a 5xx). Not a refusal: the same call may succeed later, so the worker
 * runtime retries it as it retries a database that does not answer.
 */
export class UnavailableError extends TaskpoolError {}

/**
 * The taskpool server's rate limit refused this API key's call (429): not a refusal of the call
 * itself, which may be made again once `retryAfter` seconds have passed. A worker waits that long
 * before its next claim, and keeps its outcomes and checkpoints to send again, as through an outage.
 */
export class RateLimitedError extends UnavailableError {
  constructor(
    message: string,
    /** Seconds until the key may call again. */
    readonly retryAfter: number,
  ) {
    super("rate_limited", message);
  }
}

/** How long to wait before a call that failed with `error` is worth making again: a rate limit's Retry-After, else 0. */
export const retryAfterMs = (error: unknown): number => (error instanceof RateLimitedError ? error.retryAfter * 1000 : 0);

/** Whether `error` is taskpool refusing the call (final: sending it again changes nothing), not a store out of reach. */
export const isRefusal = (error: unknown): error is TaskpoolError => error instanceof TaskpoolError && !(error instanceof UnavailableError);

/** A call on a pool after its close(): nothing is sent to the database (or server), whose connection is gone. */
export class PoolClosedError extends TaskpoolError {
  constructor(what: string) {
    super("pool_closed", `This pool was closed (close() was called), so ${what} cannot run on it; connect() again for a new pool`);
  }
}

/** One field of bad input: where it is and what is wrong with it. */
export interface FieldIssue {
  path: string;
  message: string;
}

/** What a not-found refusal points to, where the caller can see what does exist. */
export type Listing = "workers" | "schedules";

/**
 * How a message names what the caller can change or look at. The library's callers know fields by
 * the library's names (`fanOut.keys`) and limits as connect() options; an HTTP caller sent the
 * wire's (`fan_out.keys`), cannot set the server's limits, and may have no CLI to run.
 */
export interface Vocabulary {
  /** A field of the call, given by its library path (`fanOut.keys.1`). */
  field(path: string): string;
  /** A setting of the pool the call ran on, given as the library names it (`limits.paramsBytes`). */
  setting(path: string): string;
  /** A call the caller can make, given as the pool's method (`registerTaskType`). */
  call(method: string): string;
  /** Where the caller sees what exists (the workers, the schedules). */
  listing(what: Listing): string;
}

/** Text naming fields or settings, written once for each vocabulary: `(v) => \`Invalid ${v.field("fanOut.keys")}: …\``. */
export type Wording = (vocabulary: Vocabulary) => string;

/**
 * Where the library's messages point for a listing: the CLI's commands. The CLI says the library's
 * messages with these listings (its vocabulary changes only settings), and it shows any pool, one
 * behind a server included.
 */
const CLI_LISTINGS: Record<Listing, string> = { workers: "taskpool workers", schedules: "taskpool schedules list" };

/** The library's own names: what `message` and `issues` say. */
export const LIBRARY_VOCABULARY: Vocabulary = { field: (path) => path, setting: (path) => path, call: (method) => `pool.${method}`, listing: (what) => CLI_LISTINGS[what] };

/** An issue whose message names fields or settings. */
export interface WordedIssue {
  path: string;
  message: string | Wording;
}

const say = (text: string | Wording, vocabulary: Vocabulary) => (typeof text === "string" ? text : text(vocabulary));

/** Input that cannot be accepted; nothing was written. */
export class ValidationError extends TaskpoolError {
  readonly issues: FieldIssue[];
  /** Each issue's wording, by the issue (its path may be moved under a list: see nestUnder). */
  #issueWordings = new WeakMap<FieldIssue, Wording>();

  constructor(
    /** Text, or a wording when it names fields: the HTTP layer words it in the wire's names. */
    message: string | Wording,
    issues: (FieldIssue | WordedIssue)[] = [],
    /** More fields were refused than `issues` lists (see MAX_ISSUES in validation.ts). */
    readonly unlisted = false,
  ) {
    super("validation_error", message);
    this.issues = issues.map((issue) => {
      const plain = { path: issue.path, message: say(issue.message, LIBRARY_VOCABULARY) };
      if (typeof issue.message === "function") this.#issueWordings.set(plain, issue.message);
      return plain;
    });
  }

  /** The issues with their messages in `vocabulary`'s names; their paths stay the library's. */
  issuesIn(vocabulary: Vocabulary): FieldIssue[] {
    return this.issues.map((issue) => {
      const wording = this.#issueWordings.get(issue);
      return wording ? { path: issue.path, message: wording(vocabulary) } : issue;
    });
  }

  /** Says `prefix` before the message (which item of a batch, which key of a fan-out). */
  prefixMessage(prefix: string | Wording): void {
    const rest = this.wording;
    this.wording = typeof prefix === "string" && typeof rest === "string" ? prefix + rest : (v) => say(prefix, v) + say(rest, v);
    this.message = say(prefix, LIBRARY_VOCABULARY) + this.message;
  }

  /**
   * The same refusal with its fields renamed (`fanOut.keys.1` → `keys.1`, library paths both): for a
   * call made from another's input, refused in the names that input has. A message worded for any
   * vocabulary keeps being so; one given as text gets each issue's path renamed where it names it.
   */
  renamed(rename: (path: string) => string): ValidationError {
    const renaming = (v: Vocabulary): Vocabulary => ({ ...v, field: (path) => v.field(rename(path)) });
    const wording = this.wording;
    const paths = this.issues.map((issue) => issue.path).sort((a, b) => b.length - a.length);
    const message: string | Wording =
      typeof wording === "string" ? paths.reduce((text, path) => text.replaceAll(path, rename(path)), wording) : (v) => wording(renaming(v));
    const issues = this.issues.map((issue, index) => ({ path: rename(issue.path), message: (v: Vocabulary) => this.issuesIn(renaming(v))[index].message }));
    return new ValidationError(message, issues, this.unlisted);
  }

  /** Puts each issue's path under `prefix`: the field it names is inside it. */
  nestUnder(prefix: string): void {
    const nested = this.issues.map((issue) => {
      const moved = { ...issue, path: `${prefix}.${issue.path}` };
      const wording = this.#issueWordings.get(issue);
      if (wording) this.#issueWordings.set(moved, wording);
      return moved;
    });
    this.issues.splice(0, this.issues.length, ...nested);
  }
}

export class TaskNotFoundError extends TaskpoolError {
  constructor(readonly taskId: number) {
    super("not_found", `Task ${taskId} does not exist`);
  }
}

/** The caller's lease was taken back (and maybe given to another worker); its write was refused. */
export class LeaseLostError extends TaskpoolError {
  constructor(readonly taskId: number) {
    super(
      "lease_lost",
      `Task ${taskId} is no longer leased to this worker with this token; stop working on it, its result will not be accepted`,
    );
  }
}

/**
 * Claim by id of a task a worker holds: another, or the claimant itself (a retried claim whose answer
 * was lost, say), whose lease token is the one its first claim returned. The message starts with
 * "Task already claimed by", SPEC's and seed 002's words, which HTTP clients match.
 */
export class AlreadyClaimedError extends TaskpoolError {
  constructor(
    readonly taskId: number,
    readonly holder: string | null,
    claimant?: string,
  ) {
    super(
      "already_claimed",
      holder !== null && holder === claimant
        ? `Task already claimed by this worker (task ${taskId}, worker ${holder}): it holds the lease already, with the token its first claim returned`
        : `Task already claimed by another worker (task ${taskId})`,
    );
  }
}

/** Claim by id of a task whose concurrency key is held by another claimed or running task. */
export class ConcurrencyKeyBusyError extends TaskpoolError {
  constructor(
    readonly taskId: number,
    readonly concurrencyKey: string,
  ) {
    super("concurrency_key_busy", `Task ${taskId} cannot be claimed: another task with concurrency key "${concurrencyKey}" is claimed or running`);
  }
}

/** Claim by id of a task whose type already has its registered max_running tasks claimed or running. */
export class TaskTypeAtCapacityError extends TaskpoolError {
  constructor(
    readonly taskId: number,
    readonly taskType: string,
  ) {
    super("type_at_capacity", `Task ${taskId} cannot be claimed: task type "${taskType}" already has its max_running tasks claimed or running`);
  }
}

/** A transition the state machine does not allow (e.g. completing a pending task). */
export class InvalidTransitionError extends TaskpoolError {
  constructor(
    readonly taskId: number | null,
    readonly from: string,
    readonly action: string,
  ) {
    super("invalid_transition", `Cannot ${action} task${taskId === null ? "" : ` ${taskId}`}: it is ${from}${OPERATOR_ACTIONS[action] ?? ""}`);
  }
}

/** What an operator's refused action could have been applied to (see TRANSITIONS), said with the refusal. */
const OPERATOR_ACTIONS: Readonly<Record<string, string>> = {
  retry: " (only failed tasks can be retried)",
  cancel: " (only pending, claimed or running tasks can be cancelled)",
};

/**
 * A database taskpool never set up, opened with `create: false`: a PostgreSQL schema holding no
 * taskpool tables (a mistyped schema name, say) or a SQLite file that is not there. Nothing was
 * created; opened with the default, it would have been, empty.
 */
export class DatabaseNotFoundError extends TaskpoolError {
  constructor(
    /** What was looked for: "PostgreSQL schema tasks", "SQLite file ./taskpool.db". */
    readonly database: string,
    /** The PostgreSQL schema looked for (null for SQLite). */
    readonly schema: string | null = null,
    /** The schemas of that PostgreSQL database that taskpool did set up (none for SQLite). */
    readonly taskpoolSchemas: readonly string[] = [],
  ) {
    const elsewhere = taskpoolSchemas.length > 0 ? `; taskpool's schemas in that database: ${taskpoolSchemas.join(", ")}` : "";
    super("database_not_found", `No taskpool database: the ${database} does not exist or taskpool never set it up${elsewhere}`);
  }
}

/** A connection string no store understands. */
/**
 * A SQLite file this process may read but not write (the file, its -wal or -shm, or its directory):
 * nothing was written. No outage that ends by itself: a worker refused it stops at its start, rather
 * than retry for good saying it "cannot reach the database".
 */
export class DatabaseReadOnlyError extends TaskpoolError {
  constructor(path: string) {
    super(
      "database_read_only",
      `The SQLite file ${path} cannot be written by this process (it, its -wal or -shm file, or its directory is read-only to it); nothing was written: ` +
        "give this process's user write access to all three and the directory (chmod, chown), or run it as a user who has it",
    );
  }
}

export class UnsupportedUrlError extends TaskpoolError {
  constructor(url: string) {
    super(
      "unsupported_url",
      `Unsupported database URL "${redactUrl(url)}": use sqlite:./path.db, sqlite::memory:, postgres://user@host:port/db, or a taskpool server's http://host:port`,
    );
  }
}

/**
 * A database migrated by a newer taskpool than this one: its schema has migrations this build does
 * not know, and this build's statements may no longer fit it (a rollback, or an old process started
 * after the upgrade). Raised once, when the store is opened; nothing was written.
 */
export class SchemaTooNewError extends TaskpoolError {
  constructor(
    /** What was opened: "PostgreSQL schema taskpool", "SQLite file ./taskpool.db". */
    readonly database: string,
    /** The newest migration the database has. */
    readonly schemaVersion: number,
    /** The newest migration this build has. */
    readonly knownVersion: number,
  ) {
    super(
      "schema_too_new",
      `The ${database} was migrated by a newer taskpool (schema ${schemaVersion}, this build knows ${knownVersion}): ` +
        `upgrade taskpool to the version that migrated it, or restore a backup taken before that migration; this build will not use it`,
    );
  }
}

/** Retrying a dead-letter task whose unique key a newer pending task now holds. */
export class UniqueKeyTakenError extends TaskpoolError {
  constructor(readonly taskId: number) {
    super("unique_key_taken", `Cannot retry task ${taskId}: a pending task with the same unique key exists; cancel it or let it run first`);
  }
}

/** Revoking (or otherwise naming) an API key id that does not exist. */
export class ApiKeyNotFoundError extends TaskpoolError {
  constructor(readonly keyId: number) {
    super("not_found", `API key ${keyId} does not exist (taskpool keys list shows the ids)`);
  }
}

/** Shutting down a worker the registry does not know: a mistyped id, one that never beat, or one retention forgot. */
export class WorkerNotFoundError extends TaskpoolError {
  constructor(readonly workerId: string) {
    super("not_found", (v) => `Worker "${workerId}" is not in the registry: it never sent a heartbeat, or retention removed it (${v.listing("workers")} lists them)`);
  }
}

/** Naming a schedule that does not exist. */
export class ScheduleNotFoundError extends TaskpoolError {
  constructor(readonly scheduleName: string) {
    super("not_found", (v) => `Schedule "${scheduleName}" does not exist (${v.listing("schedules")} shows them)`);
  }
}

/**
 * An idempotency key sent again with a different request (other tasks, or another number of them):
 * the key names the first request, so this one was neither applied nor answered with its tasks.
 */
export class IdempotencyKeyReusedError extends TaskpoolError {
  constructor(readonly idempotencyKey: string) {
    super(
      "idempotency_key_reused",
      `Idempotency key "${idempotencyKey}" was already used for a different enqueue request; a key may only be sent again with the same request (a retry): use a new key for new tasks`,
    );
  }
}
