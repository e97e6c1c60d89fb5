import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    // Two files at a time. Vitest's default on a 2-core machine is one (its CPUs less one), and most
    // of this suite waits: on processes it starts and kills, on the database, on coordinator timeouts.
    // Every file works in a schema, a SQLite file and ports of its own, so files do not meet.
    maxWorkers: 2,
    globalSetup: ["test/global-setup.ts"],
  },
});
