/**
 * The live status `taskpool dev` keeps on a terminal: task counts by role and status, the workers and
 * the last events, redrawn in place below the banner every second, so the screen does not scroll the
 * banner (URLs, key) away. Off a terminal, dev prints plain log lines instead.
 */
import type { Taskpool } from "../api/taskpool.js";
import { TASK_STATUSES, type TaskCounts } from "../core/task.js";
import type { WorkerRecord } from "../core/worker.js";
import { cell, type Column, formatTable, time } from "./table.js";

/** What one redraw shows. */
export interface StatusFrame {
  now: Date;
  byType: TaskCounts["byType"];
  workers: Pick<WorkerRecord, "workerId" | "status" | "currentLoad" | "capacity" | "tasksProcessed" | "secondsSinceHeartbeat">[];
  /** Log lines, oldest first. */
  events: string[];
}

/** Events kept for the frame. */
const LAST_EVENTS = 8;
const REFRESH_MS = 1000;
/** Lines the frame may use however short the terminal: a smaller one scrolls rather than shows nothing. */
const MIN_HEIGHT = 8;
const CSI = "\x1b[";

const WORKER_COLUMNS: Column<StatusFrame["workers"][number]>[] = [
  { header: "worker", value: (w) => w.workerId },
  { header: "status", value: (w) => w.status },
  { header: "load", value: (w) => `${w.currentLoad}/${w.capacity}` },
  { header: "done", value: (w) => w.tasksProcessed },
  { header: "heartbeat", value: (w) => `${w.secondsSinceHeartbeat}s ago` },
];

/** A line cut to `width` characters, the cut marked. */
const fit = (line: string, width: number) => (line.length <= width ? line : `${line.slice(0, Math.max(0, width - 1))}…`);

/** Lines the last events keep however short the terminal: the crash and its recovery are what dev is watched for. */
const EVENTS_KEPT = 3;

/**
 * The frame as at most `height` lines of at most `width` characters: a heading with the time, a table
 * of task counts (a row per role, a column per status some task is in), the workers, then as many of
 * the last events as fit, newest last. On a short terminal (80×24 leaves 11 lines below the banner)
 * the tables become a line each, workers first, so that the last events keep EVENTS_KEPT lines: they
 * were the first thing cut, and the crash and its recovery went unseen.
 */
export function renderStatus(frame: StatusFrame, width: number, height: number): string[] {
  const roles = Object.entries(frame.byType).sort(([a], [b]) => a.localeCompare(b));
  const statuses = TASK_STATUSES.filter((s) => roles.some(([, counts]) => (counts[s] ?? 0) > 0));
  const countColumns: Column<(typeof roles)[number]>[] = [{ header: "role", value: ([role]) => role }, ...statuses.map((s) => ({ header: s, value: ([, c]: (typeof roles)[number]) => c[s] ?? 0 }))];
  let roleLines = roles.length === 0 ? ["No tasks yet"] : formatTable(countColumns, roles);
  let workerLines = frame.workers.length === 0 ? ["No workers yet"] : formatTable(WORKER_COLUMNS, frame.workers);
  // The heading, three blank lines and "LAST EVENTS" take 5.
  const over = () => 5 + roleLines.length + workerLines.length + Math.min(frame.events.length, EVENTS_KEPT) - height;
  if (over() > 0 && frame.workers.length > 0) {
    const byStatus = tally(frame.workers.map((w) => w.status));
    workerLines = [`Workers: ${frame.workers.length} (${byStatus}); taskpool workers lists them`];
  }
  if (over() > 0 && roles.length > 0) {
    const total = (s: string) => roles.reduce((n, [, c]) => n + (c[s as keyof typeof c] ?? 0), 0);
    roleLines = [`Tasks of ${roles.length} roles: ${statuses.map((s) => `${total(s)} ${s}`).join(", ")}`];
  }
  const head = [`${time(frame.now)}  live status, redrawn every second; Ctrl-C stops`, "", ...roleLines, "", ...workerLines, "", "LAST EVENTS"];
  const room = height - head.length;
  const events = room > 0 ? frame.events.slice(-room).map((e) => cell(e)) : [];
  return [...head, ...events].slice(0, height).map((line) => (line === "" ? "" : fit(`  ${line}`, width)));
}

