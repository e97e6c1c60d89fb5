import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/**
 * The file node starts for one of the tests' TypeScript scripts: its compiled copy in .build/
 * (test/global-setup.ts compiles them with the sources they import).
 */
export function script(tsFile: string): string {
  if (!tsFile.startsWith(ROOT) || !tsFile.endsWith(".ts")) throw new Error(`${tsFile} is not a TypeScript file of this checkout`);
  return `${ROOT}.build/${tsFile.slice(ROOT.length, -3)}.js`;
}

/**
 * Starts node on each script's arguments and lets them all go at once: each prints "ready" once loaded
 * and waits for stdin (waitForGo), which is sent to all when the last is ready. A fixed start time had
 * to allow for the slowest start on a loaded machine (1-4 s a process), and processes that missed it
 * anyway raced fewer rivals. Resolves with each process's last line of output.
 */
export async function startTogether(argsOfEach: string[][], timeoutMs: number): Promise<string[]> {
  const children = argsOfEach.map((args) => spawn(process.execPath, args, { stdio: ["pipe", "pipe", "inherit"], timeout: timeoutMs }));
  const runs = children.map((child) => {
    let out = "";
    child.stdout.setEncoding("utf8");
    const ready = new Promise<void>((resolve) => child.stdout.on("data", (chunk: string) => (out += chunk).startsWith("ready\n") && resolve()));
    const exit = new Promise<string>((resolve, reject) => {
      child.once("error", reject);
      child.once("close", (code, signal) => (code === 0 ? resolve(out.trim().split("\n").at(-1) as string) : reject(new Error(`${child.spawnargs.join(" ")} exited with ${code ?? signal}: ${out}`))));
    });
    // One that ends before it is ready fails the start; the others, still waiting, are stopped.
    return { ready: Promise.race([ready, exit.then(() => Promise.reject(new Error(`${child.spawnargs.join(" ")} ended before it was ready`)))]), exit };
  });
  try {
    await Promise.all(runs.map((r) => r.ready));
  } catch (error) {
    for (const child of children) child.kill();
    await Promise.allSettled(runs.map((r) => r.exit));
    throw error;
  }
  for (const child of children) child.stdin.end("go\n");
  return Promise.all(runs.map((r) => r.exit));
}

/** The script's side of startTogether: says it is ready, then waits for the go. */
export async function waitForGo(): Promise<void> {
  process.stdout.write("ready\n");
  await once(process.stdin, "data");
  process.stdin.destroy();
}
