import { type Command, InvalidArgumentError, Option } from "commander";
import { DEFAULT_RETENTION, type RetentionOptions } from "../core/retention.js";
import { positiveInteger } from "./parse.js";

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** An age such as 7d, 12h, 30m, 45s or 1500ms (a bare number is milliseconds, like the other flags). */
export function age(value: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(value.trim());
  if (!match) throw new InvalidArgumentError(`"${value}" is not an age: write a number with a unit, e.g. 7d, 12h, 30m, 45s (a bare number is milliseconds)`);
  return Math.round(Number(match[1]) * UNITS[match[2] ?? "ms"]);
}

/** An age in milliseconds as the flags take one, in its largest whole unit: 86400000 → 1d. */
export function ageText(ms: number): string {
  const [unit, size] = Object.entries(UNITS).sort(([, a], [, b]) => b - a).find(([, size]) => ms % size === 0) ?? ["ms", 1];
  return `${ms / size}${unit}`;
}

/** The retention flags of `taskpool coordinator` and `taskpool serve`. */
export function addRetentionOptions(command: Command): Command {
  return command
    .addOption(new Option("--retain-completed <age>", "delete completed tasks (with their events) this long after they finished").argParser(age).default(DEFAULT_RETENTION.completedAfterMs, "7d"))
    .addOption(new Option("--retain-cancelled <age>", "delete cancelled tasks this long after they were cancelled").argParser(age).default(DEFAULT_RETENTION.cancelledAfterMs, "7d"))
    .addOption(new Option("--retain-failed <age>", "delete failed tasks this long after they failed, at least --retain-completed (default: kept until retried)").argParser(age))
    .option("--prune-batch <rows>", "rows deleted per statement (a few statements per sweep)", positiveInteger, DEFAULT_RETENTION.batchSize)
    // Typed beside an age, one of the two would be ignored without a word.
    .addOption(new Option("--no-retention", "keep every finished task forever").conflicts(["retainCompleted", "retainCancelled", "retainFailed", "pruneBatch"]));
}

/** The coordinator's `retention` option from those flags (checked by the Coordinator, which names a bad one). */
export function retentionFrom(opts: { retention: boolean; retainCompleted: number; retainCancelled: number; retainFailed?: number; pruneBatch: number }): RetentionOptions | false {
  if (!opts.retention) return false;
  return { completedAfterMs: opts.retainCompleted, cancelledAfterMs: opts.retainCancelled, failedAfterMs: opts.retainFailed ?? null, batchSize: opts.pruneBatch };
}
