/**
 * The rules of recurring schedules, written once above the stores: reading a cron expression in a
 * time zone, deciding what a due schedule fires (missed ticks), and turning one run into tasks
 * (fan-out over keys in staggered batches, the concurrency key template). Stores keep only the SQL:
 * they call these and write the result in one transaction with the tick's unique key.
 *
 * Missed ticks. A schedule is due when its next_run_at has passed. The latest cron time not after
 * "now" is the tick to fire; it is on time while it is at most `graceMs` old (the coordinator finds
 * ticks once per sweep, and a new leader takes over within a few sweeps). Anything older was missed
 * because no coordinator ran: `skip` fires nothing and waits for the next tick, `run_once` fires one
 * catch-up run now, keyed at that latest tick, so that every coordinator picks the same key.
 */
import { Cron } from "croner";
import { CronTicks } from "./cron-ticks.js";
import { ValidationError } from "./errors.js";
import type { DiscoveryInput, FanOut, GenerateInput, ResyncInput, ScheduleDefinition } from "./schemas.js";
import { type EnqueueInput, type Json, type JsonObject, LATEST_STORABLE_TIME, MAX_KEY_LENGTH } from "./task.js";
import { counted } from "./counted.js";
import { type NewTaskRules, unregistered } from "./new-task.js";
import type { TaskTypeRecord } from "./task-type.js";

export type { FanOut, FireOptions, GenerateInput, ScheduleDefinition } from "./schemas.js";

/** What to do about ticks no coordinator was there to fire. */
export const MISSED_TICK_POLICIES = ["skip", "run_once"] as const;
export type MissedTickPolicy = (typeof MISSED_TICK_POLICIES)[number];

/** What the scheduler last did with a schedule: fired a run, skipped missed ticks, or failed to make the tasks. */
export interface ScheduleRunResult {
  /** The tick fired (or the latest skipped). */
  tickAt: Date;
  firedAt: Date;
  tasksCreated: number;
  /** Ticks passed over without a run (coordinator down; see missedTicks). */
  skippedTicks: number;
  /** For people: "created 300 tasks in 6 batches", "skipped 3 missed ticks". */
  message: string;
  /** Why no task was made (e.g. params refused by the task type's schema); null when all went well. */
  error: string | null;
}

/** A stored schedule with its defaults resolved and what the scheduler did with it. */
export interface ScheduleRecord {
  name: string;
  taskType: string;
  params: JsonObject;
  cron: string;
  timezone: string;
  enabled: boolean;
  fanOut: FanOut | null;
  concurrencyKey: string | null;
  uniqueKey: string | null;
  priority: number | null;
  missedTicks: MissedTickPolicy;
  /** When it fires next; null while paused. */
  nextRunAt: Date | null;
  /** The tick of its last run; null if it never ran. */
  lastRunAt: Date | null;
  lastResult: ScheduleRunResult | null;
  createdAt: Date;
  updatedAt: Date;
}

/** What saveSchedule did: `created` is false when a schedule of that name was updated. */
export interface SaveScheduleResult {
  schedule: ScheduleRecord;
  created: boolean;
}

/** One schedule a fireDueSchedules pass acted on. */
export interface FiredSchedule {
  name: string;
  /** The tick fired; null when missed ticks were skipped. */
  tickAt: Date | null;
  taskIds: number[];
  skippedTicks: number;
  error: string | null;
}

/** One batch of a fan-out: when it is due and the tasks it holds. */
export interface GeneratedBatch {
  batch: number;
  scheduledFor: Date;
  taskIds: number[];
}

/** What a generation (or one schedule run) created. */
export interface GenerateResult {
  created: number;
  batches: GeneratedBatch[];
  message: string;
}

const DEFAULT_TIMEZONE = "UTC";

