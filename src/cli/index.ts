import { Command, CommanderError } from "commander";
import { TaskpoolError } from "../core/errors.js";
import { VERSION } from "../version.js";
import { coordinatorCommand } from "./coordinator.js";
import { devCommand } from "./dev.js";
import { enqueueCommand } from "./enqueue.js";
import { migrateCommand } from "./migrate.js";
import { statusCommand } from "./status.js";
import { typesCommand } from "./types.js";
import { workerCommand } from "./worker.js";

const program = new Command("taskpool").version(VERSION).description("a task queue and worker coordinator on SQLite or PostgreSQL");
for (const add of [devCommand, workerCommand, coordinatorCommand, migrateCommand, enqueueCommand, statusCommand, typesCommand]) add(program);

program.parseAsync().catch((error: unknown) => {
  // Our own errors already say what was wrong and how to fix it; anything else is a bug worth a stack.
  console.error(error instanceof TaskpoolError || error instanceof CommanderError ? `taskpool: ${error.message}` : error);
  process.exit(1);
});
