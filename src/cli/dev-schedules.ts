/**
 * The schedules `taskpool dev` runs its pipeline with, for the session only. They fire every few
 * seconds, and any coordinator fires what the database holds: left behind, they kept making demo
 * tasks under a later `taskpool serve` on the same database. So dev removes what it saved when it stops.
 *
 * It never touches a schedule it did not save. A name already taken (the user's own, such as the
 * example's real cadence saved by its schedules.js, or one left by a dev that was killed) is refused
 * before anything is saved, rather than skipped or overwritten: overwriting would put the user's
 * schedule on dev's cadence and removing it at the end would delete it, and skipping it would run the
 * example's workers on the user's schedule. Refusing names the schedules and the ways out.
 */
import type { Taskpool } from "../api/taskpool.js";
import { ScheduleNotFoundError } from "../core/errors.js";
import type { ScheduleDefinition } from "../core/schedule.js";
import { redactUrl } from "../core/redact-url.js";
import { CliError } from "./errors.js";

/** Saves `definitions`, all or none, and returns the names saved: what dev must remove when it stops. */
export async function saveDevSchedules(pool: Taskpool, definitions: ScheduleDefinition[], where: { db: string; schema?: string }): Promise<string[]> {
  const existing = new Set((await pool.schedules.list()).map((s) => s.name));
  const taken = definitions.map((d) => d.name).filter((name) => existing.has(name));
  if (taken.length > 0) throw takenError(taken, where);
  const saved: string[] = [];
  try {
    for (const definition of definitions) {
      await pool.schedule(definition);
      saved.push(definition.name);
    }
  } catch (error) {
    // A definition refused (a --schedules module's mistake) leaves none of the others behind.
    await removeDevSchedules(pool, saved);
    throw error;
  }
  return saved;
}

/**
 * Removes the schedules dev saved, cancelling first the tasks their runs made that no worker holds:
 * left pending, a later `taskpool serve` on the database (the README's walkthrough) handed them out.
 * One already removed (from the dashboard, say) is fine.
 */
export async function removeDevSchedules(pool: Taskpool, names: string[]): Promise<void> {
  const gone = (error: unknown) => {
    if (!(error instanceof ScheduleNotFoundError)) throw error;
  };
  for (const name of names) {
    await pool.schedules.cancelPending(name).catch(gone);
    await pool.schedules.remove(name).catch(gone);
  }
}

function takenError(names: string[], where: { db: string; schema?: string }): CliError {
  const [them, a] = names.length === 1 ? ["it", "a schedule"] : ["them", "schedules"];
  // The database dev was given, or the removal acts on ./taskpool.db (or TASKPOOL_DATABASE_URL's).
  const target = ` --db ${redactUrl(where.db)}${where.schema ? ` --schema ${where.schema}` : ""}`;
  return new CliError(
    `the database already has ${a} named ${names.join(", ")} that dev did not save (yours, or left by a dev that was killed): ` +
      `dev would replace ${them} with its own and delete ${them} when it stops. Run dev on another database (--db sqlite:./tour.db), with --no-demo, ` +
      `or remove ${them} first (${names.map((n) => `npx taskpool schedules remove ${n} --cancel-pending${target}`).join("; ")})`,
  );
}