/** The expression in its zone, or a ValidationError saying what is wrong with which field. */
export function cronOf(expression: string, timezone: string = DEFAULT_TIMEZONE): Cron {
  try {
    new Intl.DateTimeFormat("en", { timeZone: timezone });
  } catch {
    throw new ValidationError(`Invalid timezone: "${timezone}" is not an IANA time zone; use one such as UTC, Europe/Paris or America/Los_Angeles`, [
      { path: "timezone", message: "not an IANA time zone" },
    ]);
  }
  let cron: Cron;
  try {
    cron = new Cron(expression, { timezone, mode: "5-or-6-parts" });
  } catch (error) {
    const parts = expression.trim().split(/\s+/).length;
    // croner's own count allows 7 parts, which this mode refuses: said in the mode's terms instead.
    const reason = parts < 5 || parts > 6 ? `it has ${parts} part${parts === 1 ? "" : "s"}, not 5 or 6` : (error as Error).message.replace(/^CronPattern: /, "");
    throw new ValidationError(`Invalid cron: "${expression}": ${reason} (5 fields: minute hour day-of-month month day-of-week, e.g. "0 */4 * * *"; or 6 with seconds first)`, [
      { path: "cron", message: reason },
    ]);
  }
  // croner also takes a date for a one-off run: a schedule recurs.
  if (cron.getOnce() !== null) throw new ValidationError(`Invalid cron: "${expression}" is a date, not a recurring expression (e.g. "0 0 * * *" for daily at midnight)`, [{ path: "cron", message: "a date" }]);
  return cron;
}

/** The expression's ticks in its zone, daylight saving time included (see CronTicks). */
export function ticksOf(expression: string, timezone: string = DEFAULT_TIMEZONE): CronTicks {
  return new CronTicks(cronOf(expression, timezone), expression, timezone);
}

/** The first tick strictly after `after`; null when the expression has none (a year in the past). */
export function nextRunAfter(expression: string, timezone: string, after: Date): Date | null {
  return ticksOf(expression, timezone).nextRun(after);
}

/** Checks what the schema cannot: the cron expression and zone, a future tick, one source of fan-out keys, the template. */
export function checkScheduleDefinition(definition: ScheduleDefinition, now: Date): void {
  if (nextRunAfter(definition.cron, definition.timezone ?? DEFAULT_TIMEZONE, now) === null) {
    throw new ValidationError(`Invalid cron: "${definition.cron}" has no tick after ${now.toISOString()}`, [{ path: "cron", message: "never fires" }]);
  }
  checkFanOut(definition);
}

/** The fields that take a `{key}` template: each task's own key made from its fan-out key. */
const KEY_TEMPLATES = ["concurrencyKey", "uniqueKey"] as const;
type KeyTemplates = { [F in (typeof KEY_TEMPLATES)[number]]?: string };

/** One source of keys, no placeholder but `{key}` and only where there are keys to put in it, no `params.key` for them to overwrite, and keys made of each listed key that fit. */
export function checkFanOut(input: { params?: JsonObject; fanOut?: FanOut } & KeyTemplates): void {
  const { params, fanOut } = input;
  if (fanOut && params && Object.hasOwn(params, "key")) {
    throw new ValidationError("Invalid params.key: each task's params get its fan-out key as key, which would replace this value; rename it", [
      { path: "params.key", message: "taken by the fan-out key" },
    ]);
  }
  if (fanOut && (fanOut.keys === undefined) === (fanOut.fromResults === undefined)) {
    throw new ValidationError(
      (v) => `Invalid ${v.field("fanOut")}: give either keys (a list) or ${v.field("fromResults")} (a query of a previous run's results), not both or neither`,
      [{ path: "fanOut", message: (v) => `needs exactly one of keys, ${v.field("fromResults")}` }],
    );
  }
  for (const field of KEY_TEMPLATES) {
    const template = input[field];
    // The template's one placeholder is {key}; anything else in braces ({region}, {keys}) was meant as
    // one, and taken literally it would put every task under the same key, in silence.
    const unknown = template?.match(/\{[^{}]*\}/g)?.find((placeholder) => placeholder !== "{key}");
    if (unknown !== undefined) {
      throw new ValidationError(`Invalid ${field}: "${template}" has ${unknown}, and the only placeholder is {key} (each task's fan-out key); use {key}, or no braces`, [
        { path: field, message: `unknown placeholder ${unknown}` },
      ]);
    }
    if (!fanOut && template?.includes("{key}")) {
      throw new ValidationError(`Invalid ${field}: {key} stands for a fan-out key, and this schedule has no fan-out; add one or write the key out`, [
        { path: field, message: "{key} without a fan-out" },
      ]);
    }
  }
  // 7 and "7" pass uniqueItems, and name one store: two tasks for it every run, under one concurrency key.
  const seen = new Map<string, FanOutKey>();
  for (const [index, key] of (fanOut?.keys ?? []).entries()) {
    const twin = seen.get(String(key));
    if (twin !== undefined) {
      throw new ValidationError(
        (v) => `Invalid ${v.field(`fanOut.keys.${index}`)}: ${JSON.stringify(twin)} and ${JSON.stringify(key)} are one key written twice (the same as text, as {key} puts it in a concurrency key); list it once`,
        [{ path: `fanOut.keys.${index}`, message: "the same key as an earlier one" }],
      );
    }
    seen.set(String(key), key);
    keysOf(input, key);
  }
}

