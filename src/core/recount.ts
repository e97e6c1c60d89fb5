/**
 * Recounting: counts() of completed tasks is not read from the tasks (most of the table) but from
 * totals kept beside them (migrations 011 and 014 on PostgreSQL, 009 on SQLite). Processes of an
 * earlier version can leave those totals wrong for good (docs/upgrading.md); `Store.recount` sets
 * them from the task rows again.
 */
import { type Static, Type } from "./typebox.js";

export const RecountOptionsSchema = Type.Object(
  {
    /** Report what would change, and change nothing. */
    dryRun: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type RecountOptions = Static<typeof RecountOptionsSchema>;

/** One task type whose completed count was not its number of completed tasks. */
export interface RecountChange {
  taskType: string;
  /** What counts() answered before the recount. */
  before: number;
  /** Its completed tasks, as the recount found them: what counts() answers after it. */
  after: number;
}

/** What a recount found and (unless a dry run) set right. */
export interface RecountResult {
  /** The task types whose count was wrong, by name. */
  changed: RecountChange[];
  /** Task types looked at: those with completed tasks or with a count. */
  taskTypes: number;
  /** True when nothing was written. */
  dryRun: boolean;
}
