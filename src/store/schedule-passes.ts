/**
 * The scheduler's pass and the fan-out generation, shared by both stores: what to fire and which tasks
 * to make is decided here with the rules of core/schedule.ts; each store supplies only its reads and
 * the one transaction that writes a run (ScheduleWriter).
 */
import { ScheduleNotFoundError, ValidationError, type Vocabulary } from "../core/errors.js";
import {
  batchesOf,
  describeRun,
  type FanOutKey,
  type FanOutPlan,
  type FiredSchedule,
  type GenerateInput,
  type GenerateResult,
  keysFromResults,
  noResultsSchedule,
  planFanOut,
  planTick,
  resultsScheduleOf,
  type ScheduleRecord,
  type ScheduleRunResult,
  tickIntervalMs,
} from "../core/schedule.js";
import type { EnqueueInput, Json } from "../core/task.js";
import type { EnqueueResult } from "./store.js";
import { counted } from "../core/counted.js";

/** A schedule's pass as a store writes it: only while the schedule still waits for `expectedNextRunAt`. */
export interface PassWrite {
  name: string;
  expectedNextRunAt: Date;
  nextRunAt: Date | null;
  result: ScheduleRunResult;
}

/** A run: the pass, the tick's unique row and its tasks, in one transaction. */
export interface RunWrite extends Omit<PassWrite, "result"> {
  tickAt: Date;
  inputs: EnqueueInput[];
  /** The run's result, given how many tasks the store made (fewer than the inputs where a unique key was held). */
  result(created: number): ScheduleRunResult;
}

/** What a store supplies to the pass. */
export interface ScheduleWriter {
  /** Enabled schedules whose next tick is at or before `now`, soonest first. */
  due(now: Date): Promise<ScheduleRecord[]>;
  /** The results of the completed tasks of the schedule's latest run that has any, oldest task first. */
  lastRunResults(name: string): Promise<Json[]>;
  /** The schedule of that name, or null (one a fan-out reads the results of may have been removed). */
  getSchedule(name: string): Promise<ScheduleRecord | null>;
  /**
   * Writes a run: the task ids created (not those of pending tasks holding a unique key); `[]` and no task when this tick already has its row (it fired
   * before: only the schedule moves on); null, writing nothing, when the schedule changed since it was read.
   */
  writeRun(run: RunWrite): Promise<number[] | null>;
  /** Moves a schedule past skipped ticks; false, writing nothing, when it changed since it was read. */
  writePass(pass: PassWrite): Promise<boolean>;
}

/** Fires what is due at `now` (see core/schedule.ts for missed ticks). One schedule's failure is reported in its entry and does not stop the others. */
export async function fireDueSchedules(w: ScheduleWriter, now: Date, graceMs: number): Promise<FiredSchedule[]> {
  const fired: FiredSchedule[] = [];
  for (const schedule of await w.due(now)) {
    try {
      const entry = await passOne(w, schedule, now, graceMs);
      if (entry) fired.push(entry);
    } catch (error) {
      // Left due: the next pass tries again (a lost connection, a lock timeout).
      fired.push({ name: schedule.name, tickAt: null, taskIds: [], skippedTicks: 0, error: (error as Error).message });
    }
  }
  return fired;
}

async function passOne(w: ScheduleWriter, s: ScheduleRecord, now: Date, graceMs: number): Promise<FiredSchedule | null> {
  const plan = planTick(s, now, graceMs);
  const pass = { name: s.name, expectedNextRunAt: s.nextRunAt as Date, nextRunAt: plan.nextRunAt };
  const result = (message: string, tasksCreated = 0, error: string | null = null): ScheduleRunResult => ({
    tickAt: plan.tickAt ?? plan.latestTick,
    firedAt: now,
    tasksCreated,
    skippedTicks: plan.skippedTicks,
    message: plan.skippedTicks > 0 ? `${message}; ${missed(plan.skippedTicks)} passed over` : message,
    error,
  });
  if (plan.tickAt === null) {
    const written = await w.writePass({ ...pass, result: result(`skipped: the coordinator was down at the tick (missed_ticks: skip)`) });
    return written ? { name: s.name, tickAt: null, taskIds: [], skippedTicks: plan.skippedTicks, error: null } : null;
  }
  const run = { ...pass, tickAt: plan.tickAt };
  let made: FanOutPlan;
  let keys: FanOutKey[] | null;
  try {
    // The schedule its fan-out reads, checked when it was saved, may have been removed since: the run
    // says so in its error rather than "the fan-out found no keys".
    const readsFrom = resultsScheduleOf(s);
    if (readsFrom !== null && (await w.getSchedule(readsFrom)) === null) throw noResultsSchedule(readsFrom, true);
    keys = await fanOutKeys(w, s.fanOut, s.name);
    made = planFanOut(asGeneration(s), keys, plan.startAt, tickIntervalMs(s, plan.tickAt));
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    return recordFailure(w, run, result, error);
  }
  let ids: number[] | null;
  try {
    ids = await w.writeRun({ ...run, inputs: made.inputs, result: (created) => result(describeRun(made, created), created) });
  } catch (error) {
    // The tasks were refused (a registered params schema, requireRegistered): running again would fail the same
    // way. Said of the key whose task it was, as generate says it, not of "item 0".
    if (!(error instanceof ValidationError)) throw error;
    return recordFailure(w, run, result, refusedForKey(error, asGeneration(s), keys) as ValidationError);
  }
  return ids === null ? null : { name: s.name, tickAt: plan.tickAt, taskIds: ids, skippedTicks: plan.skippedTicks, error: null };
}

