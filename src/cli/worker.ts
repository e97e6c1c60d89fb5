import { type Command, Option } from "commander";
import { serviceLogger } from "./service-log.js";
import { apiKeyOption, dbOption, openPool, schemaOption, urlOption } from "./database.js";
import { loadHandlers } from "./handlers-module.js";
import { integerFrom, positiveInteger } from "./parse.js";

export function workerCommand(program: Command): void {
  program
    .command("worker")
    .addHelpText("after", "\nExample:\n  $ taskpool worker --handlers ./handlers.mjs --concurrency 8\n  $ taskpool worker --handlers ./handlers.mjs --role product_resync --url http://taskpool:8080 --api-key $WORKER_KEY")
    .description("run a worker with the handlers a module exports (export const handlers = { task_type: async (params, ctx) => … })")
    .requiredOption("--handlers <module>", "path of an ES module exporting `handlers`")
    .addOption(new Option("--role <roles>", "comma-separated task types to claim (default: every handler)").env("WORKER_ROLE"))
    .option("--concurrency <n>", "tasks at once", positiveInteger, 1)
    .addOption(new Option("--id <workerId>", "worker id, unique per process: two live workers with one id give back each other's tasks (default: generated)").env("WORKER_ID"))
    .addOption(new Option("--poll-interval <ms>", "how often an idle worker looks for work").env("POLL_INTERVAL_MS").argParser(positiveInteger))
    .addOption(new Option("--heartbeat-interval <ms>", "time between heartbeats").env("HEARTBEAT_INTERVAL_MS").argParser(positiveInteger))
    .addOption(
      new Option("--shutdown-grace <seconds>", "on SIGTERM, how long running tasks may finish before they are aborted and released: keep it under your platform's kill timeout (default 25)")
        .env("SHUTDOWN_GRACE_SECONDS")
        .argParser(integerFrom(0, 2_147_483)),
    )
    // taskpool dev's staged crash: a worker that stops (as on SIGTERM) when the process that started it ends.
    .addOption(new Option("--exit-with-parent").hideHelp())
    .addOption(dbOption())
    .addOption(urlOption())
    .addOption(apiKeyOption())
    .addOption(schemaOption())
    .action(async (opts) => {
      const loaded = await loadHandlers(opts.handlers);
      const roles = (opts.role ?? Object.keys(loaded).join(",")).split(",").filter(Boolean);
      // --role picks some of one module's handlers for this process, as examples/dispensary-crawl splits
      // them over machines: the others are left out on purpose, not worth the library's warning at each
      // start. A role with no handler is still refused by the worker.
      const handlers = opts.role === undefined ? loaded : Object.fromEntries(Object.entries(loaded).filter(([type]) => roles.includes(type)));
      // Before the pool: a bad LOG_LEVEL is refused without creating or migrating the database.
      const logger = serviceLogger();
      const pool = await openPool(opts);
      const worker = pool.worker({
        roles,
        handlers,
        concurrency: opts.concurrency,
        workerId: opts.id,
        pollIntervalMs: opts.pollInterval,
        heartbeatIntervalMs: opts.heartbeatInterval,
        shutdownGraceMs: opts.shutdownGrace === undefined ? undefined : opts.shutdownGrace * 1000,
        handleSignals: true,
        // JSON lines on stdout; LOG_LEVEL=debug adds a line per task claimed and completed.
        logger,
      });
      if (opts.exitWithParent) {
        // The parent's end closes the IPC channel it gave: SIGKILLed, it could not stop this worker itself.
        // Heard from before the start: a parent gone during it would otherwise leave this worker running.
        if (!process.connected) process.exit(0);
        process.once("disconnect", () => process.kill(process.pid, "SIGTERM"));
      }
      await worker.start();
    });
}
