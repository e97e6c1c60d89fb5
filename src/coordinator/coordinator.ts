/**
 * The coordinator: every sweep interval, whoever holds the "coordinator" leadership lease runs one
 * sweep (stale → dead workers, recovery of their tasks and of expired leases, reassignment), then
 * fires the recurring schedules that are due; in between, it sweeps again the moment a worker turns
 * dead or a lease runs out (see wakeIn). Any
 * number may run — inside servers or alone — and only one acts at a time; the others stand by and
 * take over within a lease time (3 leadership ticks, 45 s at most) if the leader disappears. The
 * leadership is renewed and contested at ticks no longer than 15 s, however rare the sweeps: with a
 * lease of 3 sweep intervals, a leader killed under the default 60 s sweep held off its successor
 * for up to 3 minutes, and a worker dead beside it waited that long on top of dead_after. The sweep itself is
 * idempotent, so even two leaders in a clock-skew corner would handle each dead worker once.
 *
 * A failing tick is only logged, since the next may succeed; a run of them raises an error-level alarm,
 * and the leader records each finished sweep, so `taskpool status` can tell when nobody is sweeping.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { pino, type Logger } from "pino";
import { ValidationError } from "../core/errors.js";
import type { FiredSchedule } from "../core/schedule.js";
import { FireOptionsSchema, type SweepOptions, SweepOptionsSchema } from "../core/schemas.js";
import { refuseUnknownOptions, validate } from "../core/validation.js";
import { DEFAULT_DEAD_AFTER_MS, DEFAULT_STALE_AFTER_MS, type RecoveryPolicy, type SweepResult } from "../core/worker.js";
import type { LeadershipStatus, Store } from "../store/store.js";
import { DEFAULT_RETENTION, MAX_AGE_SECONDS, MAX_BATCH_SIZE, type PruneOptions, type PruneResult, type RetentionOptions } from "../core/retention.js";
import { counted } from "../core/counted.js";

export interface CoordinatorOptions {
  /** Default 60000 (DEFAULT_SWEEP_INTERVAL_MS). */
  sweepIntervalMs?: number;
  /** A worker silent this long turns stale and gets no reassigned work. Default 60000. */
  staleAfterMs?: number;
  /** A worker silent this long is dead; its tasks are recovered. Default 120000. */
  deadAfterMs?: number;
  /** How long a reassigned task waits for the worker chosen for it. Default 30000. */
  reservationMs?: number;
  /** Per task type; unlisted types retry. */
  recoveryPolicies?: Record<string, RecoveryPolicy>;
  coordinatorId?: string;
  logger?: Logger;
  /** Called after every sweep this coordinator ran (metrics, tests). */
  onSweep?: (result: SweepResult, durationMs: number) => void;
  /** Called after every pass over the due schedules this coordinator ran (metrics, tests). */
  onSchedules?: (fired: FiredSchedule[]) => void;
  /**
   * Deleting finished tasks once old (see core/retention.ts for the defaults: completed and cancelled
   * after 7 days, failed kept); the leader does it after each sweep, in batches. `false`: keep everything.
   */
  retention?: RetentionOptions | false;
  /** Called after every sweep's retention batches, with what they deleted in all (metrics, tests). */
  onPrune?: (result: PruneResult) => void;
}

const COORDINATOR_OPTIONS: Record<keyof CoordinatorOptions, true> = {
  sweepIntervalMs: true,
  staleAfterMs: true,
  deadAfterMs: true,
  reservationMs: true,
  recoveryPolicies: true,
  coordinatorId: true,
  logger: true,
  onSweep: true,
  onSchedules: true,
  retention: true,
  onPrune: true,
};

/** The leadership the coordinators compete for, and under which the leader records its sweeps. */
export const COORDINATOR_LEADERSHIP = "coordinator";
export const DEFAULT_SWEEP_INTERVAL_MS = 60_000;

/**
 * Whether the last recorded sweep is too old for any coordinator to be sweeping: two of the intervals
 * its coordinator recorded sweeping at, and never less than two default ones (120 s), which a short
 * interval's passing hiccups stay under. `taskpool status`, `/readyz` and the dashboard say so by this
 * one rule. False when none ever swept: whether that matters depends on the pool's use.
 */
