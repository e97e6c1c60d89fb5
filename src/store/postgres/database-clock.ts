import type pg from "pg";
import type { Clock } from "../../core/clock.js";

/** How old a reading of the database's clock may get before the next call takes a new one. */
export const RESYNC_MS = 60_000;
/**
 * How far the local wall clock may move apart from the monotonic one since the last reading before
 * that reading is distrusted: the wall clock was stepped (NTP, an operator) or the machine slept
 * (the monotonic clock stands still while suspended), so the reading may no longer tell the time.
 */
const STEP_MS = 1000;
/** Like any store call (clientTimeoutMs in timeouts.ts): a connection gone silent must not hold every call. */
const READ_TIMEOUT_MS = 10_000;
/** clock_timestamp(), not now(): now() is the start of the transaction. Text, to keep the microseconds' digits. */
const READ_CLOCK = `SELECT (extract(epoch FROM clock_timestamp()) * 1000)::text AS ms`;

interface Reading {
  /** The database's time at `monotonic`, in epoch milliseconds. */
  database: number;
  monotonic: number;
  /** The local wall clock at `monotonic` (only to notice a step or a sleep). */
  wall: number;
}

/**
 * The database server's clock, for a store whose processes run on many machines. Leases, heartbeats,
 * due times, backoff, schedules and retention compare times written by different hosts, so they must
 * all come from one clock: a worker host 5 minutes behind wrote heartbeats that looked 5 minutes old
 * (declared dead at every sweep) and could not claim a task for 5 minutes after it was due; one ahead
 * wrote leases that outlived its crash by 5 minutes, and a producer ahead delayed every task it made.
 *
 * Reading the database's time costs a round trip, so it is read once (`SELECT clock_timestamp()`)
 * and moved on by the local monotonic clock, which no wall-clock step affects; it is read again
 * every RESYNC_MS, and at once when the local wall clock moved apart from the monotonic one (a step,
 * or a sleep). Accuracy is half a round trip, and the monotonic clock's drift over a minute
 * (milliseconds at worst).
 */
export class DatabaseClock implements Clock {
  private reading: Reading | null = null;
  private syncing: Promise<void> | null = null;

  constructor(
    private readonly pool: Pick<pg.Pool, "connect">,
    private readonly monotonic: () => number = () => performance.now(),
    private readonly wall: () => number = () => Date.now(),
  ) {}

  /** The database's time now; the local wall clock until the first reading (see ready()). */
  now(): Date {
    const r = this.reading;
    return new Date(r === null ? this.wall() : r.database + (this.monotonic() - r.monotonic));
  }

  /**
   * Resolves once now() follows the database. At once while the reading is recent; an old one is
   * refreshed in the background (now() stays right meanwhile, to the monotonic clock's drift), and
   * when there is none, or the wall clock was stepped or the machine slept since, the caller waits
   * for a new one.
   */
  ready(): Promise<void> | undefined {
    const r = this.reading;
    const elapsed = r === null ? Infinity : this.monotonic() - r.monotonic;
    if (elapsed < RESYNC_MS && this.trusted(r as Reading, elapsed)) return undefined;
    const syncing = (this.syncing ??= this.sync().finally(() => (this.syncing = null)));
    if (r !== null && this.trusted(r, elapsed)) {
      syncing.catch(() => {}); // the old reading stays; the next call tries again
      return undefined;
    }
    return syncing;
  }

  private trusted(r: Reading, elapsed: number): boolean {
    return Math.abs(this.wall() - r.wall - elapsed) < STEP_MS;
  }

  private async sync(): Promise<void> {
    // The round trip is timed on a connection already held: waiting for one in a busy pool is no part of it.
    const client = await this.pool.connect();
    try {
      const before = this.monotonic();
      const { rows } = await client.query<{ ms: string }>({ text: READ_CLOCK, query_timeout: READ_TIMEOUT_MS } as pg.QueryConfig);
      const after = this.monotonic();
      // The database read its clock somewhere in the round trip: the middle is off by half of it at most.
      this.reading = { database: Number(rows[0].ms) + (after - before) / 2, monotonic: after, wall: this.wall() };
      client.release();
    } catch (error) {
      client.release(error as Error); // a connection that failed or went silent is not reused
      throw error;
    }
  }
}
