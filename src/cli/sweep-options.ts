import type { Command } from "commander";
import type { CoordinatorOptions } from "../coordinator/coordinator.js";
import { positiveInteger } from "./parse.js";

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
