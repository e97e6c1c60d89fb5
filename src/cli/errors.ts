import { statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { HttpApiError, seconds, ServerTimeoutError } from "../client/errors.js";
import { DatabaseNotFoundError, LIBRARY_VOCABULARY, TaskpoolError, type ValidationError, type Vocabulary } from "../core/errors.js";
import { redactUrl } from "../core/redact-url.js";
import { sqlitePathOf } from "../store/open-store.js";

/** An error the CLI prints as one line: what failed and how to fix it. */
export class CliError extends TaskpoolError {
  constructor(message: string) {
    super("cli_error", message);
  }
}

/**
 * How the CLI words a refusal: in the library's names, but a setting of the pool as the CLI sets it.
 * The size limits are connect()'s `limits`, which no flag sets: the CLI's pool has the defaults, and
 * `limits.paramsBytes` named nothing an operator could change.
 */
export const CLI_VOCABULARY: Vocabulary = {
  ...LIBRARY_VOCABULARY,
  setting: (name) => (name === "requireRegistered" ? "--require-registered" : "taskpool's default, which the CLI does not change"),
};

/**
 * A ValidationError of input a command built from its flags, with each field named as the flag that
 * set it: "Invalid task: --max-attempts: …", where the library says maxAttempts, a name the operator
 * never typed; "Invalid concurrencyKey: …" becomes "Invalid --concurrency-key: …".
 */
export function namedAsFlags(error: ValidationError, flags: Readonly<Record<string, string>>): CliError {
  let message = error.messageIn(CLI_VOCABULARY);
  for (const { path } of error.issues) {
    const flag = flags[path];
    // Looked behind, not matched: in "Invalid workerId: workerId: …" the first match took the colon the second needed.
    if (flag) message = message.replace(new RegExp(`(?<=^|^Invalid |: |; )${path.replaceAll(".", "\\.")}:`, "g"), `${flag}:`);
    // One value of a list a flag takes (fanOut.keys.1): the flag, and which value, counted from 1 as typed.
    const item = /^(.+?)\.(\d+)(?:\.|$)/.exec(path);
    const listFlag = item === null ? undefined : flags[item[1]];
    if (item !== null && listFlag) message = message.replace(new RegExp(`${item[1].replaceAll(".", "\\.")}\\.${item[2]}(?!\\d)`, "g"), `${listFlag} value ${Number(item[2]) + 1}`);
  }
  return new CliError(message);
}

/**
 * Turns a failure to open or migrate a database into a CliError naming the URL (password hidden) and
 * the likely fix. Errors taskpool raised on purpose already say that and pass through.
 */
export function explainConnectError(error: unknown, url: string): Error {
  if (error instanceof DatabaseNotFoundError) return notSetUp(error, url);
  if (error instanceof TaskpoolError) return error;
  const e = error as { code?: string; message?: string; errors?: { code?: string }[] };
  const code = e?.code ?? e?.errors?.[0]?.code;
  const where = redactUrl(url);
  const reason = e?.message ?? String(error);
  const path = sqlitePathOf(url);
  if (path !== null) {
    if (/directory does not exist/.test(reason)) return new CliError(`cannot open ${where}: the directory ${dirname(path)} does not exist; create it (mkdir -p ${dirname(path)}) or pass another --db`);
    // SQLite says only "unable to open database file" of a directory.
    if (isDirectory(path)) return new CliError(`cannot open ${where}: ${path} is a directory, not a database file; name a file in it, e.g. --db sqlite:${join(path, "taskpool.db")}`);
    return new CliError(`cannot open ${where}: ${reason}; check the path and its permissions`);
  }
  switch (code) {
    case "ECONNREFUSED":
      return new CliError(`cannot connect to ${where}: connection refused; is PostgreSQL running and listening there? Fix --db or TASKPOOL_DATABASE_URL`);
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return new CliError(`cannot connect to ${where}: the host name does not resolve; fix the host in --db or TASKPOOL_DATABASE_URL`);
    case "3D000":
      return new CliError(`cannot connect to ${where}: ${reason}; create it (createdb) or name an existing database in the URL`);
    case "28P01":
    case "28000":
      return new CliError(`cannot connect to ${where}: ${reason}; check the user and password in the URL`);
    case "42501":
      // Setting a schema up takes CREATE on the database; using one already migrated, rights on its tables.
      return /for database/.test(reason)
        ? new CliError(`cannot set up taskpool in ${where}: ${reason}; the user needs CREATE on the database (or run \`taskpool migrate\` once as its owner)`)
        : new CliError(`cannot use taskpool in ${where}: ${reason}; grant the user USAGE on the schema and SELECT, INSERT, UPDATE, DELETE on its tables (docs/upgrading.md)`);
    default:
      // What a port that is not PostgreSQL's does with its startup message: an HTTP server (taskpool
      // serve, say) hangs up on it, a Redis or a firewall leaves it unanswered.
      if (/Connection terminated unexpectedly|connection timeout/.test(reason)) {
        return new CliError(
          `cannot open ${where}: ${reason}; is PostgreSQL listening at ${hostPort(url)}? (A taskpool server is reached with --url http://host:port, not --db)`,
        );
      }
      return new CliError(`cannot open ${where}: ${reason}`);
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function hostPort(url: string): string {
  try {
    const { hostname, port } = new URL(url);
    return `${hostname}:${port || "5432"}`;
  } catch {
    return "that address";
  }
}

const CREATORS = "taskpool dev, serve, migrate, enqueue, keys create, types register or schedules add create one";

function notSetUp(error: DatabaseNotFoundError, url: string): CliError {
  const fix = sqlitePathOf(url) !== null ? "run this where the database is, or pass --db sqlite:/path/to/taskpool.db" : "fix --schema or TASKPOOL_SCHEMA, or --db";
  return new CliError(`${describeNotSetUp(error, url)}: ${fix}; ${CREATORS}`);
}

/** What is missing, for a message: `no database at ./taskpool.db (/abs/taskpool.db)`, `no taskpool schema "x" in postgres://… (…)`. */
export function describeNotSetUp(error: DatabaseNotFoundError, url: string): string {
  const path = sqlitePathOf(url);
  if (path !== null) return `no database at ${path} (${resolve(path)})`;
  const others = error.taskpoolSchemas.length > 0 ? `taskpool's schemas there: ${error.taskpoolSchemas.join(", ")}` : "taskpool has no schema there";
  return `no taskpool schema "${error.schema}" in ${redactUrl(url)} (${others})`;
}

/** Why the server could not listen, in one line that says what to do. */
export function listenError(error: NodeJS.ErrnoException, host: string, port: number): CliError {
  if (error.code === "EADDRINUSE") return new CliError(`cannot listen on ${host}:${port}: another process is already listening on port ${port}; stop it, or pick another port with --port (--port 0: any free one)`);
  // Node says "address not available" or "getaddrinfo ENOTFOUND", which name neither the flag nor the fix.
  const addresses = "--host takes an address of this machine: 127.0.0.1 for it alone, 0.0.0.0 for all of its interfaces";
  if (error.code === "EADDRNOTAVAIL") return new CliError(`cannot listen on ${host}:${port}: ${host} is not an address of this machine; ${addresses}`);
  if (error.code === "ENOTFOUND" || error.code === "EAI_AGAIN") return new CliError(`cannot listen on ${host}:${port}: the host name ${host} does not resolve; ${addresses}`);
  return new CliError(`cannot listen on ${host}:${port}: ${error.message}`);
}

/**
 * A server's refusal of a missing or unknown key, in the CLI's terms: the server's message speaks of
 * the X-API-Key header, which someone running the CLI with --url never sets.
 */
export function explainAuthRefusal(error: unknown, command?: string): unknown {
  // A command may make several calls that need different scopes (workers shutdown lists the workers,
  // then shuts one down): the key each refusal asks for was refused by the next call.
  if (error instanceof HttpApiError && error.code === "forbidden") {
    return new CliError(
      `the taskpool server refused a call ${command ? `taskpool ${command} makes ` : ""}for this key's scope (${error.message}); ` +
        "an admin key may make every call: `taskpool keys create --scope admin --db …` on its database makes one",
    );
  }
  if (!(error instanceof HttpApiError) || error.code !== "unauthorized") return error;
  return /^Missing API key/.test(error.message)
    ? new CliError("the taskpool server asks for an API key: pass --api-key K (or set TASKPOOL_API_KEY); `taskpool keys create --scope admin --db …` on its database makes one")
    : new CliError("the taskpool server refused the API key (not one of its keys, or revoked): check --api-key or TASKPOOL_API_KEY; `taskpool keys list --db …` on its database shows its keys");
}

/** A write a command sent, for the message when the server took it and never answered: what may have happened, and how to look. */
export interface SentWrite {
  /** "task 3 was cancelled" */
  what: string;
  /** "taskpool tasks show 3" */
  check: string;
  /**
   * For a write that takes an idempotency key of the user's: its option ("--idempotency-key") and the
   * key given, if one was. The same command repeated with the same key makes the change at most once.
   */
  keyed?: { flag: string; key: string | undefined };
}

/**
 * A server that took a call and gave no answer within --timeout, in one line: its URL, how long, and
 * whether anything may have been done. A read changed nothing; a write's outcome is unknown. Sent
 * with the user's idempotency key, the command is safe to repeat with it; otherwise it says to look
 * before repeating it, or to repeat it with the key the client made for the call (every enqueue over
 * HTTP carries one), and to pass a key of one's own next time.
 */
export function explainServerTimeout(error: unknown, write?: SentWrite): unknown {
  if (!(error instanceof ServerTimeoutError)) return error;
  const silent = `the taskpool server at ${error.origin} did not answer within ${seconds(error.waitedMs)} s`;
  if (!error.maybeApplied) return new CliError(`${silent} (a read: nothing was changed); is it overloaded or stuck? Check its logs, or wait longer with --timeout <seconds>`);
  // A command without its own words (types register, schedules pause…) is given its group's list by the CLI's entry point.
  const { what, check, keyed } = write ?? { what: "the change was made", check: "taskpool status" };
  const stuck = "the server's logs for why it is stuck (--timeout <seconds> waits longer)";
  const flag = keyed?.flag;
  if (flag !== undefined && keyed?.key !== undefined) {
    return new CliError(`${silent} to a change it was sent: whether ${what} is unknown; repeating the same command with the same ${flag} is safe (the change is made at most once); see ${stuck}`);
  }
  if (flag !== undefined) {
    const sentWith = error.idempotencyKey === undefined ? "" : `, or repeat it adding ${flag} ${error.idempotencyKey} (the key it was sent with: the change is made at most once)`;
    return new CliError(`${silent} to a change it was sent: whether ${what} is unknown; check with \`${check}\` before repeating it${sentWith}; pass ${flag} <key> next time to make repeating it safe, and see ${stuck}`);
  }
  return new CliError(`${silent} to a change it was sent: whether ${what} is unknown; check with \`${check}\` before repeating it, and ${stuck}`);
}
