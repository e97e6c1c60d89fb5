/**
 * The coordinator: every sweep interval, whoever holds the "coordinator" leadership lease runs one
 * sweep (stale → dead workers, recovery of their tasks and of expired leases, reassignment). Any
 * number may run — inside servers or alone — and only one acts at a time; the others stand by and
 * take over within a lease time (3 sweep intervals) if the leader disappears. The sweep itself is
 * idempotent, so even two leaders in a clock-skew corner would handle each dead worker once.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { pino, type Logger } from "pino";
import { ValidationError } from "../core/errors.js";
import type { RecoveryPolicy, SweepResult } from "../core/worker.js";
import type { Store } from "../store/store.js";

export interface CoordinatorOptions {
  /** Default 60000. */
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
}

const LEADERSHIP = "coordinator";

export class Coordinator {
  readonly id: string;
  private readonly sweepIntervalMs: number;
  private readonly sweepOptions;
  private readonly logger: Logger;
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> = Promise.resolve();
  private leading = false;

  constructor(
    private readonly store: Store,
    private readonly options: CoordinatorOptions = {},
  ) {
    this.sweepIntervalMs = options.sweepIntervalMs ?? 60_000;
    const staleAfterMs = options.staleAfterMs ?? 60_000;
    const deadAfterMs = options.deadAfterMs ?? 120_000;
    const reservationMs = options.reservationMs ?? 30_000;
    for (const [name, value] of Object.entries({ sweepIntervalMs: this.sweepIntervalMs, staleAfterMs, deadAfterMs, reservationMs })) {
      if (!Number.isFinite(value) || value < 10) throw new ValidationError(`Invalid coordinator option ${name}: ${value} (at least 10 ms)`, [{ path: name, message: "out of range" }]);
    }
    if (deadAfterMs < staleAfterMs) {
      throw new ValidationError(`Invalid coordinator options: deadAfterMs (${deadAfterMs}) must not be shorter than staleAfterMs (${staleAfterMs})`, [{ path: "deadAfterMs", message: "below staleAfterMs" }]);
    }
    this.sweepOptions = {
      staleAfterSeconds: staleAfterMs / 1000,
      deadAfterSeconds: deadAfterMs / 1000,
      reservationSeconds: reservationMs / 1000,
      recoveryPolicies: options.recoveryPolicies,
    };
    this.id = options.coordinatorId ?? `coordinator-${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
    this.logger = (options.logger ?? pino({ name: "taskpool" })).child({ coordinatorId: this.id });
  }

  start(): void {
    if (this.timer) return;
    this.logger.info({ sweepIntervalMs: this.sweepIntervalMs, ...this.sweepOptions }, "Coordinator started");
    let busy = false;
    const tick = () => {
      // A sweep slower than the interval is not stacked on: the tick that would overlap it is skipped.
      if (busy) return;
      busy = true;
      this.ticking = this.tick().finally(() => (busy = false));
    };
    tick();
    this.timer = setInterval(tick, this.sweepIntervalMs);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.ticking;
    if (this.leading) await this.store.resign(LEADERSHIP, this.id).catch(() => {});
    this.leading = false;
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

  private async tick(): Promise<void> {
    try {
      const ttlSeconds = Math.max(1, (3 * this.sweepIntervalMs) / 1000);
      const leading = await this.store.tryLead(LEADERSHIP, this.id, ttlSeconds);
      if (leading !== this.leading) this.logger.info(leading ? "Leading: this coordinator sweeps" : "Standing by: another coordinator leads");
      this.leading = leading;
      if (leading) await this.sweepOnce();
    } catch (error) {
      this.logger.error({ err: (error as Error).message }, "Sweep failed; trying again next interval");
    }
  }

  private report(r: SweepResult, durationMs: number): void {
    for (const w of r.deadWorkers) this.logger.error({ worker: w }, `Dead worker detected: ${w}`);
    if (r.requeued.length + r.failed.length + r.staleWorkers.length === 0) return;
    this.logger.warn(
      { durationMs: Math.round(durationMs), stale: r.staleWorkers, dead: r.deadWorkers, requeued: r.requeued, failed: r.failed, reassigned: r.reassigned, unassigned: r.unassigned },
      `Sweep: ${r.requeued.length} requeued, ${r.failed.length} failed, ${r.reassigned.length} reassigned, ${r.unassigned.length} without a healthy worker`,
    );
  }
}
