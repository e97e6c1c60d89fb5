import { pino, type Logger } from "pino";
import { CliError } from "./errors.js";

const LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

/** LOG_LEVEL, or `fallback` when it is not set; a value pino does not know is refused naming the variable. */
export function logLevel(fallback: string): string {
  const level = process.env.LOG_LEVEL ?? fallback;
  if (!LEVELS.includes(level)) throw new CliError(`LOG_LEVEL=${level} is not a log level: use one of ${LEVELS.join(", ")}`);
  return level;
}

/**
 * The JSON-lines logger of the long-running commands (serve, worker, coordinator) on stdout, at
 * LOG_LEVEL (default info). Written synchronously: with pino's asynchronous default, a process whose
 * stdout had been closed (a log shipper gone, `| head`) hung for ever at exit, retrying a line it
 * could not write. Written at once, a broken pipe ends its logging and nothing else.
 */
export function serviceLogger(): Logger {
  return pino({ name: "taskpool", level: logLevel("info") }, pino.destination({ dest: 1, sync: true }));
}
