import { Command, Option } from "commander";
import type { ConnectOptions, Taskpool } from "../api/taskpool.js";
import { DatabaseNotFoundError } from "../core/errors.js";
import { isServerUrl, sqlitePathOf } from "../store/open-store.js";
import { redactUrl } from "../core/redact-url.js";
import { CliError, describeNotSetUp, explainConnectError } from "./errors.js";
import { integerFrom } from "./parse.js";

/** The --db option every command shares: a flag, else $TASKPOOL_DATABASE_URL, else the embedded file. */
export const dbOption = () =>
  new Option("--db <url>", "database: sqlite:./file.db, sqlite::memory: or postgres://…")
    .env("TASKPOOL_DATABASE_URL")
    .default("sqlite:./taskpool.db");

/** A taskpool server instead of a database: the same commands over its HTTP API. */
export const urlOption = () => new Option("--url <url>", "a taskpool server (http://host:port) instead of --db; with --api-key").env("TASKPOOL_URL");
export const apiKeyOption = () => new Option("--api-key <key>", "the server's API key (taskpool keys create)").env("TASKPOOL_API_KEY");

/** How long a one-shot command waits for a server by default: an operator wants an answer, or to hear it is stuck, within seconds. */
const SERVER_TIMEOUT_SECONDS = 30;
/** --timeout, for the one-shot commands that take --url (not `worker`, which rides out an outage). */
export const timeoutOption = () =>
  new Option("--timeout <seconds>", `with --url: how long each call may wait for the server, retries included (default ${SERVER_TIMEOUT_SECONDS})`).argParser(integerFrom(1, 86_400));

export const schemaOption = () => new Option("--schema <name>", "PostgreSQL schema (default taskpool)").env("TASKPOOL_SCHEMA");

/**
 * The CLI's commands: commander's, with the options of every one-shot command that reads or writes a
 * pool in one call. `.command()` makes one of these too (createCommand), so subcommands have it.
 */
export class TaskpoolCommand extends Command {
  override createCommand(name?: string): TaskpoolCommand {
    return new TaskpoolCommand(name);
  }

  /** Where the pool is (--db, or a server: --url with --api-key and --timeout), and its PostgreSQL --schema. */
  poolOptions(): this {
    return this.addOption(dbOption()).addOption(urlOption()).addOption(apiKeyOption()).addOption(timeoutOption()).addOption(schemaOption());
  }
}

/**
 * A --schema typed for a database without schemas, or for a server, is refused rather than ignored: the
 * command would act on the one pool of that file, or the server's, not the one named. TASKPOOL_SCHEMA
 * from the environment is for the PostgreSQL URLs of that environment, and passes.
 */
export function refuseMisplacedSchema(command: Command): void {
  if (command.getOptionValueSource("schema") !== "cli" || usesSchema(command)) return;
  if (isServerUrl(targetOf(command))) throw new CliError("--schema is the server's setting (taskpool serve --schema …): leave it out when going through a server");
  throw new CliError(`--schema names a PostgreSQL schema, and a SQLite database has none: leave it out, or keep another pool in another file (--db sqlite:./other.db)`);
}

/**
 * Which of --url and --db a command that takes both goes to, as the user meant it: a --db typed on the
 * command line wins over an exported TASKPOOL_URL (a flag wins over a variable, as it does over
 * TASKPOOL_DATABASE_URL); the URL went on, and `tasks cancel 5 --db …` cancelled task 5 of the server's
 * pool. Both typed are refused, as naming two pools.
 */
export function settleTarget(command: Command): void {
  const url = command.options.find((o) => o.long === "--url");
  if (url === undefined || url.hidden || command.getOptionValueSource("db") !== "cli") return;
  const source = command.getOptionValueSource("url");
  if (source === "cli") throw new CliError("--url and --db both name a pool: give one (--url http://host:port goes through a taskpool server; --db opens a database)");
  if (source === "env") command.setOptionValueWithSource("url", undefined, "default");
}

/** What the command's --url or --db names. */
const targetOf = (command: Command): string => {
  const { db, url } = command.opts<{ db?: string; url?: string }>();
  return url ?? db ?? "";
};

/** Whether the command works on a database that has schemas: neither a SQLite file nor a server. */
export const usesSchema = (command: Command): boolean => {
  const target = targetOf(command);
  return !isServerUrl(target) && !target.startsWith("sqlite:");
};

/**
 * --require-registered, a setting of the pool that enqueues (enqueue on a database; serve for its
 * clients). Its variable is read by requiresRegistered, not by commander's .env(), which turns a flag
 * on whatever the variable says, =0 and =false included.
 */
export const requireRegisteredOption = (description: string) => new Option("--require-registered", `${description} (env: TASKPOOL_REQUIRE_REGISTERED=1)`);
const YES = new Set(["1", "true", "yes", "on"]);
const NO = new Set(["0", "false", "no", "off", ""]);

/**
 * On when the flag is typed, or when TASKPOOL_REQUIRE_REGISTERED says yes (1, true, yes, on); off when
 * neither, or when it says no (0, false, no, off, empty). Anything else is refused.
 */
export function requiresRegistered(flag: boolean | undefined, value = process.env.TASKPOOL_REQUIRE_REGISTERED): boolean {
  if (flag === true || value === undefined) return flag === true;
  const said = value.trim().toLowerCase();
  if (YES.has(said)) return true;
  if (NO.has(said)) return false;
  throw new CliError(`TASKPOOL_REQUIRE_REGISTERED=${value} is neither on nor off: set it to 1 (or true) to require registered task types, to 0 (or false) or unset it not to`);
}

