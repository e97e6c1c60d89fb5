import type { FanOut, MissedTickPolicy, ScheduleRecord, ScheduleRunResult } from "../core/schedule.js";
import type { JsonObject } from "../core/task.js";

/** A decoded schedules row (PostgreSQL returns it like this; SQLite's is parsed into this shape first). */
export interface ScheduleRow {
  name: string;
  task_type: string;
  params: JsonObject;
  cron: string;
  timezone: string;
  enabled: boolean;
  fan_out: FanOut | null;
  concurrency_key: string | null;
  unique_key: string | null;
  priority: number | null;
  missed_ticks: MissedTickPolicy;
  next_run_at: Date | null;
  last_run_at: Date | null;
  /** As stored: the run result with its times as ISO strings. */
  last_result: StoredRunResult | null;
  created_at: Date;
  updated_at: Date;
}

/** A run result as JSON holds it. */
export type StoredRunResult = Omit<ScheduleRunResult, "tickAt" | "firedAt"> & { tickAt: string; firedAt: string };

export function toSchedule(r: ScheduleRow): ScheduleRecord {
  const result = r.last_result;
  return {
    name: r.name,
    taskType: r.task_type,
    params: r.params,
    cron: r.cron,
    timezone: r.timezone,
    enabled: r.enabled,
    fanOut: r.fan_out,
    concurrencyKey: r.concurrency_key,
    uniqueKey: r.unique_key,
    priority: r.priority,
    missedTicks: r.missed_ticks,
    nextRunAt: r.next_run_at,
    lastRunAt: r.last_run_at,
    lastResult: result === null ? null : { ...result, tickAt: new Date(result.tickAt), firedAt: new Date(result.firedAt) },
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** The JSON a run result is stored as. */
export function storedRunResult(result: ScheduleRunResult): string {
  return JSON.stringify({ ...result, tickAt: result.tickAt.toISOString(), firedAt: result.firedAt.toISOString() });
}
