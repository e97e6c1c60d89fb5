import { isIP } from "node:net";
import { InvalidArgumentError } from "commander";
import { inexactInteger } from "../core/exact-integers.js";

/**
 * A whole number. Commander prefixes the option and the value ("option '--delay <seconds>' argument
 * '5s' is invalid."); what follows says what to type instead.
 */
export function integer(value: string): number {
  const unit = /^-?\d+(?:\.\d+)?\s*[a-z]+$/i.test(value.trim());
  if (unit) throw new InvalidArgumentError("expected a whole number, without a unit (the option's <…> names its unit)");
  if (/^-?\d*\.\d+$/.test(value.trim())) throw new InvalidArgumentError("expected a whole number, without a fraction");
  if (!/^-?\d+$/.test(value.trim())) throw new InvalidArgumentError("expected a whole number, such as 10");
  return Number(value);
}

export function positiveInteger(value: string): number {
  const n = integer(value);
  if (n <= 0) throw new InvalidArgumentError("expected a whole number above 0");
  return n;
}

export function nonNegativeInteger(value: string): number {
  const n = integer(value);
  if (n < 0) throw new InvalidArgumentError("expected 0 or a whole number above it");
  return n;
}

/** A whole number from `min` to `max`, refused by the option rather than later as a field the operator never typed ("Invalid page: limit: …"). */
export function integerFrom(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = integer(value);
    if (n < min || n > max) throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}`);
    return n;
  };
}

/** A port to listen on, refused here rather than by the listen call: Node's message named no option. */
export function port(value: string): number {
  const n = integer(value);
  if (n < 0 || n > 65535) throw new InvalidArgumentError("expected a port from 0 to 65535 (0: any free one)");
  return n;
}

/** The names proxy-addr (Fastify's trustProxy) gives to address ranges. */
const PROXY_RANGES = ["loopback", "linklocal", "uniquelocal"];

/**
 * `--trust-proxy`: a comma-separated list of addresses, CIDR ranges and PROXY_RANGES. Checked here:
 * Fastify would refuse a bad one only as the server is built, with "invalid IP address" and no option
 * named. Not a number of hops: the proxy in front is then not checked, so a client reaching the server
 * directly could name any address (Fastify ignores counts for that reason).
 */
export function trustedProxies(value: string): string {
  const entries = value.split(",").map((e) => e.trim());
  for (const entry of entries) {
    const [address, bits, ...rest] = entry.split("/");
    const family = isIP(address);
    const prefixOk = bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= (family === 6 ? 128 : 32));
    if (PROXY_RANGES.includes(entry) || (family !== 0 && prefixOk && rest.length === 0)) continue;
    throw new InvalidArgumentError(
      `"${entry}" is not an address: give the proxies' addresses or ranges, comma-separated (10.0.0.5, 10.0.0.0/8, loopback), not how many there are`,
    );
  }
  return entries.join(",");
}

/** A parser of ids given on the command line: anything else is refused before anything is touched. */
function idOf(what: string, hint: string): (value: string) => number {
  return (value) => {
    if (!/^\d+$/.test(value) || Number(value) < 1 || !Number.isSafeInteger(Number(value))) {
      throw new InvalidArgumentError(`"${value}" is not a ${what} id: ${hint}`);
    }
    return Number(value);
  };
}

export const taskId = idOf("task", "pass the number `taskpool tasks list` shows, e.g. 42");
export const keyId = idOf("key", "pass the number `taskpool keys list` shows first, e.g. 3");

/** `value`, parsed from `text`, unless it holds an integer JSON numbers would round (see exact-integers.ts). */
export function exactIntegers<T>(text: string, value: T, root = ""): T {
  const inexact = inexactInteger(text, value, root);
  if (inexact !== null) throw new InvalidArgumentError(inexact);
  return value;
}
