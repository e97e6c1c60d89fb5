import type { BackoffPolicy } from "./task.js";

/**
 * Delay before retry number `attempt` (1 = the first retry): exponential, capped, then jittered
 * downwards so that tasks failing together do not all come back in the same instant.
 */
export function retryDelayMs(policy: BackoffPolicy, attempt: number, random: () => number = Math.random): number {
  const exponential = policy.baseSeconds * policy.factor ** Math.max(0, attempt - 1);
  const capped = Math.min(policy.maxSeconds, exponential) * 1000;
  return Math.round(capped * (1 - policy.jitter * random()));
}
