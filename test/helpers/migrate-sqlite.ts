/** Migrates the SQLite file given as argument and prints the schema version it ends with. */
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";

const store = new SqliteStore({ path: process.argv[2], busyTimeoutMs: 30_000 });
await store.migrate();
process.stdout.write(`${store.db.pragma("user_version", { simple: true })}\n`);
await store.close();