/** A task's concurrency and unique keys, its fan-out key put in the templates; refused when one is longer than a producer's may be. */
function keysOf(templates: KeyTemplates, key: FanOutKey): KeyTemplates {
  const keys: KeyTemplates = {};
  for (const field of KEY_TEMPLATES) {
    const template = templates[field];
    if (template === undefined) continue;
    const made = template.replaceAll("{key}", String(key));
    if (made.length > MAX_KEY_LENGTH) {
      throw new ValidationError(`Invalid ${field}: "${template}" with the key "${key}" is ${made.length} characters long, over ${MAX_KEY_LENGTH}; use a shorter template or shorter keys`, [
        { path: field, message: `over ${MAX_KEY_LENGTH} characters with a key` },
      ]);
    }
    keys[field] = made;
  }
  return keys;
}

/**
 * The schedule another one's fan-out reads its keys from (`fanOut.fromResults.schedule`), when it
 * names one other than itself: it must exist when the schedule is saved, and a run finds it gone if
 * it was removed since.
 */
export function resultsScheduleOf(definition: { name: string; fanOut?: FanOut | null }): string | null {
  const named = definition.fanOut?.fromResults?.schedule;
  return named === undefined || named === definition.name ? null : named;
}

/** `fanOut.fromResults` names a schedule that does not exist: refused when saved (`run` false), a run's error when removed since. */
export function noResultsSchedule(name: string, run = false): ValidationError {
  const field = "fanOut.fromResults.schedule";
  return new ValidationError(
    run
      ? (v) =>
          `Invalid ${v.field(field)}: the schedule "${name}" whose last run's results hold the keys does not exist (removed since this schedule was saved?), so this run made no task; ` +
          `create "${name}" again, or save this schedule reading another schedule's results (or its own: leave schedule out)`
      : (v) =>
          `Invalid ${v.field(field)}: there is no schedule "${name}" whose last run's results could hold the keys; create "${name}" first, ` +
          `correct the name (${v.listing("schedules")} shows them), or leave schedule out to read this schedule's own results`,
    [{ path: field, message: `no schedule "${name}"` }],
  );
}

/** A definition with its defaults, as a store writes it. `existing` keeps an update's state: paused stays paused, an unchanged cron keeps its next tick. */
export function resolveSchedule(definition: ScheduleDefinition, existing: ScheduleRecord | null, now: Date): Omit<ScheduleRecord, "lastRunAt" | "lastResult" | "createdAt" | "updatedAt"> {
  const timezone = definition.timezone ?? DEFAULT_TIMEZONE;
  const enabled = definition.enabled ?? existing?.enabled ?? true;
  const sameTicks = existing !== null && existing.cron === definition.cron && existing.timezone === timezone && existing.nextRunAt !== null;
  return {
    name: definition.name,
    taskType: definition.taskType,
    params: definition.params ?? {},
    cron: definition.cron,
    timezone,
    enabled,
    fanOut: definition.fanOut ?? null,
    concurrencyKey: definition.concurrencyKey ?? null,
    uniqueKey: definition.uniqueKey ?? null,
    priority: definition.priority ?? null,
    missedTicks: definition.missedTicks ?? "skip",
    nextRunAt: !enabled ? null : sameTicks ? existing.nextRunAt : nextRunAfter(definition.cron, timezone, now),
  };
}

