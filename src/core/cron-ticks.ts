/**
 * A cron expression's ticks in a time zone, across daylight saving time as cron keeps them.
 *
 * croner fires a single hour's tick once in the hour a fall-back repeats, and moves it out of the hour
 * a spring-forward skips; an hour in a list or a range it fired twice, or not at all: `0 2,14 * * *`
 * in Europe/Berlin fired the repeated 02:00 twice (its whole fan-out run twice) and dropped the
 * missing one. Here an expression with fixed hours (no `*` in its hour field) ticks as cron's do: a
 * wall-clock time the zone repeats fires once, at its first occurrence; one the zone skips fires as
 * the skip ends. An hour field with a `*` runs by the clock: in both of a repeated hour, in none of a
 * skipped one, as croner has it.
 */
import { Cron } from "croner";

/** The longest daylight saving shift there is (Antarctica/Troll's 2 h), and then some. */
const SHIFT_WINDOW_MS = 3 * 3_600_000;
/** How far a skipped wall-clock time is looked for between two ticks: a yearly expression's span. */
const GAP_SEARCH_MS = 400 * 86_400_000;
const GAP_STEP_MS = 14 * 86_400_000;

export class CronTicks {
  private readonly wallTicks: Cron;
  private readonly fixedHours: boolean;
  private readonly parts: Intl.DateTimeFormat;

  constructor(
    /** The expression in its zone (cronOf checked both). */
    readonly cron: Cron,
    expression: string,
    timezone: string,
  ) {
    const fields = expression.trim().split(/\s+/);
    // A nickname (@daily, @weekly…) names midnight, but @hourly.
    const hours = fields.length === 1 ? (fields[0].toLowerCase() === "@hourly" ? "*" : "0") : fields[fields.length === 6 ? 2 : 1];
    this.fixedHours = !hours.includes("*");
    // The same expression read in UTC: a wall-clock time, written as a UTC instant, is a tick of it if it matches.
    this.wallTicks = new Cron(expression, { timezone: "UTC", mode: "5-or-6-parts" });
    this.parts = new Intl.DateTimeFormat("en-US", {
      timeZone: timezone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
  }

  /** The first tick strictly after `after`; null when there is none. */
  nextRun(after: Date): Date | null {
    if (!this.fixedHours) return this.cron.nextRun(after);
    let from = after;
    // A per-second expression of fixed hours passes over a repeated hour's 3,600 ticks once a year.
    for (let step = 0; step < 100_000; step++) {
      const tick = this.cron.nextRun(from);
      const skipped = this.skipEndBetween(after, tick ?? new Date(after.getTime() + GAP_SEARCH_MS));
      if (skipped !== null) return skipped;
      if (tick === null) return null;
      const first = this.firstOccurrence(tick);
      if (first === null) return tick;
      // Its wall-clock time came before, in the hour the zone repeats: that occurrence is the tick,
      // unless it is `after` or earlier (already fired), when this one is passed over.
      if (first > after) return first;
      from = tick;
    }
    return null;
  }

  /** The latest tick at or before `at`; null when there is none. */
  latestRun(at: Date): Date | null {
    const [latest = null] = this.cron.previousRuns(1, new Date(at.getTime() + 1));
    if (!this.fixedHours) return latest;
    // From before the shift around it (if any): the ticks here, not croner's, up to `at`.
    let found: Date | null = null;
    for (let t = this.nextRun(new Date((latest ?? at).getTime() - SHIFT_WINDOW_MS - 1)); t !== null && t <= at; t = this.nextRun(t)) found = t;
    return found ?? latest;
  }

  /** `date`'s wall-clock time in the zone, written as a UTC instant. */
  private wall(date: Date): number {
    const p = Object.fromEntries(this.parts.formatToParts(date).map((part) => [part.type, Number(part.value)]));
    return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second, date.getUTCMilliseconds());
  }

  /** The zone's offset from UTC at `date`, in ms. */
  private offset(date: Date): number {
    return this.wall(date) - date.getTime();
  }

  /** The earlier instant with `tick`'s wall-clock time, when `tick` falls in an hour a fall-back repeats. */
  private firstOccurrence(tick: Date): Date | null {
    const shift = this.offset(new Date(tick.getTime() - SHIFT_WINDOW_MS)) - this.offset(tick);
    if (shift <= 0) return null;
    const earlier = new Date(tick.getTime() - shift);
    return this.wall(earlier) === this.wall(tick) ? earlier : null;
  }

  /** The end of the first skipped hour in (after, until] that skipped one of the expression's wall-clock times. */
  private skipEndBetween(after: Date, until: Date): Date | null {
    const end = Math.min(until.getTime(), after.getTime() + GAP_SEARCH_MS);
    for (let from = after.getTime(); from < end; from += GAP_STEP_MS) {
      const to = Math.min(from + GAP_STEP_MS, end);
      if (this.offset(new Date(to)) <= this.offset(new Date(from))) continue;
      // The offset grew within (from, to]: the first instant of the new one, to the millisecond.
      let [low, high] = [from, to];
      const before = this.offset(new Date(from));
      while (high - low > 1) {
        const middle = Math.floor((low + high) / 2);
        if (this.offset(new Date(middle)) > before) high = middle;
        else low = middle;
      }
      const skipEnd = new Date(high);
      const skippedFrom = this.wall(new Date(low)) + 1;
      const skippedTick = this.wallTicks.nextRun(new Date(skippedFrom - 1));
      if (skippedTick !== null && skippedTick.getTime() < this.wall(skipEnd) && skipEnd > after) return skipEnd;
    }
    return null;
  }
}