/** "5 active, 1 dead": how many of each, in the order first met. */
function tally(values: string[]): string {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return [...counts].map(([v, n]) => `${n} ${v}`).join(", ");
}

/**
 * Redraws the status in place every second until stopped. dev's log lines go through `print`: its
 * events until it stops (from before it starts, so nothing scrolls above the banner), plain lines after.
 */
export class LiveStatus {
  private readonly events: { line: string; routine: boolean }[] = [];
  private pool: Taskpool | null = null;
  private banner: string[] = [];
  private stopped = false;
  /** Lines of the frame on screen, to move back over. */
  private drawn = 0;
  private timer: NodeJS.Timeout | null = null;
  private drawing: Promise<void> = Promise.resolve();
  private busy = false;
  private readonly restoreCursor = () => void this.out.write(`${CSI}?25h`);
  private readonly redrawAll = () => {
    // A narrower terminal re-wraps the old frame: moving up over it would miss lines. Start afresh.
    this.out.write(`${CSI}2J${CSI}H${this.banner.join("\n")}\n`);
    this.drawn = 0;
    this.refresh();
  };

  constructor(private readonly out: NodeJS.WriteStream = process.stdout) {}

  /**
   * A log line and its pino level: one of the last events (shown at the next redraw), or a plain line
   * once stopped. When the events are full, routine lines (debug: a task claimed, completed) go first
   * while they hold more than half: a busy pipeline does not push a crash or a recovery off the screen
   * within a second.
   */
  readonly print = (line: string, level = 30): void => {
    if (this.stopped) {
      this.out.write(`${line}\n`);
      return;
    }
    this.events.push({ line, routine: level < 30 });
    if (this.events.length <= LAST_EVENTS) return;
    // The oldest routine line while they hold more than half, else the oldest other: one always exists.
    const tooManyRoutine = this.events.filter((e) => e.routine).length > LAST_EVENTS / 2;
    this.events.splice(this.events.findIndex((e) => e.routine === tooManyRoutine), 1);
  };

  /**
   * Hides the cursor (it would flicker over the frame) and draws a frame of `pool`'s status every
   * second below `banner`, the lines just printed, which the frame leaves room for.
   */
  start(pool: Taskpool, banner: string[]): void {
    this.pool = pool;
    this.banner = banner;
    this.out.write(`${CSI}?25l`);
    process.on("exit", this.restoreCursor);
    this.out.on("resize", this.redrawAll);
    this.timer = setInterval(() => this.refresh(), REFRESH_MS);
    this.refresh();
  }

  /** Draws the last frame, which stays on screen, and shows the cursor again: what is printed next goes below it. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.out.off("resize", this.redrawAll);
    await this.drawing;
    if (this.pool) await this.draw();
    this.stopped = true;
    this.restoreCursor();
    process.off("exit", this.restoreCursor);
  }

  private refresh(): void {
    // A redraw slower than the interval is not stacked on; none starts once stopping.
    if (this.busy || !this.timer) return;
    this.busy = true;
    this.drawing = this.draw().finally(() => (this.busy = false));
  }

  private async draw(): Promise<void> {
    let frame: StatusFrame;
    try {
      const pool = this.pool as Taskpool;
      const [counts, { workers }] = await Promise.all([pool.counts(), pool.workers()]);
      frame = { now: new Date(), byType: counts.byType, workers, events: this.events.map((e) => e.line) };
    } catch (error) {
      this.print(`status unavailable: ${(error as Error).message}`);
      return;
    }
    // A terminal that reports no size (0×0: a pty nobody sized, such as `script` run without a terminal) is taken as 80×24.
    const height = Math.max(MIN_HEIGHT, (this.out.rows || 24) - this.banner.length - 1);
    const lines = renderStatus(frame, this.out.columns || 80, height);
    const up = this.drawn > 0 ? `${CSI}${this.drawn}A\r` : "";
    // Each line clears what an older, longer one left; the end clears what a taller frame left below.
    this.out.write(`${up}${lines.map((line) => `${line}${CSI}K`).join("\n")}\n${CSI}J`);
    this.drawn = lines.length;
  }
}
