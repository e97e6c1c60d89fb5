import { isIP } from "node:net";

/** True for addresses only this machine can reach: localhost, 127.0.0.0/8 and ::1 (bracketed or not). */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, "$1");
  if (bare === "localhost") return true;
  if (isIP(bare) === 4) return bare.startsWith("127.");
  return bare === "::1";
}

/** The host of a Host header (`127.0.0.1:8080`, `[::1]:8080`, `localhost`), without its port. */
export function hostOf(header: string): string {
  if (header.startsWith("[")) return header.slice(0, header.indexOf("]") + 1);
  const colon = header.lastIndexOf(":");
  return colon === -1 || header.indexOf(":") !== colon ? header : header.slice(0, colon);
}
