import { execFile } from "node:child_process";
import { copyFileSync, existsSync, rmSync } from "node:fs";
import process from "node:process";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * Compiles what the tests start as processes, once per run, from the sources under test: dist/ (the
 * CLI, as bin/taskpool.js loads it) and .build/ (the worker, coordinator and claimer scripts the
 * process, chaos and concurrency tests start; see test/helpers/processes.ts). Node starts compiled
 * code in about a third of the CPU that starting the sources through tsx takes, and the suite starts
 * many processes on a 2-core machine.
 */
export default async function setup(): Promise<void> {
  // Incremental: with nothing changed since the last run, each takes a couple of seconds. tsc does
  // not look for its outputs, so a removed dist/ must also forget what was built into it.
  if (!existsSync("dist/cli/index.js")) rmSync(".build/dist.tsbuildinfo", { force: true });
  const tsc = (project: string, info: string) => run(process.execPath, ["node_modules/typescript/bin/tsc", "-p", project, "--incremental", "--tsBuildInfoFile", info]);
  // As `npm run build` does after tsc.
  const finish = (out: string) => Promise.all([run(process.execPath, ["scripts/copy-assets.js", out]), run(process.execPath, ["scripts/bundle-typebox.js", out])]);
  await Promise.all([
    tsc("tsconfig.build.json", ".build/dist.tsbuildinfo").then(() => finish("dist")),
    tsc("tsconfig.processes.json", ".build/processes.tsbuildinfo").then(() => finish(".build/src")),
  ]);
  // src/version.ts reads the package.json above the compiled src/.
  copyFileSync("package.json", ".build/package.json");
}
