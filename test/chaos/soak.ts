/**
 * The soak: steady enqueue and drain for a long time, with workers SIGKILLed and replaced, the
 * coordinator's retention on with a short age, while the memory of every process and the size of
 * every growing table are sampled. At the end it says whether they stayed bounded, and the history
 * checker judges what remains.
 */
import { readFileSync } from "node:fs";
import Database from "better-sqlite3";
import pg from "pg";
import type { WorkerProcess } from "../process/harness.js";
import { ChaosCluster, type Target } from "./cluster.js";
import { checkHistory, type HistorySummary } from "./history.js";

/** The tables that grow with the work done; retention must keep each bounded. */
export const GROWING_TABLES = ["tasks", "task_events", "reassignment_events", "workers"] as const;

export interface SoakConfig {
  target: Target;
  dialect: "postgres" | "sqlite";
  seconds: number;
  /** Tasks enqueued per second (in batches every 250 ms); one in ten of each batch is cancelled at once. */
  ratePerSecond: number;
  workers: number;
  killEveryMs: number;
  sampleEveryMs: number;
  /** Retention age of completed and cancelled tasks. */
  retainMs: number;
}

/** One sample: rows and bytes per table (bytes: pg_total_relation_size; on SQLite the whole file's page_count × page_size), RSS per process. */
export interface Sample {
  at: number;
  rows: Record<string, number>;
  bytes: Record<string, number>;
  rssBytes: Record<string, number>;
}

export interface SoakReport {
  seconds: number;
  enqueued: number;
  cancelled: number;
  kills: number;
  pruned: { tasks: number; events: number; reassignments: number; workers: number };
  remaining: number;
  samples: Sample[];
  /** Completions workers were told were accepted, per task, over the whole run (pruned tasks included). */
  duplicateCompletions: number;
  summary: HistorySummary;
  crashed: { id: string; code: number | null }[];
  autovacuum: boolean | null;
}

/** A series stayed bounded when the max of its last quarter is at most `factor` × the max of its first quarter, plus `slack`. */
export function unbounded(samples: Sample[], pick: (s: Sample) => Record<string, number>, factor: number, slack: number): string[] {
  const quarter = Math.max(1, Math.floor(samples.length / 4));
  const first = samples.slice(0, quarter);
  const last = samples.slice(-quarter);
  const names = new Set(samples.flatMap((s) => Object.keys(pick(s))));
  const grew: string[] = [];
  for (const name of names) {
    const max = (xs: Sample[]) => Math.max(...xs.map((s) => pick(s)[name] ?? 0));
    // A series must be sampled in both quarters (a replaced worker's is not).
    if (!first.every((s) => name in pick(s)) || !last.every((s) => name in pick(s))) continue;
    if (max(last) > max(first) * factor + slack) grew.push(`${name}: first quarter max ${max(first)}, last quarter max ${max(last)}`);
  }
  return grew;
}

/** Resident memory of a process, from /proc (Linux). */
function rss(pid: number): number | null {
  try {
    const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
    return kb ? Number(kb) * 1024 : null;
  } catch {
    return null;
  }
}

/** Reads the table sizes straight from the database, as an operator's monitoring would. */
interface TableMeter {
  measure(): Promise<Pick<Sample, "rows" | "bytes">>;
  /** PostgreSQL's autovacuum setting (null on SQLite): without it a deleted row's space is never reused. */
  autovacuum: boolean | null;
  close(): Promise<void>;
}

async function tableMeter(config: SoakConfig): Promise<TableMeter> {
  if (config.dialect === "sqlite") {
    const db = new Database(config.target.url.slice("sqlite:".length), { readonly: true });
    return {
      async measure() {
        const rows: Record<string, number> = {};
        for (const t of GROWING_TABLES) rows[t] = (db.prepare(`SELECT count(*) AS n FROM ${t}`).get() as { n: number }).n;
        const pages = db.pragma("page_count", { simple: true }) as number;
        const size = db.pragma("page_size", { simple: true }) as number;
        return { rows, bytes: { database: pages * size } };
      },
      autovacuum: null,
      async close() {
        db.close();
      },
    };
  }
  const client = new pg.Client({ connectionString: config.target.url });
  await client.connect();
  const schema = config.target.schema ?? "taskpool";
  const { rows: [setting] } = await client.query<{ autovacuum: string }>("SHOW autovacuum");
  return {
    autovacuum: setting.autovacuum === "on",
    async measure() {
      const rows: Record<string, number> = {};
      const bytes: Record<string, number> = {};
      for (const t of GROWING_TABLES) {
        const { rows: [r] } = await client.query<{ n: string; size: string }>(`SELECT (SELECT count(*) FROM "${schema}".${t}) AS n, pg_total_relation_size('"${schema}".${t}') AS size`);
        rows[t] = Number(r.n);
        bytes[t] = Number(r.size);
      }
      return { rows, bytes };
    },
    async close() {
      await client.end();
    },
  };
}

