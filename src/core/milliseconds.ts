import { ValidationError } from "./errors.js";

/** The longest delay a Node timer keeps: a longer one fires after 1 ms, and a poll or a grace period would become a busy loop or none. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * An option given in milliseconds, checked where it is given: a fraction, a string or a value out of
 * range would fail later, far from the call. `range` says the bounds as the refusal words them
 * ("from 0 (no retries) to 86400000 (a day)").
 */
export function checkedMs(name: string, value: unknown, min: number, max: number, range = `from ${min} to ${max}`): number {
  if (typeof value === "number" && Number.isInteger(value) && value >= min && value <= max) return value;
  const why = `a whole number of milliseconds ${range}`;
  throw new ValidationError(`Invalid ${name} ${typeof value === "string" ? JSON.stringify(value) : String(value)}: ${why}`, [{ path: name, message: why }]);
}
