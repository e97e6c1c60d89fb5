import { fileURLToPath } from "node:url";

/**
 * The CLI as users run it: bin/taskpool.js, which loads the build in dist/ (test/global-setup.ts
 * builds it once per run). Starting it costs about a third of the CPU of starting the sources
 * through tsx, and the CLI tests start it many times.
 */
export const CLI = fileURLToPath(new URL("../../bin/taskpool.js", import.meta.url));
