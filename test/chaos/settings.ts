import { appendFileSync } from "node:fs";
import type { CoordinatorOptions } from "../../src/coordinator/coordinator.js";
import type { HistorySummary } from "./history.js";

/**
 * The coordinator of the chaos runs: a sweep every 250 ms, a worker dead after 2 s of silence (ten
 * missed 200 ms heartbeats, so a loaded 2-core machine does not kill live workers).
 */
export const CHAOS_COORDINATION: CoordinatorOptions = {
  sweepIntervalMs: 250,
  staleAfterMs: 1000,
  deadAfterMs: 2000,
  reservationMs: 5000,
  logger: (await import("pino")).pino({ level: "silent" }),
};

/** A size from the environment (the long runs of `npm run chaos` and `npm run soak`), else the CI default. */
export function scale(name: string, ciDefault: number): number {
  const value = Number(process.env[name]);
  return Number.isFinite(value) && value > 0 ? value : ciDefault;
}

/**
 * Prints a run's figures, and appends them to CHAOS_REPORT when set (the figures quoted in
 * docs/reliability.md come from there).
 */
export function report(scenario: string, figures: Partial<HistorySummary> & Record<string, unknown>): void {
  const { violations, ...rest } = figures;
  const line = JSON.stringify({ scenario, at: new Date().toISOString(), ...rest, violations: violations?.length ?? 0 });
  console.log(line);
  if (process.env.CHAOS_REPORT) appendFileSync(process.env.CHAOS_REPORT, `${line}\n`);
}
