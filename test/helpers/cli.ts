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

/** What a CLI process did: its exit code and output. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** `taskpool …args` as a real process; a failure is returned (exit code and output), not thrown. */
export async function taskpoolRun(...args: string[]): Promise<CliRun> {
  try {
    const { stdout, stderr } = await taskpool(...args);
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as CliRun;
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/**
 * The same, run in `cwd` with `env` as its whole environment (where a default ./taskpool.db would
 * appear, and what TASKPOOL_* it sees); killed after 20 s (SIGKILL: a graceful stop may take long),
 * so a command that should have refused to start cannot hang the test.
 */
export const taskpoolIn = (cwd: string, env: NodeJS.ProcessEnv, ...args: string[]) => promisify(execFile)(process.execPath, [CLI, ...args], { cwd, env, timeout: 20_000, killSignal: "SIGKILL" });

/** The environment of the tests less the TASKPOOL_* connection settings, plus `env`. */
export const envWith = (env: Record<string, string>): NodeJS.ProcessEnv => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !["TASKPOOL_URL", "TASKPOOL_API_KEY", "TASKPOOL_DATABASE_URL", "TASKPOOL_SCHEMA"].includes(name))),
  ...env,
});

/** `taskpool …args` with `input` on its stdin; a failure is returned, not thrown. */
export function taskpoolWithStdin(input: string, ...args: string[]): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [CLI, ...args], (error, stdout, stderr) => resolve({ code: error ? Number(error.code) : 0, stdout, stderr }));
    child.stdin!.end(input);
  });
}
