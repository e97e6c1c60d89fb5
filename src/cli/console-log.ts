import { Writable } from "node:stream";
import { pino, type Logger } from "pino";
import { logLevel } from "./service-log.js";

/**
 * A pino logger printing "12:00:01 message" lines, for humans watching `taskpool dev`. `level` is
 * the default when LOG_LEVEL is not set (debug shows every task claimed and completed). `print`
 * takes each line and its pino level (default: to stdout), so dev can show them in its live status instead.
 */
export function consoleLogger(level = "info", print: (line: string, level: number) => void = (line) => void process.stdout.write(`${line}\n`)): Logger {
  const out = new Writable({
    write(chunk, _encoding, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) {
        const entry = JSON.parse(line) as { time: number; level: number; msg: string; err?: string };
        const mark = entry.level >= 50 ? "✖ " : entry.level >= 40 ? "! " : "";
        print(`${new Date(entry.time).toISOString().slice(11, 19)} ${mark}${entry.msg}${entry.err ? ` (${entry.err})` : ""}`, entry.level);
      }
      done();
    },
  });
  return pino({ level: logLevel(level) }, out);
}
