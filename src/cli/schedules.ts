import { readFileSync } from "node:fs";
import { InvalidArgumentError, Option } from "commander";
import { counted } from "../core/counted.js";
import { ValidationError } from "../core/errors.js";
import { MISSED_TICK_POLICIES, type ScheduleDefinition, type ScheduleRecord } from "../core/schedule.js";
import type { JsonObject } from "../core/task.js";
import { type TaskpoolCommand, withPool } from "./database.js";
import { namedAsFlags } from "./errors.js";
import { exactIntegers, integer, positiveInteger } from "./parse.js";
import { type Column, emit, formatTable, jsonOption } from "./table.js";

const fanOutText = (s: ScheduleRecord) => {
  if (!s.fanOut) return null;
  const source = s.fanOut.keys ? `${s.fanOut.keys.length} keys` : `keys in ${s.fanOut.fromResults?.schedule ?? s.name}.${s.fanOut.fromResults?.field}`;
  return (s.fanOut.batches ?? 1) > 1 ? `${source} / ${s.fanOut.batches} batches` : source;
};

const COLUMNS: Column<ScheduleRecord>[] = [
  { header: "name", value: (s) => s.name },
  { header: "task type", value: (s) => s.taskType },
  { header: "cron", value: (s) => (s.timezone === "UTC" ? s.cron : `${s.cron} (${s.timezone})`) },
  { header: "state", value: (s) => (s.enabled ? "running" : "paused") },
  { header: "fan-out", value: fanOutText },
  { header: "next run", value: (s) => s.nextRunAt },
  { header: "last run", value: (s) => s.lastRunAt },
  { header: "last result", value: (s) => (s.lastResult === null ? null : (s.lastResult.error ?? s.lastResult.message)) },
];

/** Which schedule, in a line. */
const identity = (s: ScheduleRecord) => `${s.name} (${s.taskType}, ${s.cron}${s.timezone === "UTC" ? "" : ` ${s.timezone}`})`;

/** One schedule in a line: what an action changed. */
const summary = (s: ScheduleRecord) => `${identity(s)}: ${s.enabled ? `next run ${s.nextRunAt?.toISOString() ?? "none"}` : "paused"}`;

/**
 * `1,2,x-9` → [1, 2, "x-9"]: whole numbers become integers, as a JSON list would hold them. Only those
 * that read back as written: `007` or `-0` is a string, or the key (a store's id, say) would change.
 */
function keyList(value: string): (string | number)[] {
  const keys = value.split(",").map((k) => k.trim()).filter((k) => k !== "");
  if (keys.length === 0) throw new InvalidArgumentError("expected keys separated by commas, e.g. 1,2,3");
  return keys.map((k) => (Number.isSafeInteger(Number(k)) && String(Number(k)) === k ? Number(k) : k));
}

/** `discovery:newStoreIds` (another schedule's results) or `newStoreIds` (this schedule's). */
function resultsQuery(value: string): { schedule?: string; field: string } {
  const at = value.indexOf(":");
  return at < 0 ? { field: value } : { schedule: value.slice(0, at), field: value.slice(at + 1) };
}