/**
 * Refuses, as it is saved, a schedule none of whose runs could create a task: of a type unregistered
 * where the pool requires registered ones, or with params (with each listed key) that the latest
 * registered version's schema refuses. Saved, it failed at every tick, which only its lastResult said.
 * Keys a run finds in earlier results are known only then, and checked then.
 */
export function checkScheduleTasks(schedule: { taskType: string; params: JsonObject; fanOut: FanOut | null }, type: TaskTypeRecord | undefined, rules: NewTaskRules): void {
  const { taskType, params, fanOut } = schedule;
  if (!type) {
    if (rules.requireRegistered) throw unregistered(taskType);
    return;
  }
  if (!fanOut) return rules.validators.check(type, params);
  (fanOut.keys ?? []).forEach((key, index) => {
    try {
      rules.validators.check(type, { ...params, key });
    } catch (error) {
      // Said of the key only when the key is what is wrong: a params field refused whatever the key is
      // the params' own fault, and "--keys value 1" sent the operator to the wrong flag.
      if (error instanceof ValidationError && error.issues.some((issue) => /^params\.key(\.|$)/.test(issue.path))) {
        error.prefixMessage((v) => `${v.field(`fanOut.keys.${index}`)} (${JSON.stringify(key)}): `);
        error.nestUnder(`fanOut.keys.${index}`);
      }
      throw error;
    }
  });
}

/** next_run_at after pausing or resuming: a resumed schedule's next tick is the first after now (ticks while paused are not missed ones). */
export function nextRunWhen(schedule: ScheduleRecord, enabled: boolean, now: Date): Date | null {
  if (!enabled) return null;
  if (schedule.enabled && schedule.nextRunAt !== null) return schedule.nextRunAt;
  return nextRunAfter(schedule.cron, schedule.timezone, now);
}

/** What a due schedule does now: fire `tickAt` (or nothing, when null), having passed over `skippedTicks`, then wait for `nextRunAt`. */
export interface TickPlan {
  tickAt: Date | null;
  /** When the run's first batch is due: its tick, or now for a late catch-up run. */
  startAt: Date;
  /** The latest tick passed, fired or not (the key of a skipped pass's result). */
  latestTick: Date;
  skippedTicks: number;
  nextRunAt: Date | null;
}

/** Counting missed ticks stops here: a per-second schedule down for a day would otherwise count for long. */
const MAX_COUNTED_TICKS = 10_000;

/** Decides a due schedule's pass (see the file header). */
export function planTick(schedule: Pick<ScheduleRecord, "cron" | "timezone" | "missedTicks" | "nextRunAt">, now: Date, graceMs: number): TickPlan {
  const cron = ticksOf(schedule.cron, schedule.timezone);
  const first = schedule.nextRunAt ?? now;
  const latest = cron.latestRun(now) ?? first;
  const latestTick = latest < first ? first : latest;
  let ticks = 1;
  for (let t: Date | null = first; t !== null && t < latestTick && ticks < MAX_COUNTED_TICKS; t = cron.nextRun(t)) ticks++;
  const onTime = now.getTime() - latestTick.getTime() <= graceMs;
  const fire = onTime || schedule.missedTicks === "run_once";
  return { tickAt: fire ? latestTick : null, startAt: onTime ? latestTick : now, latestTick, skippedTicks: fire ? ticks - 1 : ticks, nextRunAt: cron.nextRun(now) };
}

/** A fan-out key from JSON: strings and safe integers (what a key can be), nothing else. */
export type FanOutKey = string | number;
const isKey = (v: unknown): v is FanOutKey => (typeof v === "string" && v.length > 0 && v.length <= 255) || Number.isSafeInteger(v);

