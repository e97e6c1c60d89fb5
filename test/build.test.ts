import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import * as TypeBox from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { Value } from "@sinclair/typebox/value";
import { afterAll, describe, expect, it } from "vitest";
import { CLI } from "./helpers/cli.js";
import { removeSqliteFiles, sqlitePath } from "./helpers/stores.js";

/** The compiled src/core/typebox.ts that the CLI loads, which the build replaces with the bundle. */
const BUNDLE = pathToFileURL(CLI.replace(/bin\/taskpool\.js$/, "dist/core/typebox.js")).href;

/** What the build (test/global-setup.ts, as `npm run build`) makes of the sources, as users start it. */
describe("the build", () => {
  const dir = mkdtempSync(join(tmpdir(), "taskpool-build-"));
  const path = sqlitePath();
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
    removeSqliteFiles(path);
  });

  it("starts the CLI without TypeBox's 218 modules (a third of its start) or Ajv's, which it does not use here", async () => {
    // A module hook in the CLI's process writes down every ES module it loads.
    const loaded = join(dir, "loaded.txt");
    writeFileSync(join(dir, "hooks.mjs"), `import { appendFileSync } from "node:fs";\nexport async function load(url, context, next) { appendFileSync(${JSON.stringify(loaded)}, url + "\\n"); return next(url, context); }\n`);
    writeFileSync(join(dir, "register.mjs"), `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(join(dir, "hooks.mjs")).href)});\n`);
    // Enqueueing validates through the checked store, whose schemas are TypeBox's.
    const { stdout } = await promisify(execFile)(process.execPath, ["--import", join(dir, "register.mjs"), CLI, "enqueue", "report", '{"n":1}', "--db", `sqlite:${path}`]);
    expect(stdout).toMatch(/Enqueued task 1 \(report\)/);
    const urls = readFileSync(loaded, "utf8").trim().split("\n");
    expect(urls).toContain(BUNDLE);
    expect(urls.filter((url) => url.includes("/node_modules/@sinclair/typebox/"))).toEqual([]);
    // Ajv is loaded by the first params schema compiled, and this task's type has none.
    expect(urls.filter((url) => url.includes("/node_modules/ajv"))).toEqual([]);
  });

  it("is required from CommonJS by its package name (the exports' default), as a CommonJS project's compiled code does", async () => {
    // Only "import" was exported: a CommonJS project type-checked, then failed with ERR_PACKAGE_PATH_NOT_EXPORTED.
    const root = CLI.replace(/\/bin\/taskpool\.js$/, "");
    const file = join(dir, "uses-taskpool.cjs");
    writeFileSync(file, `const { connect } = require("taskpool"); const { buildServer } = require("taskpool/server");\nconnect("sqlite::memory:").then(async (pool) => { console.log(typeof pool.enqueue, typeof buildServer); await pool.close(); });\n`);
    // Resolved as from a project that installed it: node_modules/taskpool is this package.
    const modules = join(dir, "node_modules");
    mkdirSync(modules);
    symlinkSync(root, join(modules, "taskpool"));
    const { stdout } = await promisify(execFile)(process.execPath, [file]);
    expect(stdout).toBe("function function\n");
  });

  it("bundles all of TypeBox that the sources import from src/core/typebox.ts", async () => {
    const bundled = await import(BUNDLE);
    expect(Object.keys(bundled).sort()).toEqual([...new Set([...Object.keys(TypeBox), "TypeCompiler", "Value", "ValueErrorType"])].sort());
    expect(bundled.TypeCompiler).not.toBe(TypeCompiler);
    // A schema built by the user's own TypeBox is read by the bundled one: TypeBox marks schemas with Symbol.for().
    const schema = TypeBox.Type.Object({ n: TypeBox.Type.Integer({ minimum: 1 }) });
    expect(bundled.TypeCompiler.Compile(schema).Check({ n: 1 })).toBe(true);
    expect(bundled.TypeCompiler.Compile(schema).Check({ n: 0 })).toBe(false);
    expect(bundled.Value.Check(schema, { n: 2 })).toBe(Value.Check(schema, { n: 2 }));
  });
});
