import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { type Command, InvalidArgumentError } from "commander";
import { connect } from "../taskpool.js";
import type { Handler } from "../worker/options.js";
import { dbOption, schemaOption } from "./database.js";
import { positiveInteger } from "./parse.js";

export function workerCommand(program: Command): void {
  program
    .command("worker")
    .description("run a worker with the handlers a module exports (export const handlers = { task_type: async (params, ctx) => … })")
    .requiredOption("--handlers <module>", "path of an ES module exporting `handlers`")
    .option("--role <roles>", "comma-separated task types to claim (default: $WORKER_ROLE, else every handler)")
    .option("--concurrency <n>", "tasks at once", positiveInteger, 1)
    .option("--id <workerId>", "worker id (default: $WORKER_ID, else generated)")
    .addOption(dbOption())
    .addOption(schemaOption())
    .action(async (opts) => {
      const module = await import(pathToFileURL(resolve(opts.handlers)).href).catch((error: Error) => {
        throw new InvalidArgumentError(`cannot load handlers from ${opts.handlers}: ${error.message}`);
      });
      const handlers = module.handlers as Record<string, Handler> | undefined;
      if (!handlers || typeof handlers !== "object") throw new InvalidArgumentError(`${opts.handlers} does not export "handlers"`);
      const roles = (opts.role ?? process.env.WORKER_ROLE ?? Object.keys(handlers).join(",")).split(",").filter(Boolean);
      const pool = await connect(opts.db, { schema: opts.schema });
      const worker = pool.worker({ roles, handlers, concurrency: opts.concurrency, workerId: opts.id });
      await worker.start();
    });
}
