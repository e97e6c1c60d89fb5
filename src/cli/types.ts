import { readFileSync } from "node:fs";
import { InvalidArgumentError } from "commander";
import type { TaskTypeDefinition, TaskTypeRecord } from "../core/task-type.js";
import { type TaskpoolCommand, withPool } from "./database.js";
import { exactIntegers } from "./parse.js";
import { cell, emit, jsonOption } from "./table.js";

const summary = (t: TaskTypeRecord) =>
  `${t.name} v${t.version}  priority ${t.priority}, ${t.maxAttempts} attempts, recovery ${t.recoveryPolicy}` +
  `${t.timeoutSeconds === null ? "" : `, timeout ${t.timeoutSeconds} s`}${t.maxRunning === null ? "" : `, at most ${t.maxRunning} running`}` +
  // The description is any producer's text: escapes in it would act on the operator's terminal.
  `${t.paramsSchema === null ? "" : ", params schema"}${t.description ? ` — ${cell(t.description)}` : ""}`;

/** The names a mistyped one may have meant, and where to see them all. */
function registered(names: string[]): string {
  if (names.length === 0) return "no type is registered (taskpool types register <file> registers one)";
  const shown = names.length > 20 ? `${names.slice(0, 20).join(", ")} and ${names.length - 20} more` : names.join(", ");
  return `registered: ${shown} (taskpool types list shows them)`;
}

export function typesCommand(program: TaskpoolCommand): void {
  const types = program.command("types").description("the task type registry: versions, params schemas, defaults and policy");
  types
    .command("list")
    .addHelpText("after", "\nExample:\n  $ taskpool types list\n  $ taskpool types list --json | jq '.[].name'")
    .description("the latest version of every registered type (--json: the records, params schemas included)")
    .addOption(jsonOption())
    .poolOptions()
    .action((opts) =>
      withPool(opts, async (pool) => {
        const all = await pool.taskTypes();
        emit(opts.json, all, () => (all.length === 0 ? ["No registered task types (unregistered types run on the built-in defaults)"] : all.map(summary)));
      }),
    );
  types
    .command("show <name>")
    .addHelpText("after", "\nExample:\n  $ taskpool types show product_resync")
    .description("every version of one type, as JSON")
    .poolOptions()
    .action((name: string, opts) =>
      withPool(opts, async (pool) => {
        const versions = await pool.taskTypeVersions(name);
        if (versions.length === 0) throw new InvalidArgumentError(`task type "${name}" is not registered; ${registered((await pool.taskTypes()).map((t) => t.name))}`);
        console.log(JSON.stringify(versions, null, 2));
      }),
    );
  types
    .command("register <file>")
    .addHelpText("after", "\nExample:\n  $ echo '{\"name\":\"product_resync\",\"maxAttempts\":5,\"paramsSchema\":{\"type\":\"object\",\"properties\":{\"storeId\":{\"type\":\"integer\"}},\"required\":[\"storeId\"]}}' > resync.json\n  $ taskpool types register resync.json")
    .description("register a definition from a JSON file ({ name, paramsSchema?, priority?, maxAttempts?, backoff?, timeoutSeconds?, recoveryPolicy?, maxRunning? })")
    .poolOptions()
    .action(async (file: string, opts) => {
      let definition: TaskTypeDefinition;
      let text: string;
      try {
        text = readFileSync(file, "utf8");
        definition = JSON.parse(text);
      } catch (error) {
        throw new InvalidArgumentError(`cannot read a JSON definition from ${file}: ${(error as Error).message}`);
      }
      exactIntegers(text, definition);
      // Before the pool: a definition refused opens (and creates) nothing.
      const { checkTaskTypeDefinition, DEFAULT_LIMITS } = await import("../api/checked-store.js");
      checkTaskTypeDefinition(definition, DEFAULT_LIMITS);
      return withPool(opts, async (pool) => {
        const { taskType, created } = await pool.protocol.registerTaskType(definition);
        console.log(created ? `Registered ${summary(taskType)}` : `Unchanged: ${summary(taskType)}`);
      }, {}, true);
    });
}
