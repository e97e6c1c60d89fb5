/**
 * At most a few operator reads (listing and searching tasks, counts, statistics, capacity) on the
 * pool's connections at once; the others wait their turn, in order, for a bounded time, and are then
 * refused as the database being busy (503 with Retry-After over HTTP).
 *
 * Why: a search over a large history scans it for seconds, holding its connection all along. Four
 * dashboard searches at once over a million tasks took a pool of 10 connections between them, none was
 * answered (503), and a worker's heartbeat waited 10 s for a connection: a worker whose beat waits
 * that long may be declared dead and lose its tasks. Gated, reads never hold more than `limit`
 * connections, and claims, heartbeats and completions keep the rest.
 *
 * Why a gate on the one pool rather than a second pool for reads: the pool's size stays the store's
 * whole count of connections (the figure an operator sizes max_connections by, for every server and
 * worker process), reads keep the pool's settings and prepared statements, and a refusal says that
 * reads are busy, where a second pool's wait for a connection ends in the same error as a database
 * out of reach. The hot paths go through no gate: they pay nothing for it.
 *
 * Each read still runs under the pool's statement timeout (timeouts.ts), with no shorter limit of its
 * own: that timeout is what an operator raises for searches over a large history, and once the gate
 * bounds how many reads run, a long one costs the workers nothing. A limit for reads alone would take
 * a transaction per read (SET LOCAL: two more round trips) or a second pool.
 */
import { UnavailableError } from "../../core/errors.js";

export class ReadGate {
  private running = 0;
  /** The waiting reads' turns, first come first served. */
  private readonly waiting: (() => void)[] = [];

  constructor(
    /** Reads running at once. */
    readonly limit: number,
    /** How long a read waits for its turn before it is refused. */
    readonly waitMs: number,
  ) {}

  /** `read` once its turn has come; refused with database_unavailable if it does not come within waitMs. */
  async run<T>(read: () => Promise<T>): Promise<T> {
    await this.turn();
    try {
      return await read();
    } finally {
      this.leave();
    }
  }

  private turn(): Promise<void> {
    if (this.running < this.limit) {
      this.running++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const take = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(take), 1);
        reject(
          new UnavailableError(
            "database_unavailable",
            `${this.limit} slow reads (task listings and searches, counts, statistics) were already running and this one waited ${this.waitMs} ms for its turn; nothing was read: send it again shortly, or ask for less (a narrower search)`,
          ),
        );
      }, this.waitMs);
      this.waiting.push(take);
    });
  }

  /** The next waiting read takes this one's place; `running` stays as it is then. */
  private leave(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  }
}
