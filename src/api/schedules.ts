import type { ScheduleRecord } from "../core/schedule.js";
import type { CheckedStore } from "./checked-store.js";

/** What operators do with recurring schedules (`pool.schedules`); `pool.schedule(definition)` creates or updates one. */
export interface ScheduleOperations {
  /** Every schedule, by name, with its next run, last run and last result. */
  list(): Promise<ScheduleRecord[]>;
  /** The schedule of that name, or null. */
  get(name: string): Promise<ScheduleRecord | null>;
  /** Stops firing it (next run: none) until resumed. */
  pause(name: string): Promise<ScheduleRecord>;
  /** Fires it again from its next tick after now; the ticks while it was paused are not caught up. */
  resume(name: string): Promise<ScheduleRecord>;
  /**
   * Cancels the tasks its runs made that are still pending (a fan-out's later batches, due tasks not
   * yet claimed); the ids, in order. Tasks workers hold run on. To stop a schedule and its work:
   * pause, cancelPending, then remove if wanted (removing forgets which tasks were its own).
   */
  cancelPending(name: string): Promise<number[]>;
  /** Deletes it and its tick history; the tasks it created stay (cancelPending first to cancel those not yet claimed). */
  remove(name: string): Promise<ScheduleRecord>;
}

/** The operations on `store`, looked up when called. */
export function scheduleOperations(store: () => CheckedStore): ScheduleOperations {
  return {
    list: () => store().listSchedules(),
    get: (name) => store().getSchedule(name),
    pause: (name) => store().setScheduleEnabled(name, false),
    resume: (name) => store().setScheduleEnabled(name, true),
    cancelPending: (name) => store().cancelScheduleTasks(name),
    remove: (name) => store().removeSchedule(name),
  };
}
