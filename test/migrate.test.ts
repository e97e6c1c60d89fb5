import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { UnsupportedUrlError } from "../src/core/errors.js";
import { loadMigrations } from "../src/store/migrations.js";
import { openStore } from "../src/store/open-store.js";
import { PostgresStore } from "../src/store/postgres/postgres-store.js";
import { dropSchema, PG_URL, removeSqliteFiles, sqlitePath } from "./helpers/stores.js";
import { script } from "./helpers/processes.js";

const run = promisify(execFile);
const MIGRATOR = fileURLToPath(new URL("./helpers/migrate-sqlite.ts", import.meta.url));

describe("migrations", () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });

  it("PostgreSQL: four processes' worth of stores migrating one schema at once all succeed, once", async () => {
    const schema = `tp_migrate_${Date.now()}`;
    const stores = Array.from({ length: 4 }, () => new PostgresStore({ url: PG_URL, schema, poolSize: 1 }));
    cleanups.push(async () => {
      await Promise.all(stores.map((s) => s.close()));
      await dropSchema(schema);
    });
    await Promise.all(stores.map((s) => s.migrate()));
    await stores[0].migrate(); // and again later: nothing to do
    const { rows } = await stores[0].pool.query("SELECT version, name FROM taskpool_migrations ORDER BY version");
    expect(rows[0]).toEqual({ version: 1, name: "tasks" });
    expect(new Set(rows.map((r) => r.version)).size).toBe(rows.length);
    expect((await stores[3].enqueue({ taskType: "a" })).created).toBe(true);
  });

  it("SQLite: four processes migrating one new file at once all succeed", async () => {
    const path = sqlitePath();
    cleanups.push(() => removeSqliteFiles(path));
    const outputs = await Promise.all(Array.from({ length: 4 }, () => run(process.execPath, [script(MIGRATOR), path])));
    const latest = String(loadMigrations(new URL("../src/store/sqlite/migrations/", import.meta.url)).at(-1)?.version);
    expect(outputs.map((o) => o.stdout.trim())).toEqual([latest, latest, latest, latest]);
    const store = await openStore(`sqlite:${path}`);
    cleanups.push(() => store.close());
    expect((await store.enqueue({ taskType: "a" })).created).toBe(true);
  });

  it("opens stores from connection strings and explains the ones it cannot", async () => {
    const memory = await openStore("sqlite::memory:");
    expect(memory.dialect).toBe("sqlite");
    await memory.close();
    for (const url of ["mysql://localhost/db", "sqlite:", "./file.db", ""]) {
      const error = await openStore(url).catch((e) => e);
      expect(error).toBeInstanceOf(UnsupportedUrlError);
      expect(error.message).toMatch(/use sqlite:\.\/path\.db, sqlite::memory:, postgres:\/\/user@host:port\/db, or a taskpool server.s http:\/\/host:port/);
    }
    await expect(openStore(PG_URL, { schema: "Robert'); DROP" })).rejects.toThrow(/Invalid schema name/);
  });
});
