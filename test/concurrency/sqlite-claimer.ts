/**
 * One claimer process for the SQLite concurrency tests: opens its own connection to the shared file,
 * waits until all the claimers are ready (startTogether), then either drains the pool (claim +
 * complete) or claims once. Prints the ids it claimed as one JSON line.
 */
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { waitForGo } from "../helpers/processes.js";

const [path, workerId, mode] = process.argv.slice(2);
const store = new SqliteStore({ path, busyTimeoutMs: 30_000 });
const claimed: number[] = [];

await waitForGo();
if (mode === "race") {
  claimed.push(...(await store.claim({ workerId })).map((t) => t.id));
} else {
  const limit = Number(workerId.split("-")[1]) % 2 === 0 ? 1 : 7;
  for (;;) {
    const batch = await store.claim({ workerId, limit });
    if (batch.length === 0) break;
    for (const task of batch) {
      claimed.push(task.id);
      await store.complete(task.id, task);
    }
  }
}
await store.close();
process.stdout.write(`${JSON.stringify(claimed)}\n`);
