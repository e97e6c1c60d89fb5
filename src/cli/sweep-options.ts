import type { Command } from "commander";
import { type CoordinatorOptions, resolveRetention, resolveSweepTimes } from "../coordinator/coordinator.js";
import { ValidationError } from "../core/errors.js";
import type { RetentionOptions } from "../core/retention.js";
import { CliError } from "./errors.js";
import { positiveInteger } from "./parse.js";
import { ageText } from "./retention-options.js";

/** How often the coordinator sweeps and when it calls a worker stale or dead: `taskpool coordinator` and `taskpool serve`, which runs one. */
export function addSweepOptions(command: Command): Command {
  return command
    .option("--sweep-interval <ms>", "time between the coordinator's sweeps (default 60000)", positiveInteger)
    .option("--stale-after <ms>", "silence before a worker is stale (default 60000)", positiveInteger)
    .option("--dead-after <ms>", "silence before a worker is dead and its tasks recovered (default 120000)", positiveInteger);
}

export function sweepFrom(opts: { sweepInterval?: number; staleAfter?: number; deadAfter?: number }): Pick<CoordinatorOptions, "sweepIntervalMs" | "staleAfterMs" | "deadAfterMs"> {
  return { sweepIntervalMs: opts.sweepInterval, staleAfterMs: opts.staleAfter, deadAfterMs: opts.deadAfter };
}

/** The library's names of what the coordinator's flags set, as its refusals name them. */
const FLAGS: [RegExp, string][] = [
  [/\bsweepIntervalMs\b/g, "--sweep-interval"],
  [/\bstaleAfterMs\b/g, "--stale-after"],
  [/\bdeadAfterMs\b/g, "--dead-after"],
  [/\b(retention\.)?completedAfterMs\b/g, "--retain-completed"],
  [/\b(retention\.)?cancelledAfterMs\b/g, "--retain-cancelled"],
  [/\b(retention\.)?failedAfterMs\b/g, "--retain-failed"],
  [/\b(retention\.)?batchSize\b/g, "--prune-batch"],
  [/, or null to keep/g, ", or leave it out to keep"],
];

/**
 * The coordinator's flags of `taskpool coordinator` and `taskpool serve`, checked before the database
 * is opened, and refused naming the flags typed: the coordinator refused them once it was made, after
 * a new SQLite file had been created and migrated, saying "deadAfterMs (10)" of `--dead-after 10`.
 */
export function checkCoordinatorFlags(sweep: Pick<CoordinatorOptions, "sweepIntervalMs" | "staleAfterMs" | "deadAfterMs">, retention: RetentionOptions | false): void {
  try {
    resolveSweepTimes(sweep);
    if (retention) resolveRetention(retention);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    const named = FLAGS.reduce((message, [name, flag]) => message.replace(name, flag), error.message);
    // The retention flags take ages (7d): their values are said so, not in the library's milliseconds.
    throw new CliError(named.replace(/(--retain-(?:completed|cancelled|failed))(: | \()(\d+)\b/g, (_, flag, between, ms) => `${flag}${between}${ageText(Number(ms))}`));
  }
}
