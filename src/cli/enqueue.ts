import { InvalidArgumentError } from "commander";
import type { Taskpool } from "../api/taskpool.js";
import type { EnqueueInput, JsonObject, Task } from "../core/task.js";
import type { EnqueueResult } from "../store/store.js";
import { requireRegisteredOption, requiresRegistered, type TaskpoolCommand, withPool } from "./database.js";
import { ValidationError } from "../core/errors.js";
import { type EnqueueCallOptions, EnqueueCallOptionsSchema } from "../core/schemas.js";
import { validate } from "../core/validation.js";
import { explainServerTimeout, namedAsFlags } from "./errors.js";
import { exactIntegers, integer } from "./parse.js";
import { MOST_TASKS_PER_FILE, namedByLine, readParamsFile } from "./params-file.js";
import { jsonOption } from "./table.js";

/** The flag that sets each field of the task: a refusal names the flag the operator typed. */
const FLAGS = {
  priority: "--priority",
  maxAttempts: "--max-attempts",
  concurrencyKey: "--concurrency-key",
  uniqueKey: "--unique-key",
  delaySeconds: "--delay",
  idempotencyKey: "--idempotency-key",
};

export function enqueueCommand(program: TaskpoolCommand): void {
  program
    .command("enqueue <taskType> [params]")
    .addHelpText("after", "\nExample:\n  $ taskpool enqueue product_resync '{\"storeId\":42}' --priority 5\n  $ taskpool enqueue product_resync --file stores.jsonl --idempotency-key stores-2026-11-29")
    .description("put a task in the pool; params is a JSON object, e.g. '{\"storeId\":42}' (--file: many tasks)")
    .option("--priority <n>", "higher runs first", integer)
    .option("--max-attempts <n>", "attempts before it fails for good", integer)
    .option("--concurrency-key <key>", "at most one claimed/running task per key")
    .option("--unique-key <key>", "return the pending task holding this key instead of adding another")
    .option("--delay <seconds>", "not claimable before this many seconds from now", integer)
    .option("--idempotency-key <key>", "the same command repeated with the same key (within 24 hours) creates the task once and prints it again: safe to repeat after a timeout")
    .option("--file <path>", `many tasks in one call, all or nothing: one params object per line of the file (JSON Lines; - reads stdin), at most ${MOST_TASKS_PER_FILE}; the other options apply to each`)
    .addOption(requireRegisteredOption("refuse a task type that was never registered (catches typos)"))
    .poolOptions()
    .addOption(jsonOption())
    .action(async (taskType: string, params: string | undefined, opts) => {
      if (opts.file !== undefined && params !== undefined) throw new InvalidArgumentError("give params or --file, not both: with --file, each line of the file is one task's params");
      // One unique key on many tasks would enqueue the first and answer its task for the rest.
      if (opts.file !== undefined && opts.uniqueKey !== undefined) throw new InvalidArgumentError("--unique-key names one task; with --file, enqueue through the library or POST /api/tasks/batch to give each task its own key");
      const many = opts.file === undefined ? null : await readParamsFile(opts.file);
      const one = many === null ? parseParams(params) : null;
      // Checked as the library and the server check it, before anything is opened: a bad key creates no database either.
      const key: string | undefined = opts.idempotencyKey;
      const call: EnqueueCallOptions = key === undefined ? {} : { idempotencyKey: key };
      try {
        validate(EnqueueCallOptionsSchema, call, "options");
      } catch (error) {
        throw error instanceof ValidationError ? namedAsFlags(error, FLAGS) : error;
      }
      const input = (taskParams: JsonObject): EnqueueInput => ({
        taskType,
        params: taskParams,
        priority: opts.priority,
        maxAttempts: opts.maxAttempts,
        concurrencyKey: opts.concurrencyKey,
        uniqueKey: opts.uniqueKey,
        // Counted by the store's clock: this host's may be off the database's.
        delaySeconds: opts.delay,
      });
      // The type is every line's, as the flags are: a refusal of it names no line (it named line 1).
      const explained = (tasks: string) => (error: unknown) =>
        Promise.reject(
          error instanceof ValidationError
            ? namedAsFlags(many === null ? error : namedByLine(error, many, [...Object.keys(FLAGS), "taskType"]), FLAGS)
            : explainServerTimeout(error, { what: `${tasks} enqueued`, check: `taskpool tasks list --type ${taskType}`, keyed: { flag: "--idempotency-key", key } }),
        );
      const requireRegistered = requiresRegistered(opts.requireRegistered);
      // The library's checks that need no database, before one is opened: a refused task creates none.
      const { checkNewTask, checkNewTasks, DEFAULT_LIMITS } = await import("../api/checked-store.js");
      try {
        if (many === null) checkNewTask(input(one!), DEFAULT_LIMITS);
        else checkNewTasks(many.params.map(input), DEFAULT_LIMITS);
      } catch (error) {
        await explained(many === null ? "the task was" : "the tasks were")(error);
      }
      await withPool(
        opts,
        async (pool) => {
          let task: Task;
          if (many !== null) {
            const answers = await pool.protocol.enqueueMany(many.params.map(input), call).catch(explained("the tasks were"));
            task = answers[0].task;
            if (opts.json) console.log(JSON.stringify(answers, null, 2));
            else console.log(manyEnqueued(answers, taskType, key));
          } else {
            const answer = await pool.protocol.enqueue(input(one!), call).catch(explained("the task was"));
            task = answer.task;
            if (opts.json) console.log(JSON.stringify(answer, null, 2));
            else console.log(oneEnqueued(answer, key));
          }
          // A task the earlier call made that has finished since waits for no worker.
          const warning = task.status === "pending" ? await nobodyServes(pool, task) : null;
          if (warning) console.error(`warning: ${warning}`);
        },
        { requireRegistered },
        true,
      );
    });
}

