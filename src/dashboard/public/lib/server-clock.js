// The server's clock, as the page estimates it from the Date header of the API's answers: "3 min ago"
// compares a record's time with the server's now, so it reads right in a browser whose clock is off.

/** Answers slower than this say too little about when the server wrote its Date header. */
const MAX_ROUND_TRIP_MS = 2000;
/** Estimates kept; their median is the offset, so one odd answer cannot move it and a clock step is followed within a few polls. */
const KEEP = 9;

const estimates = [];
let offsetMs = 0;

/** Takes an answer's Date header (whole seconds) into the estimate; `sentAt` and `receivedAt` are the browser's Date.now() around the call. */
export function heardServerTime(dateHeader, sentAt, receivedAt) {
  const serverMs = Date.parse(dateHeader ?? "");
  if (Number.isNaN(serverMs) || receivedAt - sentAt > MAX_ROUND_TRIP_MS) return;
  // The header drops the milliseconds: the server's time was somewhere in that second, on average half-way.
  estimates.push(serverMs + 500 - (sentAt + receivedAt) / 2);
  if (estimates.length > KEEP) estimates.shift();
  const sorted = [...estimates].sort((a, b) => a - b);
  offsetMs = sorted[Math.floor(sorted.length / 2)];
}

/** Now on the server's clock, in milliseconds since the epoch. */
export const serverNow = () => Date.now() + offsetMs;
