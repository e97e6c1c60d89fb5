/**
 * One writer process for the SQLite lock-wait test: holds one task's lease and saves a checkpoint
 * after another (each a durable write of its own) from the common start time for `seconds`. Prints
 * one JSON line: writes saved, writes refused as unavailable, and the longest the event loop stood still.
 */
import { UnavailableError } from "../../src/core/errors.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";

const [path, workerId, startAt, seconds, busyTimeoutMs] = process.argv.slice(2);
const store = new SqliteStore({ path, busyTimeoutMs: Number(busyTimeoutMs) });
await store.enqueue({ taskType: "write", uniqueKey: workerId });
const [lease] = await store.claim({ workerId, taskTypes: ["write"], limit: 1 });

await new Promise((resolve) => setTimeout(resolve, Math.max(0, Number(startAt) - Date.now())));
let [saved, refused, stalled, last] = [0, 0, 0, performance.now()];
const ticker = setInterval(() => {
  stalled = Math.max(stalled, performance.now() - last);
  last = performance.now();
}, 10);
const end = Date.now() + Number(seconds) * 1000;
while (Date.now() < end) {
  // A turn for the timers between writes, as any program has: else the stall could not be seen.
  await new Promise(setImmediate);
  try {
    await store.checkpoint(lease.id, lease, { n: saved });
    saved++;
  } catch (error) {
    if (!(error instanceof UnavailableError)) throw error;
    refused++;
  }
}
clearInterval(ticker);
await store.close();
process.stdout.write(`${JSON.stringify({ saved, refused, stalledMs: Math.round(stalled) })}\n`);
