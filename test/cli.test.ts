import { execFile, spawn } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { eventually } from "./helpers/logs.js";
import { removeSqliteFiles, sqlitePath } from "./helpers/stores.js";

const CLI = fileURLToPath(new URL("../src/cli/index.ts", import.meta.url));
const run = promisify(execFile);
const taskpool = (...args: string[]) => run(process.execPath, ["--import", "tsx", CLI, ...args]);

describe("taskpool CLI", () => {
  const path = sqlitePath();
  const db = `sqlite:${path}`;
  afterEach(() => removeSqliteFiles(path));

  it("dev runs the demo pipeline to the end and stops gracefully on Ctrl-C", async () => {
    const child = spawn(process.execPath, ["--import", "tsx", CLI, "dev", "--db", db, "--status-every", "0"], { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    // 1 discovery + 5 × (entry point, product discovery, resync) = 16 tasks, some retried after a simulated failure.
    await eventually(() => (output.match(/Task \d+ completed/g) ?? []).length >= 16, 60_000, "16 completions");
    child.kill("SIGINT");
    const code = await new Promise((resolve) => child.on("exit", resolve));
    expect(code).toBe(0);
    expect(output).toMatch(/Enqueued demo pipeline: task 1 \(store_discovery\)/);
    expect(output).toMatch(/Tasks: pending 0, claimed 0, running 0, completed 16, failed 0, cancelled 0/);
    expect(output).toMatch(/dev-worker\s+inactive/);
  }, 90_000);

  it("enqueue and status work against a database; bad input is refused with a clear message", async () => {
    await taskpool("migrate", "--db", db);
    expect((await taskpool("enqueue", "product_resync", '{"storeId":42}', "--priority", "5", "--db", db)).stdout).toMatch(/Enqueued task 1 \(product_resync\)/);
    expect((await taskpool("status", "--db", db)).stdout).toMatch(/product_resync\s+pending 1/);
    const bad = await taskpool("enqueue", "product_resync", "{not json", "--db", db).catch((e) => e);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/params is not valid JSON/);
    const badType = await taskpool("enqueue", "bad type", "--db", db).catch((e) => e);
    expect(badType.stderr).toMatch(/taskpool: Invalid task: taskType/);
    const badUrl = await taskpool("status", "--db", "mysql://x").catch((e) => e);
    expect(badUrl.stderr).toMatch(/Unsupported database URL "mysql:\/\/x"/);
  }, 60_000);

  it("types register, list and show the registry; enqueue then checks params against it", async () => {
    const file = `${path}.type.json`;
    writeFileSync(file, JSON.stringify({ name: "product_resync", paramsSchema: { type: "object", properties: { storeId: { type: "integer" } }, required: ["storeId"] }, maxRunning: 3 }));
    try {
      expect((await taskpool("types", "register", file, "--db", db)).stdout).toMatch(/Registered product_resync v1 .*at most 3 running, params schema/);
      expect((await taskpool("types", "register", file, "--db", db)).stdout).toMatch(/Unchanged: product_resync v1/);
      expect((await taskpool("types", "list", "--db", db)).stdout).toMatch(/^product_resync v1/);
      expect(JSON.parse((await taskpool("types", "show", "product_resync", "--db", db)).stdout)[0]).toMatchObject({ name: "product_resync", version: 1, maxRunning: 3 });
      const bad = await taskpool("enqueue", "product_resync", '{"storeId":"x"}', "--db", db).catch((e) => e);
      expect(bad.stderr).toMatch(/taskpool: Invalid params for product_resync v1: params.storeId: must be integer/);
      const missing = await taskpool("types", "show", "nope", "--db", db).catch((e) => e);
      expect(missing.stderr).toMatch(/task type "nope" is not registered/);
    } finally {
      rmSync(file, { force: true });
    }
  }, 60_000);

  it("worker runs the handlers a module exports until SIGTERM", async () => {
    const module = `${path}.handlers.mjs`;
    writeFileSync(module, "export const handlers = { greet: async (params) => ({ hello: params.name }) };\n");
    try {
      await taskpool("enqueue", "greet", '{"name":"taskpool"}', "--db", db);
      const child = spawn(process.execPath, ["--import", "tsx", CLI, "worker", "--handlers", module, "--id", "cli-worker", "--db", db], {
        env: { ...process.env, POLL_INTERVAL_MS: "100" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let output = "";
      child.stdout.on("data", (d) => (output += d));
      await eventually(() => output.includes("Task 1 completed"), 30_000, "the task to complete");
      child.kill("SIGTERM");
      expect(await new Promise((resolve) => child.on("exit", resolve))).toBe(0);
      expect((await taskpool("status", "--db", db)).stdout).toMatch(/greet\s+completed 1[\s\S]*cli-worker\s+inactive/);
      const missing = await taskpool("worker", "--handlers", `${path}.nothing.mjs`, "--db", db).catch((e) => e);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toMatch(/^taskpool: cannot load handlers from .*nothing\.mjs: /);
    } finally {
      rmSync(module, { force: true });
    }
  }, 60_000);
});
