import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/**
 * The CLI as users run it: bin/taskpool.js, which loads the build in dist/ (test/global-setup.ts
 * builds it once per run). Starting it costs about a third of the CPU of starting the sources
 * through tsx, and the CLI tests start it many times.
 */
export const CLI = fileURLToPath(new URL("../../bin/taskpool.js", import.meta.url));

/** `taskpool …args` as a real process; resolves with its output, rejects (with code, stdout, stderr) when it fails. */
export const taskpool = (...args: string[]) => promisify(execFile)(process.execPath, [CLI, ...args]);