/** Runs the soak and returns what it measured; the caller asserts. */
export async function runSoak(config: SoakConfig): Promise<SoakReport> {
  const cluster = await ChaosCluster.open(config.target);
  const meter = await tableMeter(config);
  const samples: Sample[] = [];
  let enqueued = 0;
  let cancelled = 0;
  let kills = 0;
  try {
    // One worker is never killed, so the memory of a long-lived worker is measured too.
    const steady = await cluster.startWorker({ CONCURRENCY: "8" }, "steady");
    await Promise.all(Array.from({ length: config.workers - 1 }, () => cluster.startWorker({ CONCURRENCY: "8" })));
    const coordinator = await cluster.startCoordinator("coordinator", { RETAIN_MS: String(config.retainMs) });
    const longLived: WorkerProcess[] = [steady, coordinator];

    const started = Date.now();
    const until = started + config.seconds * 1000;
    const sample = async () => {
      const rssBytes: Record<string, number> = { test: process.memoryUsage().rss };
      for (const p of longLived) {
        const r = p.child.pid ? rss(p.child.pid) : null;
        if (r !== null) rssBytes[p.id] = r;
      }
      samples.push({ at: Date.now() - started, ...(await meter.measure()), rssBytes });
    };
    const producer = (async () => {
      const perBatch = Math.max(1, Math.round(config.ratePerSecond / 4));
      while (Date.now() < until) {
        const results = await cluster.pool.enqueueMany(Array.from({ length: perBatch }, () => ({ taskType: "step", params: { steps: 4, stepMs: 100 }, maxAttempts: 50 })));
        enqueued += results.length;
        if (results.length >= 10) {
          // A cancellation may lose to a claim; only the ones that happen count.
          const ok = await cluster.pool.cancel(results[0].task.id).then(() => true, () => false);
          if (ok) cancelled++;
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    const storm = (async () => {
      while (Date.now() < until) {
        await new Promise((r) => setTimeout(r, config.killEveryMs));
        const victims = cluster.live().filter((p) => p.id !== "steady");
        if (Date.now() >= until || victims.length === 0) continue;
        await cluster.kill(victims[Math.floor(Math.random() * victims.length)].id);
        kills++;
        await cluster.startWorker({ CONCURRENCY: "8" });
      }
    })();
    const sampler = (async () => {
      while (Date.now() < until) {
        await sample();
        await new Promise((r) => setTimeout(r, config.sampleEveryMs));
      }
    })();
    await Promise.all([producer, storm, sampler]);
    await sample();

    // The drain runs under a coordinator on the default retention (7 days), so what finished lately
    // stays for the checker instead of being pruned while the last tasks end.
    await cluster.kill("coordinator");
    await cluster.startCoordinator("drainer");
    await cluster.drained(120_000);
    const history = await cluster.history();
    const pruned = { tasks: 0, events: 0, reassignments: 0, workers: 0 };
    for (const line of [...cluster.coordinators.values()].flatMap((c) => c.lines).filter((l) => l.event === "prune")) {
      for (const k of Object.keys(pruned) as (keyof typeof pruned)[]) pruned[k] += Number(line[k]);
    }
    const accepted = new Map<number, number>();
    for (const e of history.log) if (e.kind === "write" && e.op === "complete" && e.ok === true) accepted.set(e.taskId, (accepted.get(e.taskId) ?? 0) + 1);
    // The checker judges the tasks that remain; the lines of pruned tasks are judged above.
    const remaining = new Set(history.tasks.map((t) => t.id));
    const summary = checkHistory({ ...history, log: history.log.filter((e) => remaining.has(e.taskId)) });
    return {
      seconds: (Date.now() - started) / 1000,
      enqueued,
      cancelled,
      kills,
      pruned,
      remaining: history.tasks.length,
      samples,
      duplicateCompletions: [...accepted.values()].filter((n) => n > 1).length,
      summary,
      crashed: cluster.crashed(),
      autovacuum: meter.autovacuum,
    };
  } finally {
    await meter.close();
    await cluster.close();
  }
}
