/**
 * The other process of the SQLite wake-up test: opens its own store on the shared file, enqueues one
 * task, and prints its id and when the commit returned (ms since the epoch) as one JSON line.
 */
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";

const [path, taskType] = process.argv.slice(2);
const store = new SqliteStore({ path });
const { task } = await store.enqueue({ taskType });
const committedAt = Date.now();
await store.close();
process.stdout.write(`${JSON.stringify({ id: task.id, committedAt })}\n`);
