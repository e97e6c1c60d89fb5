/**
 * One claimer process for the SQLite max_running test: opens its own connection to the shared file,
 * waits until all the claimers are ready (startTogether), then claims, holds each batch a few
 * milliseconds, and completes it, until no task is left. Prints the ids it completed as one JSON line.
 */
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { waitForGo } from "../helpers/processes.js";

const [path, workerId] = process.argv.slice(2);
const store = new SqliteStore({ path, busyTimeoutMs: 30_000 });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const done: number[] = [];

await waitForGo();
const limit = Number(workerId.split("-")[1]) % 2 === 0 ? 1 : 3;
for (;;) {
  const batch = await store.claim({ workerId, limit });
  if (batch.length === 0) {
    const { pending, claimed, running } = (await store.counts()).byStatus;
    if (pending + claimed + running === 0) break;
    await sleep(2);
    continue;
  }
  await sleep(5);
  for (const task of batch) {
    await store.complete(task.id, task);
    done.push(task.id);
  }
}
await store.close();
process.stdout.write(`${JSON.stringify(done)}\n`);
