import { Writable } from "node:stream";
import { pino, type Logger } from "pino";

/** One captured line: pino's numeric level (30 info, 40 warn, 50 error), message and fields. */
export type LogLine = { level: number; msg: string } & Record<string, unknown>;

/** A real pino logger whose lines the test can read. */
export function captureLogs(): { logger: Logger; messages: () => string[]; lines: () => LogLine[] } {
  const lines: LogLine[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level: "debug" }, stream), messages: () => lines.map((l) => l.msg), lines: () => [...lines] };
}

/** Polls `check` until it returns a truthy value or the deadline passes (no fixed sleeps). */
export async function eventually<T>(check: () => Promise<T> | T, timeoutMs = 10_000, what = "condition"): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