/** `keys create`, as the user typed it. */
const commandName = (command: Command): string => (command.parent?.parent ? `${commandName(command.parent)} ${command.name()}` : command.name());

/**
 * --db and --schema for a command that works on the database itself and never through a server (the
 * coordinator, key management, migrations, serve, dev). A server, however it is named, is refused
 * before anything is opened: `refusal(server)` says where to run the command instead. TASKPOOL_URL
 * exported for the other commands counts unless a database is given: falling back to the default
 * ./taskpool.db would act on a database the server does not use (a key it refuses, a coordinator
 * leading nobody's tasks).
 */
export function addDatabaseOnlyOptions(command: Command, refusal: (server: string) => string): Command {
  return (
    command
      .addOption(dbOption())
      .addOption(schemaOption())
      // Accepted only to be refused with the reason, rather than with commander's "unknown option".
      .addOption(new Option("--url <url>").hideHelp())
      .addOption(new Option("--api-key <key>").hideHelp())
      .hook("preAction", (self) => refuseServer(self, refusal))
  );
}

/** Throws, saying what to do instead, when the options or TASKPOOL_URL point the command at a server. */
function refuseServer(command: Command, refusal: (server: string) => string): void {
  const { db, url, apiKey } = command.opts<{ db: string; url?: string; apiKey?: string }>();
  const server = url ?? (isServerUrl(db) ? db : undefined);
  if (server !== undefined) throw new CliError(refusal(redactUrl(server)));
  if (apiKey !== undefined) throw new CliError(`taskpool ${commandName(command)} works on the database directly and takes no --api-key: pass --db with the database's URL`);
  const exported = process.env.TASKPOOL_URL;
  if (exported && command.getOptionValueSource("db") === "default") {
    throw new CliError(
      `TASKPOOL_URL is set (${redactUrl(exported)}), but taskpool ${commandName(command)} works on the database directly, not through a server: ` +
        `pass --db with the server's database URL (or set TASKPOOL_DATABASE_URL) rather than fall back to ${db}`,
    );
  }
}

/** Where a command connects: a database (--db), or a taskpool server (--url, or an http:// --db) with its key. */
export interface ConnectionOptions {
  db: string;
  schema?: string;
  url?: string;
  apiKey?: string;
  /** --timeout: seconds a call to the server may take, for a one-shot command (withPool). */
  timeout?: number;
}

/**
 * Connects to the database or server the options name; a failure becomes one line saying what to fix.
 * `refuseNotSetUp`, given the database's description, words the refusal of one never set up (with
 * `create: false`) for a command whose fix is not the usual one.
 */
export async function openPool(opts: ConnectionOptions, options: ConnectOptions = {}, refuseNotSetUp?: (database: string) => CliError): Promise<Taskpool> {
  const target = opts.url ?? opts.db;
  const remote = isServerUrl(target);
  if (opts.url !== undefined && !remote) throw new CliError(`--url takes a taskpool server's address (http://host:port), not "${redactUrl(opts.url)}"; a database goes in --db`);
  if (opts.timeout !== undefined && !remote) throw new CliError("--timeout is how long to wait for a taskpool server (--url); leave it out with --db, whose statements have their own limits");
  if (remote && options.requireRegistered) {
    throw new CliError(
      "--require-registered (or TASKPOOL_REQUIRE_REGISTERED) is the server's setting, not a client's: start the server with `taskpool serve --require-registered` and leave it out here; enqueue over --url follows the server",
    );
  }
  // Loaded here, not at start: `taskpool --help` and a refused option need none of it.
  const { connect } = await import("../api/taskpool.js");
  try {
    return await connect(target, remote ? { ...options, requireRegistered: undefined, apiKey: opts.apiKey } : { schema: target.startsWith("sqlite:") ? undefined : opts.schema, ...options });
  } catch (error) {
    if (refuseNotSetUp && error instanceof DatabaseNotFoundError) throw refuseNotSetUp(describeNotSetUp(error, target));
    throw explainConnectError(error, target);
  }
}

/**
 * Connects, runs `fn`, and closes the pool whatever happens. A database taskpool never set up (a
 * SQLite file that is not there, a PostgreSQL schema without taskpool's tables) is refused unless
 * the command `creates` one (enqueue, keys create, migrate, registering a type or a schedule): opened,
 * it would be created empty, and `taskpool status` run from the wrong directory, or with a mistyped
 * --schema, reported an empty pool and left a stray file or schema behind.
 */
export async function withPool(opts: ConnectionOptions, fn: (pool: Taskpool) => Promise<void>, options: ConnectOptions = {}, creates = false): Promise<void> {
  if (opts.url === undefined && sqlitePathOf(opts.db) === ":memory:") {
    throw new CliError(
      "sqlite::memory: is a database that lasts as long as the process that opened it: this command would open an empty one and lose what it wrote when it ends. " +
        "Give a file (--db sqlite:./taskpool.db) or postgres://…; an in-memory pool is for taskpool dev and taskpool serve, which keep it open",
    );
  }
  // Each call of a one-shot command is bounded; a worker's (openPool alone) keeps its patient retries.
  const pool = await openPool(opts, { ...options, create: creates, callTimeoutMs: (opts.timeout ?? SERVER_TIMEOUT_SECONDS) * 1000 });
  try {
    await fn(pool);
  } finally {
    await pool.close();
  }
}
