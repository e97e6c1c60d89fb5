import { defineConfig } from "vitest/config";

/**
 * Files whose tests freeze, kill and time processes (chaos scenarios, crash recovery): they run one
 * at a time, after the rest, so no other file's load stretches the windows they measure. A worker
 * frozen with SIGSTOP inside a SQLite write holds the file's write lock until it is thawed, and the
 * slower a loaded machine runs, the likelier a freeze lands there.
 */
const SERIAL = ["test/chaos/**/*.test.ts", "test/process/**/*.test.ts"];

/** What both projects share (a project that extends the root would run the global setup again). */
const shared = { testTimeout: 30_000, hookTimeout: 30_000, pool: "forks" } as const;

export default defineConfig({
  test: {
    globalSetup: ["test/global-setup.ts"],
    projects: [
      {
        test: {
          ...shared,
          name: "parallel",
          include: ["test/**/*.test.ts"],
          exclude: SERIAL,
          // Two files at a time. Vitest's default on a 2-core machine is one (its CPUs less one), and
          // most of these files wait: on the database, on processes they start, on coordinator timeouts.
          // Every file works in a schema, a SQLite file and ports of its own, so files do not meet.
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...shared,
          name: "serial",
          include: SERIAL,
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
