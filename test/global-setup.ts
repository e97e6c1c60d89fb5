import { execFileSync } from "node:child_process";

/** Builds dist/ from the sources under test, so the CLI the tests start (bin/taskpool.js) is this checkout's. */
export default function setup(): void {
  execFileSync("npm", ["run", "--silent", "build"], { stdio: ["ignore", "ignore", "inherit"] });
}