function jsonObject(value: string): JsonObject {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (error) {
    throw new InvalidArgumentError(`not valid JSON (${(error as Error).message}); quote it for the shell, e.g. '{"full": true}'`);
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new InvalidArgumentError(`expected a JSON object, e.g. '{"full": true}'`);
  return exactIntegers(value, parsed as JsonObject);
}

/** The option that sets each field of a definition (commander's name for it, then as typed): a refusal names the flag typed. */
const FLAGS: Readonly<Record<string, readonly [option: string, flag: string]>> = {
  taskType: ["type", "--type"],
  cron: ["cron", "--cron"],
  timezone: ["timezone", "--timezone"],
  params: ["params", "--params"],
  concurrencyKey: ["concurrencyKey", "--concurrency-key"],
  uniqueKey: ["uniqueKey", "--unique-key"],
  priority: ["priority", "--priority"],
  missedTicks: ["missedTicks", "--missed-ticks"],
  "fanOut.keys": ["keys", "--keys"],
  "fanOut.fromResults": ["fromResults", "--from-results"],
  "fanOut.fromResults.schedule": ["fromResults", "--from-results"],
  "fanOut.batches": ["batches", "--batches"],
  "fanOut.batchIntervalSeconds": ["batchInterval", "--batch-interval"],
};

/** The flags typed, by the field each sets: a field that came from --file keeps its own name. */
const flagsTyped = (opts: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(FLAGS).filter(([, [option]]) => opts[option] !== undefined).map(([field, [, flag]]) => [field, flag]));

/** The definition the options describe, over the one in --file if given. */
function definitionOf(name: string, opts: Record<string, unknown>): ScheduleDefinition {
  let base: Partial<ScheduleDefinition> = {};
  if (typeof opts.file === "string") {
    let text: string;
    try {
      text = readFileSync(opts.file, "utf8");
      base = JSON.parse(text);
    } catch (error) {
      throw new InvalidArgumentError(`cannot read a JSON schedule definition from ${opts.file}: ${(error as Error).message}`);
    }
    exactIntegers(text, base);
  }
  // A key source given as a flag replaces the file's, whichever that is (the flags override the file).
  const fileFanOut =
    base.fanOut && (opts.keys || opts.fromResults) ? Object.fromEntries(Object.entries(base.fanOut).filter(([field]) => field !== "keys" && field !== "fromResults")) : base.fanOut;
  const fanOut = opts.keys || opts.fromResults || opts.batches || opts.batchInterval
    ? {
        ...fileFanOut,
        ...(opts.keys ? { keys: opts.keys as (string | number)[] } : {}),
        ...(opts.fromResults ? { fromResults: opts.fromResults as { field: string } } : {}),
        ...(opts.batches ? { batches: opts.batches as number } : {}),
        ...(opts.batchInterval ? { batchIntervalSeconds: opts.batchInterval as number } : {}),
      }
    : base.fanOut;
  // One source of keys: refused here in the flags' words, where the library's speaks of keys and fromResults.
  if (fanOut && (fanOut.keys === undefined) === (fanOut.fromResults === undefined)) {
    const file = typeof opts.file === "string" ? ` (or "keys" or "fromResults" in the fanOut of its --file definition)` : "";
    throw new InvalidArgumentError(
      fanOut.keys === undefined
        ? `--batches and --batch-interval spread a fan-out's keys: give them with --keys <list> or --from-results <[schedule:]field>${file}`
        : `a fan-out takes its keys from --keys or from --from-results, not both${file}`,
    );
  }
  const given = {
    taskType: opts.type,
    cron: opts.cron,
    timezone: opts.timezone,
    params: opts.params,
    concurrencyKey: opts.concurrencyKey,
    uniqueKey: opts.uniqueKey,
    priority: opts.priority,
    missedTicks: opts.missedTicks,
    enabled: opts.paused ? false : undefined,
  };
  const set = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined));
  const definition = { ...base, ...set, name, ...(fanOut ? { fanOut } : {}) } as ScheduleDefinition;
  // Refused here as the option it takes: the library's refusal names the field ("taskType: Expected required property").
  for (const [field, option] of [["taskType", "--type <task-type>"], ["cron", "--cron <expression>"]] as const) {
    if (definition[field] === undefined) throw new InvalidArgumentError(`schedules add needs ${option} (or "${field}" in its --file definition)`);
  }
  return definition;
}