/** The command line's params: a JSON object, {} when left out. */
function parseParams(params: string | undefined): JsonObject {
  if (params === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(params);
  } catch (error) {
    // Unquoted, the shell strips the JSON's own quotes: {"storeId":42} arrives as {storeId:42}.
    throw new InvalidArgumentError(`params is not valid JSON (${(error as Error).message}): ${params}; quote it for the shell, e.g. '{"storeId":42}'`);
  }
  return exactIntegers(params, parsed, "params") as JsonObject;
}

function oneEnqueued({ task, created, replayed }: EnqueueResult, key: string | undefined): string {
  if (created) return `Enqueued task ${task.id} (${task.taskType})`;
  // The first call's task, as it is now: it may have run since.
  if (replayed) return `Task ${task.id} (${task.taskType}) already enqueued by an earlier call with idempotency key "${key}": nothing new created; it is ${task.status} now`;
  return `Task ${task.id} already pending with unique key ${task.uniqueKey}`;
}

function manyEnqueued(answers: EnqueueResult[], taskType: string, key: string | undefined): string {
  const ids = answers.map((a) => a.task.id);
  const range = ids.length === 1 ? `task ${ids[0]}` : `tasks ${Math.min(...ids)} to ${Math.max(...ids)}`;
  const tasks = answers.length === 1 ? "1 task" : `${answers.length} tasks`;
  if (answers[0].replayed) return `Enqueued nothing: ${tasks} (${taskType}, ${range}) ${answers.length === 1 ? "was" : "were"} enqueued by an earlier call with idempotency key "${key}"`;
  return `Enqueued ${tasks} (${taskType}): ${range}`;
}

/** Why a task of an unregistered type may wait forever: no registration and no live worker with its role. */
async function nobodyServes(pool: Taskpool, task: Task): Promise<string | null> {
  if (task.taskTypeVersion !== null) return null;
  const { workers } = await pool.workers({ status: "active" });
  if (workers.some((w) => w.status === "active" && w.roles.includes(task.taskType))) return null;
  // Refusing unregistered types is the server's setting when the pool is reached through one.
  const refuse = pool.protocol.remote ? "or start the server with `taskpool serve --require-registered`" : "or pass --require-registered";
  return (
    `task type "${task.taskType}" is not registered and no live worker has that role, so the task waits until one starts. ` +
    `Check the name for a typo, register the type (taskpool types register), ${refuse} to refuse unregistered types.`
  );
}
