import type { BackoffPolicy } from "./task.js";

/**
 * Delay before retry number `attempt` (1 = the first retry): exponential, capped, then jittered
 * downwards so that tasks failing together do not all come back in the same instant.
 */
export function retryDelayMs(policy: BackoffPolicy, attempt: number, random: () => number = Math.random): number {
  const exponential = policy.baseSeconds * policy.factor ** backoffExponent(policy.factor, attempt - 1);
  const capped = Math.min(policy.maxSeconds, exponential) * 1000;
  return Math.round(capped * (1 - policy.jitter * random()));
}

/**
 * The exponent of `factor` after `retries` retries, stopped where factor^n reaches 10^300: past any
 * cap (maxSeconds is at most 30 days) for any baseSeconds over 1e-294, and short of a float's
 * overflow, which PostgreSQL refused (factor 10 from the 310th attempt: the failure was never
 * written) and which made 0 × ∞ = NaN of a zero baseSeconds. The stores' SQL stops it alike.
 */
function backoffExponent(factor: number, retries: number): number {
  return factor > 1 ? Math.min(Math.max(0, retries), 300 / Math.log10(factor)) : 0;
}