export function schedulesCommand(program: TaskpoolCommand): void {
  const schedules = program.command("schedules").description("recurring schedules: cron in a time zone, fanned out over keys in staggered batches");
  schedules
    .command("list")
    .description("every schedule with its next run, last run and last result")
    .addOption(jsonOption())
    .poolOptions()
    .addHelpText("after", "\nExample:\n  $ taskpool schedules list\n  $ taskpool schedules list --json | jq '.[] | {name, nextRunAt, lastResult}'")
    .action((opts) =>
      withPool(opts, async (pool) => {
        const all = await pool.schedules.list();
        emit(opts.json, all, () => (all.length === 0 ? ["No schedules (taskpool schedules add <name> --type T --cron EXPR makes one)"] : formatTable(COLUMNS, all)));
      }),
    );
  schedules
    .command("add <name>")
    .description("create a schedule, or update the one of that name (a paused one stays paused unless --paused is left out of a new one)")
    .option("--type <task-type>", "the task type each run creates")
    .option("--cron <expression>", 'when it runs: 5 fields (minute hour day month weekday), e.g. "0 */4 * * *"; 6 with seconds first')
    .option("--timezone <zone>", "IANA time zone the cron expression is read in (default UTC)")
    .option("--params <json>", "the tasks' params, a JSON object", jsonObject)
    .option("--keys <list>", "fan out: one task per key, comma-separated (params get {key})", keyList)
    .option("--from-results <[schedule:]field>", "fan out over the keys in this field of the results of a schedule's last run", resultsQuery)
    .option("--batches <n>", "spread the keys over n staggered batches", positiveInteger)
    .option("--batch-interval <seconds>", "time between batches (default: the time to the next tick, shared out)", positiveInteger)
    .option("--concurrency-key <template>", "at most one active task per key, e.g. store:{key}")
    .option("--unique-key <template>", "make no task of a key whose earlier task is still pending, e.g. resync:{key}")
    .option("--priority <n>", "the tasks' priority", integer)
    .addOption(new Option("--missed-ticks <policy>", "when the coordinator was down across ticks: skip them, or run once now").choices(MISSED_TICK_POLICIES))
    .option("--paused", "create it paused")
    .option("--file <definition.json>", "read the definition from a JSON file (the options above override it)")
    .addOption(jsonOption())
    .poolOptions()
    .addHelpText(
      "after",
      "\nExample (seed 004's resync: every store once a day, in 6 batches one every 4 hours):\n" +
        '  $ taskpool schedules add product_resync --type product_resync --cron "0 0 * * *" --timezone America/Los_Angeles \\\n' +
        "      --keys 101,102,103,104,105,106 --batches 6 --concurrency-key 'store:{key}' --unique-key 'resync:{key}'",
    )
    .action(async (name: string, opts) => {
      // Before the pool: a definition refused opens (and creates) nothing.
      const definition = definitionOf(name, opts);
      const { checkScheduleInput, DEFAULT_LIMITS } = await import("../api/checked-store.js");
      try {
        checkScheduleInput(definition, DEFAULT_LIMITS);
      } catch (error) {
        throw error instanceof ValidationError ? namedAsFlags(error, flagsTyped(opts)) : error;
      }
      return withPool(opts, async (pool) => {
        const { schedule, created } = await pool.protocol.saveSchedule(definition).catch((error: unknown) =>
          Promise.reject(error instanceof ValidationError ? namedAsFlags(error, flagsTyped(opts)) : error),
        );
        emit(opts.json, schedule, () => [`${created ? "Created" : "Updated"} schedule ${summary(schedule)}`]);
      }, {}, true);
    });
  const act = (verb: "pause" | "resume" | "remove", description: string, done: string) => {
    const command = schedules
      .command(`${verb} <name>`)
      .description(description)
      .addOption(jsonOption())
      .poolOptions()
      .addHelpText("after", `\nExample:\n  $ taskpool schedules ${verb} product_resync${verb === "resume" ? "" : " --cancel-pending"}`);
    if (verb !== "resume") command.option("--cancel-pending", "also cancel the tasks its runs made that are still pending (paused first, so no run is made meanwhile)");
    command.action((name: string, opts) =>
      withPool(opts, async (pool) => {
        let cancelled: number[] | undefined;
        if (opts.cancelPending) {
          await pool.schedules.pause(name);
          cancelled = await pool.schedules.cancelPending(name);
        }
        const schedule = await pool.schedules[verb](name);
        // A removed schedule has no next run to speak of.
        const lines = [`${done} schedule ${verb === "remove" ? identity(schedule) : summary(schedule)}`];
        if (cancelled) lines.push(cancelledLine(name, cancelled));
        emit(opts.json, cancelled ? { ...schedule, cancelledTaskIds: cancelled } : schedule, () => lines);
      }),
    );
  };
  act("pause", "stop firing a schedule until it is resumed", "Paused");
  act("resume", "fire a paused schedule again, from its next tick after now (paused ticks are not caught up)", "Resumed");
  act("remove", "delete a schedule and its tick history (the tasks it made stay, unless --cancel-pending)", "Removed");
  schedules
    .command("cancel-pending <name>")
    .addHelpText("after", "\nExample:\n  $ taskpool schedules cancel-pending product_resync")
    .description("cancel the tasks a schedule's runs made that are still pending (a fan-out's later batches, due tasks not yet claimed); tasks workers hold run on")
    .addOption(jsonOption())
    .poolOptions()
    .addHelpText("after", "\nTo stop a schedule and its work: `taskpool schedules pause NAME --cancel-pending` (or `remove NAME --cancel-pending`).")
    .action((name: string, opts) =>
      withPool(opts, async (pool) => {
        const cancelled = await pool.schedules.cancelPending(name);
        emit(opts.json, { cancelled }, () => [cancelledLine(name, cancelled)]);
      }),
    );
}

/** "Cancelled 3 pending tasks of schedule product_resync: 12, 13, 14", the ids cut short past 20. */
function cancelledLine(name: string, ids: number[]): string {
  const shown = ids.length > 20 ? `${ids.slice(0, 20).join(", ")} and ${ids.length - 20} more` : ids.join(", ");
  return `Cancelled ${counted(ids.length, "pending task")} of schedule ${name}${ids.length > 0 ? `: ${shown}` : ""}`;
}
