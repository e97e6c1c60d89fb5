/**
 * One SQLite claimer process of bench/claim.ts (not meant to be run by hand).
 *
 * better-sqlite3 blocks its thread for every statement, so claimers sharing one event loop would
 * just take turns; separate processes on one file is how SQLite deployments really scale out.
 *
 * argv: <database path> <worker id>. Protocol over the IPC channel: this process sends
 * { type: "ready" } once the store is open, starts on { type: "go" }, and answers with
 * { type: "done", samples }.
 */
import { openStore } from "../src/store/open-store.js";
import { claimUntilDrained, type ClaimerSamples } from "./lib/claim-loop.js";

export type ClaimerMessage = { type: "ready" } | { type: "done"; samples: ClaimerSamples };

const [path, workerId] = process.argv.slice(2);
if (!process.send || !path || !workerId) {
  console.error("claim-sqlite-claimer is started by bench/claim.ts over IPC");
  process.exit(2);
}
const send = (message: ClaimerMessage, then: () => void = () => {}) => process.send?.(message, undefined, {}, then);

/**
 * SQLite gives up on the write lock after busy_timeout. Retrying is safe: the failure is at BEGIN
 * IMMEDIATE (or a rolled-back commit), so nothing was written and the lease is still held.
 */
const isBusy = (error: unknown) => (error as { code?: string })?.code === "SQLITE_BUSY";

// Opened (and migration-checked) before "ready", so the timed run does not include start-up.
const store = await openStore(`sqlite:${path}`);
process.once("message", async () => {
  const samples = await claimUntilDrained(store, workerId, { retryable: isBusy });
  await store.close();
  // Disconnecting lets the process exit; only once the samples are written to the channel.
  send({ type: "done", samples }, () => process.disconnect?.());
});
send({ type: "ready" });
