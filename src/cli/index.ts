import { Command, CommanderError } from "commander";
import { TaskpoolError } from "../core/errors.js";
import { VERSION } from "../version.js";
import { capacityCommand } from "./capacity.js";
import { coordinatorCommand } from "./coordinator.js";
import { refuseMisplacedSchema, settleTarget, TaskpoolCommand, usesSchema } from "./database.js";
import { devCommand } from "./dev.js";
import { enqueueCommand } from "./enqueue.js";
import { CLI_VOCABULARY, CliError, explainAuthRefusal, explainServerTimeout } from "./errors.js";
import { keysCommand } from "./keys.js";
import { migrateCommand } from "./migrate.js";
import { reassignmentsCommand } from "./reassignments.js";
import { recountCommand } from "./recount.js";
import { schedulesCommand } from "./schedules.js";
import { serveCommand } from "./serve.js";
import { statusCommand } from "./status.js";
import { watchStdout } from "./stdout.js";
import { tasksCommand } from "./tasks.js";
import { typesCommand } from "./types.js";
import { workerCommand } from "./worker.js";
import { workersCommand } from "./workers.js";

// A reader that stops early (`taskpool status | head -1`) closes the pipe: unheard, the write error
// crashed the command with a stack trace.
watchStdout();

const program = new TaskpoolCommand("taskpool")
  .version(VERSION)
  .description("a task queue and worker coordinator on SQLite or PostgreSQL")
  .option("--verbose", "print the stack trace of an unexpected error");
for (const add of [devCommand, workerCommand, coordinatorCommand, serveCommand, keysCommand, migrateCommand, enqueueCommand, statusCommand, typesCommand, tasksCommand, workersCommand, capacityCommand, reassignmentsCommand, schedulesCommand, recountCommand]) add(program);

/**
 * Commander's own refusals (an unknown command or option, a missing or extra argument, a bad value)
 * in the form of the CLI's other errors: one line, "taskpool: …", its "(Did you mean …?)" on that
 * line, and the help to read when it says nothing of how to fix it ("unknown command 'frob'").
 */
function refuseInOneLine(command: Command, name: string): void {
  command.configureOutput({
    outputError: (text, write) => {
      const [what, suggestion] = text.replace(/^error: /, "").trim().split("\n");
      const fix = suggestion?.replace(/^\(Did you mean (.*)\)$/, "; did you mean $1") ?? (/^(unknown|missing|too many|required)|argument missing$/.test(what) ? `; see \`${name} --help\`` : "");
      write(`taskpool: ${fix === "" ? what : what.replace(/\.$/, "")}${fix}\n`);
    },
  });
  for (const sub of command.commands) refuseInOneLine(sub, `${name} ${sub.name()}`);
}
refuseInOneLine(program, "taskpool");

/** The command that ran: a refusal of its key's scope, or a timeout's advice on where to look, names it. */
let acting: Command | undefined;

// An empty variable is most often a missing substitution (`TASKPOOL_DATABASE_URL=${DB_URL}` with
// DB_URL unset): taken as the value, it was refused as the URL "", and treated as unset it would
// quietly put the work in ./taskpool.db.
program.hook("preAction", (_, command) => {
  acting = command;
  settleTarget(command);
  refuseMisplacedSchema(command);
  for (const option of command.options) {
    const name = option.attributeName();
    // TASKPOOL_SCHEMA is left alone where no schema is read (a SQLite file, a server), empty or not.
    if (name === "schema" && !usesSchema(command)) continue;
    if (option.envVar && command.getOptionValueSource(name) === "env" && command.getOptionValue(name) === "") {
      throw new CliError(`${option.envVar} is set but empty: set it to what ${option.flags} takes, or unset it (or pass ${option.long} …, which wins over it)`);
    }
  }
});

program.parseAsync().catch((thrown: unknown) => {
  // One line for newcomers: what failed and how to fix it. The stack only on request.
  const error = explainServerTimeout(explainAuthRefusal(thrown, acting && pathOf(acting)), acting && { what: "the change was made", check: listingOf(acting) });
  const known = error instanceof TaskpoolError || error instanceof CommanderError;
  const message = error instanceof TaskpoolError ? error.messageIn(CLI_VOCABULARY) : error instanceof Error ? error.message : String(error);
  console.error(`taskpool: ${message}`);
  if (program.opts().verbose && thrown instanceof Error) console.error(thrown.stack);
  else if (!known) console.error("(run again with --verbose for the stack trace)");
  process.exit(1);
});

/** Where a command's changes show: its group's list (`taskpool schedules list` for `schedules pause`), or the group itself (`taskpool workers`). */
function listingOf(command: Command): string {
  let group = command;
  while (group.parent && group.parent !== program) group = group.parent;
  return group.commands.some((c) => c.name() === "list") ? `taskpool ${group.name()} list` : `taskpool ${group.name()}`;
}

/** A command as typed after `taskpool`: `workers shutdown`. */
function pathOf(command: Command): string {
  return command.parent && command.parent !== program ? `${pathOf(command.parent)} ${command.name()}` : command.name();
}