/** The keys in `field` (dots reach into objects) of each result: a list adds each of its keys, a key adds itself; duplicates once, in order. */
export function keysFromResults(results: Json[], field: string): FanOutKey[] {
  const keys = new Set<FanOutKey>();
  for (const result of results) {
    let value: unknown = result;
    for (const part of field.split(".")) value = value !== null && typeof value === "object" && !Array.isArray(value) ? (value as JsonObject)[part] : undefined;
    for (const item of Array.isArray(value) ? value : [value]) if (isKey(item)) keys.add(item);
  }
  return [...keys];
}

/** What one run creates, before the store writes it: the tasks in input order and the batch each belongs to. */
export interface FanOutPlan {
  inputs: EnqueueInput[];
  /** Per batch: when it is due and how many of `inputs` (in order) it holds. */
  batches: { batch: number; scheduledFor: Date; count: number }[];
}

/**
 * One run's tasks. Without a fan-out: one task. With one: a task per key, params `{ ...params, key }`,
 * keys cut in order into `batches` runs as equal as they can be (seed 004's "stores 1-50, 51-100…";
 * sizes differ by one at most), batch i due at `startAt + i × interval`. `intervalMs` is used when the fan-out sets none.
 */
export function planFanOut(input: GenerateInput, keys: FanOutKey[] | null, startAt: Date, intervalMs: number | null): FanOutPlan {
  const base = { taskType: input.taskType, ...(input.priority === undefined ? {} : { priority: input.priority }) };
  const params = input.params ?? {};
  if (!input.fanOut || keys === null) {
    const own = { ...(input.concurrencyKey ? { concurrencyKey: input.concurrencyKey } : {}), ...(input.uniqueKey ? { uniqueKey: input.uniqueKey } : {}) };
    const inputs = [{ ...base, params, scheduledFor: startAt, ...own }];
    return { inputs, batches: [{ batch: 1, scheduledFor: startAt, count: 1 }] };
  }
  const batches = input.fanOut.batches ?? 1;
  const interval = input.fanOut.batchIntervalSeconds !== undefined ? input.fanOut.batchIntervalSeconds * 1000 : intervalMs;
  if (batches > 1 && interval === null) {
    throw new ValidationError((v) => `Invalid ${v.field("fanOut")}: ${v.field("batchIntervalSeconds")} is needed to stagger batches outside a schedule (seed 004: 14400, one batch every 4 hours)`, [
      { path: "fanOut.batchIntervalSeconds", message: "required when batches > 1" },
    ]);
  }
  // The tasks skip enqueue's checks (the store writes them as they are): a date a store cannot hold would be read wrong.
  const last = startAt.getTime() + (batches - 1) * (interval ?? 0);
  if (last > LATEST_STORABLE_TIME) {
    throw new ValidationError(
      (v) =>
        `Invalid ${v.field("fanOut")}: the last of ${batches} batches would be due ${new Date(last).toISOString()}, after 9999-12-31; start earlier, or use fewer batches or a shorter ${v.field("batchIntervalSeconds")}`,
      [{ path: "fanOut.batchIntervalSeconds", message: "the last batch would be due after 9999-12-31" }],
    );
  }
  // Key i goes to batch ⌊i × batches / n⌋: runs in order whose sizes differ by one at most, and fewer
  // keys than batches spread over the whole period (2 keys in 6 batches: the 1st and the 4th) rather
  // than all in the first runs and none after.
  const first = (b: number) => Math.ceil((b * keys.length) / batches);
  const plan: FanOutPlan = { inputs: [], batches: [] };
  for (let b = 0; b < batches; b++) {
    const slice = keys.slice(first(b), first(b + 1));
    const scheduledFor = new Date(startAt.getTime() + b * (interval ?? 0));
    plan.batches.push({ batch: b + 1, scheduledFor, count: slice.length });
    for (const key of slice) {
      plan.inputs.push({ ...base, params: { ...params, key }, scheduledFor, ...keysOf(input, key) });
    }
  }
  return plan;
}

/** The ids of each batch, given the ids the store created in input order. */
export function batchesOf(plan: FanOutPlan, taskIds: number[]): GeneratedBatch[] {
  let at = 0;
  return plan.batches.map(({ batch, scheduledFor, count }) => ({ batch, scheduledFor, taskIds: taskIds.slice(at, (at += count)) }));
}

