/**
 * One SQLite claimer process of bench/claim.ts (not meant to be run by hand).
 *
 * better-sqlite3 blocks its thread for every statement, so claimers sharing one event loop would
 * just take turns; separate processes on one file is how SQLite deployments really scale out.
 *
 * argv: <database path> <worker id> <cycles> <warm-up cycles>. Protocol over the IPC channel: this
 * process opens the store, runs the warm-up cycles unrecorded (its statements are prepared then, not
 * on the clock), sends { type: "ready" }, starts on { type: "go" }, runs its cycles and answers with
 * { type: "done", samples }.
 */
import { openStore } from "../src/store/open-store.js";
import { claimCycles, type ClaimerSamples } from "./lib/claim-loop.js";

export type ClaimerMessage = { type: "ready" } | { type: "done"; samples: ClaimerSamples };

const [path, workerId, cycles, warmup] = process.argv.slice(2);
if (!process.send || !path || !workerId || !(Number(cycles) >= 0) || !(Number(warmup) >= 0)) {
  console.error("claim-sqlite-claimer is started by bench/claim.ts over IPC");
  process.exit(2);
}
const send = (message: ClaimerMessage, then: () => void = () => {}) => process.send?.(message, undefined, {}, then);
// Ctrl-C reaches the whole process group: the bench stops this process itself.
process.on("SIGINT", () => {});
process.on("disconnect", () => process.exit(1));

/**
 * SQLite gives up on the write lock after busy_timeout. Retrying is safe: the failure is at BEGIN
 * IMMEDIATE (or a rolled-back commit), so nothing was written and the lease is still held.
 */
const isBusy = (error: unknown) => (error as { code?: string })?.code === "SQLITE_BUSY";

// Opened (and migration-checked) before "ready", so the timed run does not include start-up.
const store = await openStore(`sqlite:${path}`, { migrate: false });
await claimCycles(store, workerId, { retryable: isBusy, budget: { left: Number(warmup) } });
process.once("message", async () => {
  const samples = await claimCycles(store, workerId, { retryable: isBusy, budget: { left: Number(cycles) } });
  await store.close();
  // Exit only once the samples are written to the channel.
  send({ type: "done", samples }, () => process.exit(0));
});
send({ type: "ready" });