export function sweepOverdue(status: LeadershipStatus): boolean {
  const interval = Math.max(status.sweepIntervalSeconds ?? 0, DEFAULT_SWEEP_INTERVAL_MS / 1000);
  return status.secondsSinceSweep !== null && status.secondsSinceSweep > 2 * interval;
}
/** How long after a worker turns dead (or a lease runs out), by the store's clock, the leader wakes to sweep. */
const RECOVERY_MARGIN_MS = 50;
/** How soon after a sweep the leader looks again at a recovery found due at once (see planRecovery). */
const RECHECK_AFTER_SWEEP_MS = 1000;
/** Failed ticks in a row after which the coordinator raises the alarm: one or two are a passing blip. */
const FAILED_TICKS_ALARM = 3;
/** The leadership lease lasts this many leadership ticks, so a missed tick or two does not lose it. */
const LEASE_TICKS = 3;
/** The longest time between leadership ticks; a longer sweep interval is a whole number of them. */
const MAX_LEAD_TICK_MS = 15_000;
/** Leadership ticks keep the lease short and the timer's delay small whatever this is; the limit is for the workers waiting on the sweep. */
const MAX_SWEEP_INTERVAL_MS = 8 * 3_600_000;
/** How long a stop waits for its resignation to be written: with the database hanging, a statement's 10 s. */
const RESIGN_WITHIN_MS = 2000;
// The checked store refuses longer sweep thresholds (core/schemas.ts): every tick would fail.
const MAX_THRESHOLD_MS = (SweepOptionsSchema.properties.deadAfterSeconds.maximum ?? Infinity) * 1000;
/** A tick found less than this late is on time, however short the sweep interval: missing one takes an outage. */
const MIN_GRACE_SECONDS = 60;
const MAX_GRACE_SECONDS = FireOptionsSchema.properties.graceSeconds.maximum ?? Infinity;

export class Coordinator {
  readonly id: string;
  private readonly sweepIntervalMs: number;
  /** Leadership ticks per sweep interval: the leader sweeps at every this many, and at its first. */
  private readonly ticksPerSweep: number;
  /** Leadership ticks since this coordinator last swept as leader. */
  private ticksSinceSweep = 0;
  private readonly sweepOptions: SweepOptions;
  private readonly retention: { prune: PruneOptions; batchesPerSweep: number } | null;
  private readonly logger: Logger;
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  /**
   * Moved on by each start() and stop(): a tick of an earlier run, still finishing when the coordinator
   * is started again, does not set a timer of its own beside the new run's (two chains of ticks, every
   * leadership try and sweep made twice as often).
   */
  private run = 0;
  /** When the next leadership tick is due (performance.now()); a recovery wake-up in between keeps the cadence. */
  private nextTickAt = 0;
  private ticking: Promise<void> = Promise.resolve();
  /**
   * Set by stop(): the tick under way takes no further step. Each step is a statement, and against a
   * database gone silent each waits out its timeout: a stop that waited for the whole tick (its lead,
   * sweep, schedules and pruning, one after another) took a multiple of it.
   */
  private stopping = false;
  private leading = false;
  /** Until when (performance.now()) the lease won at the last tick lasts for sure: it was asked for before then. */
  private leadingUntil = 0;
  /** Ticks that reached the database. */
  private ticks = 0;
  /** Whether, at its last tick, this coordinator stood by behind another that led. */
  private leaderSeen = false;
  private failedTicks = 0;
  /** While leading: milliseconds from the last tick or recovery to the next moment a sweep would take something back. */
  private recoveryInMs: number | null = null;
  private failingSince: Date | null = null;