/**
 * "created 300 tasks in 6 batches, the first due 2030-01-01T00:00:00.000Z", and with a unique key,
 * "…; 3 not made: a task of their unique key is still pending". `created`: how many the store made.
 */
export function describeRun(plan: FanOutPlan, created = plan.inputs.length): string {
  const n = plan.inputs.length;
  const filled = plan.batches.filter((b) => b.count > 0);
  if (n === 0) return "created no task: the fan-out found no keys";
  const batches = filled.length > 1 ? ` in ${filled.length} batches` : "";
  const held = n - created > 0 ? `; ${n - created} not made: a task of their unique key is still pending` : "";
  return `created ${counted(created, "task")}${batches}, the first due ${filled[0].scheduledFor.toISOString()}${held}`;
}

/** The default spread of a schedule's batches: the time to its next tick, shared out. */
export function tickIntervalMs(schedule: Pick<ScheduleRecord, "cron" | "timezone" | "fanOut">, tickAt: Date): number | null {
  const next = nextRunAfter(schedule.cron, schedule.timezone, tickAt);
  return next === null ? null : Math.floor((next.getTime() - tickAt.getTime()) / (schedule.fanOut?.batches ?? 1));
}

/** Seed 004's daily resync: `batches` (default 6) over 24 hours from the day's midnight UTC, or from now; one active task per store. */
export function resyncGeneration(input: ResyncInput): GenerateInput {
  if ((input.keys === undefined) === (input.fromResults === undefined)) {
    throw new ValidationError(
      (v) => `Invalid resync: give the stores either as keys (a list) or as ${v.field("fromResults")} (a query of a schedule's last run's results), not both or neither`,
      [{ path: "keys", message: (v) => `needs exactly one of keys, ${v.field("fromResults")}` }],
    );
  }
  // Checked here, where the query is the request's own fromResults rather than a fan-out's.
  if (input.fromResults && input.fromResults.schedule === undefined) {
    throw new ValidationError(`Invalid fromResults.schedule: name the schedule whose last run's results hold the keys (the stores), e.g. {"schedule": "discovery", "field": "storeIds"}`, [
      { path: "fromResults.schedule", message: "required" },
    ]);
  }
  const batches = input.batches ?? 6;
  return {
    taskType: input.taskType ?? "product_resync",
    params: input.params,
    fanOut: { keys: input.keys, fromResults: input.fromResults, batches, batchIntervalSeconds: Math.floor(86400 / batches) },
    concurrencyKey: input.concurrencyKey ?? "store:{key}",
    uniqueKey: input.uniqueKey,
    priority: input.priority,
    ...(input.date ? { startAt: dayStart(input.date) } : {}),
  };
}

/** Seed 004's discovery: one store_discovery task, or one per key (e.g. per region). */
export function discoveryGeneration(input: DiscoveryInput): GenerateInput {
  return {
    taskType: input.taskType ?? "store_discovery",
    params: input.params,
    ...(input.keys ? { fanOut: { keys: input.keys } } : {}),
    priority: input.priority,
  };
}

function dayStart(day: string): Date {
  const date = new Date(`${day}T00:00:00.000Z`);
  if (Number.isNaN(date.getTime()) || date.toISOString().slice(0, 10) !== day) {
    throw new ValidationError(`Invalid date: "${day}" is not a day of the calendar (YYYY-MM-DD)`, [{ path: "date", message: "not a calendar day" }]);
  }
  // Said here, of the field sent: the generation's own check named its start_at, which the request does not have.
  if (date.getTime() < 0) {
    throw new ValidationError(`Invalid date: "${day}" is before 1970-01-01, the earliest day a task may be due`, [{ path: "date", message: "before 1970-01-01" }]);
  }
  return date;
}

/** The message of the event of a task cancelled with its schedule's pending tasks (Store.cancelScheduleTasks). */
export const scheduleCancelled = (name: string): string => `cancelled with the pending tasks of schedule ${name}`;
