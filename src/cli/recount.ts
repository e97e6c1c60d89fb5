import type { Command } from "commander";
import { recountNotOverHttp } from "../client/errors.js";
import type { RecountChange, RecountResult } from "../core/recount.js";
import { addDatabaseOnlyOptions, withPool } from "./database.js";
import { type Column, emit, formatTable, jsonOption } from "./table.js";

const CHANGE_COLUMNS: Column<RecountChange>[] = [
  { header: "task type", value: (c) => c.taskType },
  { header: "before", value: (c) => c.before },
  { header: "after", value: (c) => c.after },
  { header: "difference", value: (c) => c.after - c.before },
];

function showRecount(result: RecountResult): string[] {
  const types = `${result.taskTypes} task ${result.taskTypes === 1 ? "type" : "types"}`;
  if (result.changed.length === 0) return [`The completed counts of ${types} match their completed tasks: nothing to change`];
  const wrong = `${result.changed.length} of ${types}`;
  return [
    ...formatTable(CHANGE_COLUMNS, result.changed),
    "",
    result.dryRun ? `Dry run: the completed counts of ${wrong} would be set to their completed tasks; nothing was changed` : `Set the completed counts of ${wrong} to their completed tasks`,
  ];
}

export function recountCommand(program: Command): void {
  const command = program
    .command("recount")
    .description("set the completed counts (status, /metrics, the dashboard) to the completed tasks, after processes of an earlier version left them wrong; safe while workers run")
    .option("--dry-run", "show what would change, and change nothing")
    .addOption(jsonOption())
    .addHelpText(
      "after",
      "\nIt reads every completed task. The throughput figures per minute are not\nrecounted (docs/upgrading.md says why).\n\nExample:\n  $ taskpool recount --db postgres://… --dry-run\n  $ taskpool recount --db postgres://… --schema taskpool",
    );
  addDatabaseOnlyOptions(command, (server) => `${recountNotOverHttp().message}, not ${server}`).action((opts: { db: string; schema?: string; dryRun?: boolean; json?: boolean }) =>
    withPool(opts, async (pool) => {
      const result = await pool.recount({ dryRun: opts.dryRun === true });
      emit(opts.json, result, () => showRecount(result));
    }),
  );
}