  constructor(
    private readonly store: Store,
    private readonly options: CoordinatorOptions = {},
  ) {
    refuseUnknownOptions(options, COORDINATOR_OPTIONS, "coordinator option");
    const { sweepIntervalMs, staleAfterMs, deadAfterMs, reservationMs } = resolveSweepTimes(options);
    this.sweepIntervalMs = sweepIntervalMs;
    this.ticksPerSweep = Math.ceil(sweepIntervalMs / MAX_LEAD_TICK_MS);
    // Checked now, as each sweep would check them: a bad policy used to fail every tick, and no dead worker's task was recovered.
    this.sweepOptions = validate<SweepOptions>(
      SweepOptionsSchema,
      { staleAfterSeconds: staleAfterMs / 1000, deadAfterSeconds: deadAfterMs / 1000, reservationSeconds: reservationMs / 1000, recoveryPolicies: options.recoveryPolicies },
      "coordinator options",
    );
    this.retention = options.retention === false ? null : resolveRetention(options.retention ?? {});
    this.id = options.coordinatorId ?? `coordinator-${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
    this.logger = (options.logger ?? pino({ name: "taskpool" })).child({ coordinatorId: this.id });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.run++;
    this.stopping = false;
    this.logger.info({ sweepIntervalMs: this.sweepIntervalMs, ...this.sweepOptions }, "Coordinator started");
    this.nextTickAt = performance.now();
    this.wakeIn(0, null);
  }

  /**
   * The next wake-up: the next leadership tick, or sooner, while leading, the moment a worker turns
   * dead or a lease runs out (`recoveryInMs`). Without it a worker dying just after its beat waited
   * dead_after plus up to a whole sweep interval (3 minutes at the defaults, against the SPEC's 2).
   */
  private wakeIn(tickInMs: number, recoveryInMs: number | null): void {
    const recovery = recoveryInMs !== null && recoveryInMs < tickInMs;
    const run = this.run;
    this.timer = setTimeout(
      () => {
        this.timer = null;
        if (!recovery) this.nextTickAt += this.leadTickMs;
        this.ticking = (recovery ? this.recover() : this.tick()).finally(() => {
          if (this.stopping || run !== this.run) return;
          // A tick slower than the interval is not stacked on: the ticks it overlapped are skipped.
          const now = performance.now();
          while (this.nextTickAt < now) this.nextTickAt += this.leadTickMs;
          this.wakeIn(this.nextTickAt - now, this.recoveryInMs);
        });
      },
      Math.max(0, recovery ? recoveryInMs : tickInMs),
    );
  }

  async stop(): Promise<void> {
    // One only built for its sweeps on demand (a server's recover-stale without a coordinator) never started: nothing to say.
    const started = this.running;
    this.running = false;
    this.run++;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.stopping = true;
    await this.ticking;
    if (this.leading) {
      // A courtesy (otherwise the next leader waits out the lease): not worth holding a stop for long.
      const resigned = await Promise.race([
        this.store.resign(COORDINATOR_LEADERSHIP, this.id).then(
          () => true,
          () => false,
        ),
        new Promise<boolean>((resolve) => setTimeout(() => resolve(false), RESIGN_WITHIN_MS).unref()),
      ]);
      this.logger.info(resigned ? "Coordinator stopped; leadership handed back: another coordinator leads from its next tick" : "Coordinator stopped; leadership not handed back (the database did not answer): another coordinator leads once its lease runs out");
    } else if (started) this.logger.info("Coordinator stopped");
    this.leading = false;
  }

  /** The time between leadership ticks: the sweep interval, or a whole fraction of it no longer than MAX_LEAD_TICK_MS. */
  private get leadTickMs(): number {
    return this.sweepIntervalMs / this.ticksPerSweep;
  }

  /** True while this coordinator holds the leadership. */
  get isLeader(): boolean {
    return this.leading;
  }

  /** Runs one sweep now, leader or not (operators' "recover stale tasks" button). */
  async sweepOnce(): Promise<SweepResult> {
    const started = performance.now();
    const result = await this.store.sweep(this.sweepOptions);
    const durationMs = performance.now() - started;
    this.report(result, durationMs);
    this.options.onSweep?.(result, durationMs);
    return result;
  }

  /**
   * Fires the recurring schedules that are due (the leader does it at every sweep). Safe from anywhere:
   * each tick fires once whoever calls. A tick found later than a new leader's takeover can take (a
   * lease of LEASE_TICKS leadership ticks, then a sweep interval: within LEASE_TICKS + 1 sweep
   * intervals, a minute at least) was missed, and its schedule's
   * missedTicks policy applies. `failoverSeconds`: this coordinator has just taken over from a leader
   * it saw at its previous tick, whose last sweep was that long ago; the ticks since fell during the
   * failover, not while no coordinator ran. That leader's lease may have been longer than this
   * coordinator's takeover time (a shorter --sweep-interval here), and such ticks were skipped as missed.
   */
  async fireSchedules(failoverSeconds = 0): Promise<FiredSchedule[]> {
    const takeover = Math.max(((LEASE_TICKS + 1) * this.sweepIntervalMs) / 1000, MIN_GRACE_SECONDS, failoverSeconds + this.sweepIntervalMs / 1000);
    const graceSeconds = Math.min(takeover, MAX_GRACE_SECONDS);
    const fired = await this.store.fireDueSchedules({ graceSeconds });
    for (const f of fired) {
      const details = { schedule: f.name, tickAt: f.tickAt?.toISOString() ?? null, tasks: f.taskIds.length, skippedTicks: f.skippedTicks };
      if (f.error !== null) this.logger.warn({ ...details, err: f.error }, `Schedule ${f.name}: no task made at its tick: ${f.error}`);
      else if (f.tickAt === null) this.logger.warn(details, `Schedule ${f.name}: skipped ${counted(f.skippedTicks, "missed tick")} (missed_ticks: skip)`);
      else this.logger.info(details, `Schedule ${f.name}: fired its ${details.tickAt} tick, ${counted(f.taskIds.length, "task")}`);
    }
    this.options.onSchedules?.(fired);
    return fired;
  }

  private async tick(): Promise<void> {
    // Planned afresh by this tick; one that fails leaves recoveries to the next tick's sweep.
    this.recoveryInMs = null;
    try {
      // Fractional seconds are fine (500 ms sweeps give 1.5 s); the floor keeps tiny test intervals leadable.
      const ttlSeconds = Math.max(1, (LEASE_TICKS * this.leadTickMs) / 1000);
      // A standby reads the lease it stands behind, so that taking over it knows when the last sweep was.
      const behind = this.leading ? null : await this.store.leadershipStatus(COORDINATOR_LEADERSHIP);
      if (this.stopping) return;
      const askedAt = performance.now();
      const leading = await this.store.tryLead(COORDINATOR_LEADERSHIP, this.id, ttlSeconds);
      if (leading) this.leadingUntil = askedAt + ttlSeconds * 1000;
      // Said at the first tick too: a standby that said nothing after "Coordinator started" looked stuck.
      if (leading !== this.leading || this.ticks === 0) this.logger.info(leading ? "Leading: this coordinator sweeps" : "Standing by: another coordinator leads");
      // A new leader sweeps at once: its predecessor's last sweep may be a whole interval old, or more.
      const sweepDue = leading && (!this.leading || ++this.ticksSinceSweep >= this.ticksPerSweep);
      this.leading = leading;
      this.ticks++;
      if (this.stopping) return;
      // A process stalled since it was granted the lease (frozen, starved, a long pause) may have lost
      // it meanwhile: it sweeps nothing and fires nothing, and asks again at its next tick. It swept,
      // recorded the sweep as its own and fired schedules beside the coordinator that had taken over.
      if (sweepDue && performance.now() >= this.leadingUntil) {
        this.leading = false;
        this.tickSucceeded();
        return;
      }
      if (sweepDue) {
        this.ticksSinceSweep = 0;
        // Taking over from a leader seen at the previous tick: the ticks since its last sweep fell during the failover.
        const failover = this.leaderSeen && behind !== null ? (behind.secondsSinceSweep ?? 0) : 0;
        // The schedules fire even when the sweep fails: a sweep fault (a lock timeout, a row it cannot
        // write) made every tick meanwhile count as missed, as if no coordinator had run.
        const sweepFailed = await this.sweepOnce()
          .then(() => this.store.recordSweep(COORDINATOR_LEADERSHIP, this.id, this.sweepIntervalMs / 1000))
          .then(
            () => null,
            (error: unknown) => error as Error,
          );
        if (this.stopping || performance.now() >= this.leadingUntil) return;
        await this.fireSchedules(failover);
        if (sweepFailed) throw sweepFailed;
      }
      this.leaderSeen = !leading && behind !== null && behind.holder !== null && behind.holder !== this.id;
      this.tickSucceeded();
      if (sweepDue && !this.stopping) await this.pruneFinished(ttlSeconds);
      await this.planRecovery(sweepDue);
    } catch (error) {
      this.tickFailed(error as Error);
    }
  }

  /** A wake-up between ticks for a worker turning dead or a lease running out: the leader sweeps then. */
  private async recover(): Promise<void> {
    // Cleared first: a sweep failing here waits for the next tick, not for another wake-up at once.
    this.recoveryInMs = null;
    // A process frozen or starved past its lease has lost it, maybe to another coordinator now sweeping:
    // the next tick asks for it again first.
    if (!this.leading || this.stopping || performance.now() >= this.leadingUntil) return;
    try {
      // Workers beat and leases are renewed meanwhile: a healthy worker's next deadline is always near
      // when dead_after is shorter than a tick, and a sweep for it would find nothing to do.
      const due = (await this.store.nextRecoveryIn(this.sweepOptions)) === 0;
      if (due) {
        await this.sweepOnce();
        await this.store.recordSweep(COORDINATOR_LEADERSHIP, this.id, this.sweepIntervalMs / 1000);
      }
      this.tickSucceeded();
      await this.planRecovery(due);
    } catch (error) {
      this.tickFailed(error as Error);
    }
  }

  /**
   * When the next wake-up for a recovery is due, if leading. The store answers the soonest deadline
   * only: one found due right after a sweep passed while that sweep ran (workers dying together), and
   * the later ones wait behind it, so it is not dropped. It is looked at again a second later, not at
   * once: a sweep takes all that is due at its start, and a second is what a state no sweep could mend
   * would then cost (a sweep a second, not a loop).
   */
  private async planRecovery(swept: boolean): Promise<void> {
    this.recoveryInMs = null;
    if (!this.leading || this.stopping) return;
    let seconds: number | null;
    try {
      seconds = await this.store.nextRecoveryIn(this.sweepOptions);
    } catch (error) {
      // Not the tick's failure: it succeeded (and said so), and a failure after that said "recovered" and
      // "failed (1 in a row)" at every tick, so a run of them never reached the alarm. The next tick plans again.
      this.logger.warn({ err: (error as Error).message }, `Could not read when the next recovery is due; asking again at the next tick: ${(error as Error).message}`);
      return;
    }
    if (seconds === null) return;
    // Just past the moment: the sweep takes back what is strictly older than its thresholds.
    this.recoveryInMs = swept && seconds === 0 ? RECHECK_AFTER_SWEEP_MS : seconds * 1000 + RECOVERY_MARGIN_MS;
  }

  /**
   * Retention's batches for this tick: each a short statement of its own, at most batchesPerSweep of
   * them, stopping when a batch comes back short (nothing more is due). A failure is only logged: the
   * sweep, which matters more, already ran, and the next tick tries again.
   */
  private async pruneFinished(ttlSeconds: number): Promise<void> {
    if (!this.retention) return;
    const { prune, batchesPerSweep } = this.retention;
    const total: PruneResult = { tasks: 0, events: 0, reassignments: 0, workers: 0, scheduleTicks: 0, idempotencyKeys: 0 };
    try {
      // The lease lasts 3 ticks: a sweep and schedules slow enough (a struggling database) outlast it, and
      // a standby takes over. Retention, the least urgent work, waits for a renewed lease, not beside it.
      this.leading = await this.store.tryLead(COORDINATOR_LEADERSHIP, this.id, ttlSeconds);
      if (!this.leading) return;
      for (let batch = 0; batch < batchesPerSweep && !this.stopping; batch++) {
        const r = await this.store.prune(prune);
        total.tasks += r.tasks;
        total.events += r.events;
        total.reassignments += r.reassignments;
        total.workers += r.workers;
        total.scheduleTicks += r.scheduleTicks;
        total.idempotencyKeys += r.idempotencyKeys;
        if (Math.max(r.tasks, r.workers, r.events, r.scheduleTicks, r.idempotencyKeys) < prune.batchSize) break;
      }
    } catch (error) {
      this.logger.warn({ err: (error as Error).message, ...total }, `Retention pass failed; trying again next sweep: ${(error as Error).message}`);
      return;
    }
    if (total.tasks + total.events + total.workers + total.scheduleTicks + total.idempotencyKeys > 0) {
      this.logger.info(
        total,
        `Retention: deleted ${total.tasks} finished tasks, ${total.events} events, ${total.workers} gone workers, ${total.scheduleTicks} schedule ticks, ${total.idempotencyKeys} idempotency keys`,
      );
    }
    this.options.onPrune?.(total);
  }

  private tickFailed(error: Error): void {
    this.failedTicks++;
    this.failingSince ??= new Date();
    const details = { err: error.message, failedTicks: this.failedTicks, failingSince: this.failingSince.toISOString() };
    if (this.failedTicks < FAILED_TICKS_ALARM) {
      this.logger.warn(details, `Coordinator tick failed (${this.failedTicks} in a row); trying again next interval: ${error.message}`);
      return;
    }
    // The alarm, then again at 6, 12, 24… failed ticks: an error a tick flooded the log during an outage
    // (240 lines an hour per coordinator, and every server runs one) where the workers said it once.
    const ticksOverAlarm = this.failedTicks / FAILED_TICKS_ALARM;
    if (!Number.isInteger(Math.log2(ticksOverAlarm))) {
      this.logger.debug(details, `Coordinator tick failed (${this.failedTicks} in a row): ${error.message}`);
      return;
    }
    this.logger.error(
      details,
      `Coordinator has failed ${this.failedTicks} ticks in a row since ${details.failingSince}: unless another coordinator leads, ` +
        `dead workers are not being detected and expired leases not recovered. Last error: ${error.message}`,
    );
  }

  private tickSucceeded(): void {
    if (this.failedTicks === 0) return;
    const details = { failedTicks: this.failedTicks, failingSince: this.failingSince?.toISOString() };
    // At the alarm's level or near it, so whoever saw the alarm sees it end.
    this.logger[this.failedTicks >= FAILED_TICKS_ALARM ? "warn" : "info"](
      details,
      `Coordinator recovered: ticks succeed again after ${this.failedTicks} failed in a row since ${details.failingSince}`,
    );
    this.failedTicks = 0;
    this.failingSince = null;
  }

  /** Warn only when tasks changed hands or found no worker; workers merely going stale is routine. */
  private report(r: SweepResult, durationMs: number): void {
    for (const w of r.deadWorkers) this.logger.error({ worker: w }, `Dead worker detected: ${w}`);
    const tasksMoved = r.requeued.length + r.failed.length + r.unassigned.length > 0;
    if (!tasksMoved && r.staleWorkers.length === 0 && r.deadWorkers.length === 0) return;
    this.logger[tasksMoved ? "warn" : "info"](
      { durationMs: Math.round(durationMs), stale: r.staleWorkers, dead: r.deadWorkers, requeued: r.requeued, failed: r.failed, reassigned: r.reassigned, unassigned: r.unassigned },
      `Sweep: ${counted(r.staleWorkers.length, "worker")} stale, ${r.deadWorkers.length} dead; ${counted(r.requeued.length, "task")} requeued, ${r.failed.length} failed, ` +
        `${r.reassigned.length} reassigned, ${r.unassigned.length} without a worker with room`,
    );
  }
}

/** The coordinator's sweep interval and worker thresholds with their defaults; refuses bad ones (checked before anything is opened by the CLI). */
export function resolveSweepTimes(options: Pick<CoordinatorOptions, "sweepIntervalMs" | "staleAfterMs" | "deadAfterMs" | "reservationMs">): {
  sweepIntervalMs: number;
  staleAfterMs: number;
  deadAfterMs: number;
  reservationMs: number;
} {
  const sweepIntervalMs = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
  const staleAfterMs = options.staleAfterMs ?? DEFAULT_STALE_AFTER_MS;
  const deadAfterMs = options.deadAfterMs ?? DEFAULT_DEAD_AFTER_MS;
  const reservationMs = options.reservationMs ?? 30_000;
  const thresholdLimit = `a store accepts sweep thresholds of at most ${MAX_THRESHOLD_MS} ms`;
  const limits: Record<string, [number, number, string]> = {
    sweepIntervalMs: [
      sweepIntervalMs,
      MAX_SWEEP_INTERVAL_MS,
      "a dead worker's tasks would wait that long for their recovery",
    ],
    staleAfterMs: [staleAfterMs, MAX_THRESHOLD_MS, thresholdLimit],
    deadAfterMs: [deadAfterMs, MAX_THRESHOLD_MS, thresholdLimit],
    reservationMs: [reservationMs, MAX_THRESHOLD_MS, thresholdLimit],
  };
  for (const [name, [value, max, why]] of Object.entries(limits)) {
    if (typeof value !== "number") throw new ValidationError(`Invalid coordinator option ${name}: ${JSON.stringify(value)} (must be a number of milliseconds)`, [{ path: name, message: "not a number" }]);
    if (!Number.isFinite(value) || value < 10) throw new ValidationError(`Invalid coordinator option ${name}: ${value} (at least 10 ms)`, [{ path: name, message: "out of range" }]);
    if (value > max) throw new ValidationError(`Invalid coordinator option ${name}: ${value} (at most ${max} ms: ${why})`, [{ path: name, message: "out of range" }]);
  }
  if (deadAfterMs < staleAfterMs) {
    throw new ValidationError(
      `Invalid coordinator options: deadAfterMs (${deadAfterMs}) must not be shorter than staleAfterMs (${staleAfterMs}); raise deadAfterMs or lower staleAfterMs`,
      [{ path: "deadAfterMs", message: "below staleAfterMs" }],
    );
  }
  return { sweepIntervalMs, staleAfterMs, deadAfterMs, reservationMs };
}

const DAY_MS = 86_400_000;
const MAX_BATCHES_PER_SWEEP = 100;

/** The coordinator's retention settings with their defaults, as the store's prune options; refuses bad ones. */
export function resolveRetention(options: RetentionOptions): { prune: PruneOptions; batchesPerSweep: number } {
  const r = { ...DEFAULT_RETENTION, ...options };
  const ageMax = MAX_AGE_SECONDS * 1000;
  const batchMax = MAX_BATCH_SIZE;
  const invalid = (name: string, value: unknown, why: string) =>
    new ValidationError(`Invalid coordinator option retention.${name}: ${value} (${why})`, [{ path: `retention.${name}`, message: why }]);
  const ages: [string, number | null][] = [["completedAfterMs", r.completedAfterMs], ["cancelledAfterMs", r.cancelledAfterMs], ["failedAfterMs", r.failedAfterMs]];
  for (const [name, value] of ages) {
    if (value === null && name === "failedAfterMs") continue;
    if (typeof value !== "number" || !Number.isFinite(value) || value < 1000 || value > ageMax) {
      throw invalid(name, value, `from 1000 ms to ${ageMax} ms (${ageMax / DAY_MS} days)${name === "failedAfterMs" ? ", or null to keep failed tasks" : ""}`);
    }
  }
  if (r.failedAfterMs !== null && r.failedAfterMs < r.completedAfterMs) {
    throw invalid("failedAfterMs", r.failedAfterMs, `shorter than completedAfterMs (${r.completedAfterMs}): keep failed tasks at least as long, or null to keep them until retried`);
  }
  if (!Number.isInteger(r.batchSize) || r.batchSize < 1 || r.batchSize > batchMax) throw invalid("batchSize", r.batchSize, `a whole number of rows from 1 to ${batchMax}`);
  if (!Number.isInteger(r.batchesPerSweep) || r.batchesPerSweep < 1 || r.batchesPerSweep > MAX_BATCHES_PER_SWEEP) {
    throw invalid("batchesPerSweep", r.batchesPerSweep, `a whole number from 1 to ${MAX_BATCHES_PER_SWEEP}`);
  }
  return {
    prune: {
      completedAfterSeconds: r.completedAfterMs / 1000,
      cancelledAfterSeconds: r.cancelledAfterMs / 1000,
      failedAfterSeconds: r.failedAfterMs === null ? null : r.failedAfterMs / 1000,
      batchSize: r.batchSize,
    },
    batchesPerSweep: r.batchesPerSweep,
  };
}
