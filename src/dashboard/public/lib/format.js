// How times, durations and JSON read on the page.
import { serverNow } from "./server-clock.js";

/** "12 s", "4 min", "3 h", "2 d". */
export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const s = Math.abs(seconds);
  if (s < 10) return `${Math.round(s * 10) / 10} s`;
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

/** How long ago an ISO time was ("3 min ago"), on the server's clock. */
export function ago(iso) {
  if (!iso) return "—";
  return `${duration((serverNow() - Date.parse(iso)) / 1000)} ago`;
}

/** Local date and time, to the second. */
export function time(iso) {
  if (!iso) return "—";
  return new Date(iso).toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" });
}

/** A number, or a dash for null. */
export function num(n, digits = 2) {
  if (n === null || n === undefined) return "—";
  return Number.isInteger(n) ? n.toLocaleString() : n.toLocaleString(undefined, { maximumFractionDigits: digits });
}

export const json = (value) => JSON.stringify(value, null, 2);

export const TASK_STATUSES = ["pending", "claimed", "running", "completed", "failed", "cancelled"];
export const WORKER_STATUSES = ["active", "stale", "dead", "inactive"];
