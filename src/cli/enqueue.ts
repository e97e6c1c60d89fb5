import { type Command, InvalidArgumentError } from "commander";
import { dbOption, schemaOption, withStore } from "./database.js";
import { integer } from "./parse.js";

export function enqueueCommand(program: Command): void {
  program
    .command("enqueue <taskType> [params]")
    .description("put one task in the pool; params is a JSON object, e.g. '{\"storeId\":42}'")
    .option("--priority <n>", "higher runs first", integer)
    .option("--max-attempts <n>", "attempts before it fails for good", integer)
    .option("--concurrency-key <key>", "at most one claimed/running task per key")
    .option("--unique-key <key>", "return the pending task holding this key instead of adding another")
    .option("--delay <seconds>", "not claimable before this many seconds from now", integer)
    .addOption(dbOption())
    .addOption(schemaOption())
    .action(async (taskType: string, params: string | undefined, opts) => {
      let parsed: unknown;
      try {
        parsed = params === undefined ? {} : JSON.parse(params);
      } catch {
        throw new InvalidArgumentError(`params is not valid JSON: ${params}`);
      }
      await withStore(opts, async (store) => {
        const { task, created } = await store.enqueue({
          taskType,
          params: parsed as Record<string, never>,
          priority: opts.priority,
          maxAttempts: opts.maxAttempts,
          concurrencyKey: opts.concurrencyKey,
          uniqueKey: opts.uniqueKey,
          scheduledFor: opts.delay === undefined ? undefined : new Date(Date.now() + opts.delay * 1000),
        });
        console.log(created ? `Enqueued task ${task.id} (${task.taskType})` : `Task ${task.id} already pending with unique key ${task.uniqueKey}`);
      });
    });
}