/** The tick is recorded with no task and the reason, so it is not retried every pass. */
async function recordFailure(w: ScheduleWriter, run: Omit<RunWrite, "inputs" | "result">, result: (m: string, n?: number, e?: string | null) => ScheduleRunResult, error: Error) {
  const ids = await w.writeRun({ ...run, inputs: [], result: () => result("created no task", 0, error.message) });
  return ids === null ? null : { name: run.name, tickAt: run.tickAt, taskIds: [], skippedTicks: 0, error: error.message };
}

const missed = (n: number) => counted(n, "missed tick");

/** A schedule run is a generation starting at its tick. */
function asGeneration(s: ScheduleRecord): GenerateInput {
  return {
    taskType: s.taskType,
    params: s.params,
    ...(s.fanOut ? { fanOut: s.fanOut } : {}),
    ...(s.concurrencyKey ? { concurrencyKey: s.concurrencyKey } : {}),
    ...(s.uniqueKey ? { uniqueKey: s.uniqueKey } : {}),
    ...(s.priority === null ? {} : { priority: s.priority }),
  };
}

/** The keys of a fan-out: its list, or those its query finds in a previous run's results; null without a fan-out. */
async function fanOutKeys(w: Pick<ScheduleWriter, "lastRunResults">, fanOut: GenerateInput["fanOut"] | null, self: string | null): Promise<(string | number)[] | null> {
  if (!fanOut) return null;
  if (fanOut.keys) return fanOut.keys;
  const from = fanOut.fromResults as { schedule?: string; field: string };
  const schedule = from.schedule ?? self;
  if (schedule === null) {
    throw new ValidationError((v) => `Invalid ${v.field("fanOut.fromResults")}: name the schedule whose last run's results hold the keys (schedule)`, [
      { path: "fanOut.fromResults.schedule", message: "required here" },
    ]);
  }
  return keysFromResults(await w.lastRunResults(schedule), from.field);
}

/**
 * A generation's task refused as item i of the batch it sent ("item 3: …", path `3.params.n`), said of
 * the key it was made for, as a schedule's check says it (checkScheduleTasks): `fanOut.keys.3 ("CA"):
 * …` at `fanOut.keys.3.params.n`, or of a key read from results, which the caller did not write. A
 * generation without fan-out has one task, made of the input's own fields: `params.n`.
 */
function refusedForKey(error: unknown, input: GenerateInput, keys: FanOutKey[] | null): unknown {
  const item = error instanceof ValidationError ? /^(\d+)\./.exec(error.issues[0]?.path ?? "") : null;
  if (!(error instanceof ValidationError) || item === null) return error;
  const index = Number(item[1]);
  const prefix = `item ${index}: `;
  const key = keys?.[index];
  const listed = input.fanOut?.keys !== undefined;
  const label = (v: Vocabulary) => (key === undefined ? "" : listed ? `${v.field(`fanOut.keys.${index}`)} (${JSON.stringify(key)}): ` : `the task for key ${JSON.stringify(key)}: `);
  const inner = (v: Vocabulary) => error.messageIn(v).replace(prefix, "");
  return new ValidationError(
    (v) => label(v) + inner(v),
    error.issues.map((issue, i) => ({
      path: issue.path.replace(`${index}.`, key !== undefined && listed ? `fanOut.keys.${index}.` : ""),
      message: (v: Vocabulary) => error.issuesIn(v)[i].message,
    })),
    error.unlisted,
  );
}

/** Makes a generation's tasks now, all or nothing (pool.generate). */
export async function generateTasks(
  w: Pick<ScheduleWriter, "lastRunResults" | "getSchedule"> & { enqueueMany(inputs: EnqueueInput[]): Promise<EnqueueResult[]> },
  now: Date,
  input: GenerateInput,
): Promise<GenerateResult> {
  // A query of no schedule finds no keys: say the name is wrong rather than answer "created no task".
  const queried = input.fanOut?.fromResults?.schedule;
  if (queried !== undefined && (await w.getSchedule(queried)) === null) throw new ScheduleNotFoundError(queried);
  const keys = await fanOutKeys(w, input.fanOut, null);
  const plan = planFanOut(input, keys, input.startAt ?? now, null);
  // Each key's task, made now or (its unique key held) the one still pending.
  const results = plan.inputs.length === 0 ? [] : await w.enqueueMany(plan.inputs).catch((error) => Promise.reject(refusedForKey(error, input, keys)));
  const created = results.filter((r) => r.created).length;
  return { created, batches: batchesOf(plan, results.map((r) => r.task.id)), message: describeRun(plan, created) };
}
