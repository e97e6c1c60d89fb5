/**
 * `GET /metrics` in Prometheus' text format (prom-client), on a registry of this server's own, so
 * several servers in one process (tests, an embedding app) never share or clash over series.
 *
 * Two kinds of figures. What the database holds (tasks by status and type, how long the oldest ready
 * task of each type has waited, workers by status,
 * reassignments over 24 h, how long ago a coordinator swept) is read from the pool when scraped, so
 * every server of a fleet reports the same totals; scrapes run one at a time because each resets those gauges before it fills them,
 * and a task type or status that disappeared must not linger as a stale series. What this server
 * handled (claims, completions, failures, retries, lease_lost refusals, latencies) is counted here
 * from hooks: the answers the routes already give say what happened, so no route changes for it.
 * Every HTTP label is the route's URL pattern (`/api/tasks/:id/complete`), never the raw URL, so
 * the number of series stays bounded whatever clients send.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Taskpool } from "../api/taskpool.js";
import { COORDINATOR_LEADERSHIP } from "../coordinator/coordinator.js";
import { monotonicMs } from "../core/clock.js";
import { TaskpoolError } from "../core/errors.js";
import { TASK_STATUSES } from "../core/task.js";
import { type SweepResult, WORKER_STATUSES } from "../core/worker.js";
import { within } from "./deadline.js";
import type { RouteConfig } from "./route.js";

/**
 * Who may read /metrics. `key`: a key of scope producer or admin (it shows what `GET
 * /api/tasks/counts` and `GET /api/workers` show), sent as X-API-Key or as `Authorization: Bearer`,
 * which Prometheus sends natively. `public`: anyone who can reach the server.
 */
export type MetricsAccess = "key" | "public";

const CLAIM = "/api/tasks/claim";
const CLAIM_BY_ID = "/api/tasks/:id/claim";
const COMPLETE = "/api/tasks/:id/complete";
const FAIL = "/api/tasks/:id/fail";
/** The batched writes of the library's HTTP transport (routes/worker-transport.ts): one outcome per item. */
const COMPLETE_MANY = "/api/tasks/complete";
const FAIL_MANY = "/api/tasks/fail";
const RETRY = "/api/tasks/:id/retry";
const TASK_HEARTBEAT = "/api/tasks/:id/heartbeat";
const WORKER_HEARTBEAT = "/api/workers/heartbeat";

/**
 * How long a scrape waits for the database before it answers with taskpool_database_up 0: under
 * Prometheus' default scrape timeout (10 s), or the scrape fails and the gauge never reaches an alert.
 */
const DATABASE_WITHIN_MS = 5000;

/** Latencies of calls that do not wait: a store round trip, a few milliseconds when healthy. */
/** What a sweep did, one series each of taskpool_sweep_outcomes_total. */
const SWEEP_OUTCOMES = ["dead_workers", "stale_workers", "requeued", "failed", "reassigned", "unassigned"] as const;
const FAST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** Requests, long-poll claims included (up to 30 s). */
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** A wire answer, read loosely: only the fields the counters need. */
interface Answer {
  success?: boolean;
  tasks?: unknown[];
  task?: { status?: string };
  /** The tasks a complete or fail claimed with `claim_next` (answers are read in their wire form). */
  next_tasks?: unknown[];
  lost?: unknown[];
  outcomes?: { ok: boolean; status?: string; error?: string }[];
}

/** The metrics of one server: its registry, its counters, and the gauges read from the pool when scraped. */
export class ServerMetrics {
  /** This server's registry (Node's default metrics included). */
  readonly registry = new Registry();

  private readonly tasks = this.gauge("taskpool_tasks", "Tasks in the database by status", ["status"]);
  private readonly tasksByType = this.gauge("taskpool_tasks_by_type", "Tasks in the database by task type and status", ["task_type", "status"]);
  private readonly workers = this.gauge("taskpool_workers", "Workers in the registry by status (dead: their tasks were recovered)", ["status"]);
  private readonly oldestReady = this.gauge(
    "taskpool_oldest_ready_task_age_seconds",
    "Seconds the longest-waiting ready task of each task type has waited since it was due (0: none is waiting). Alert when it passes what the type's users tolerate: it grows when workers fall behind or none serves the type, whatever the backlog's size",
    ["task_type"],
  );
  private readonly reassignments = this.gauge("taskpool_reassignments_24h", "Reassignments of dead workers' tasks over the last 24 hours, by whether a worker was found", ["result"]);
  // Labelled by who swept, which also lets it be absent (a gauge without labels always shows a value).
  private readonly sweepAge = this.gauge(
    "taskpool_coordinator_sweep_age_seconds",
    "Seconds since a coordinator last swept this pool, labelled with the one that did (absent: none ever has). Without sweeps, dead workers' tasks are never recovered: alert when it is absent or passes a few sweep intervals",
    ["swept_by"],
  );
  private readonly databaseUp = this.gauge("taskpool_database_up", "1 when the last scrape could read the database, else 0 (the database gauges are then absent)", []);

  private readonly claims = new Counter({
    name: "taskpool_claims_total",
    help: "Claims this server answered: result=claimed counts the tasks handed out (claim_next's with a complete or fail included), result=empty the claims answered 404 no_tasks",
    labelNames: ["result"],
    registers: [this.registry],
  });
  private readonly completions = this.counter("taskpool_completions_total", "Tasks completed through this server");
  private readonly failures = this.counter("taskpool_failures_total", "Failed attempts reported through this server (retried or not)");
  private readonly retries = new Counter({
    name: "taskpool_retries_total",
    help: "Tasks put back for another attempt through this server: kind=automatic after a failed attempt, kind=manual by POST /api/tasks/:id/retry",
    labelNames: ["kind"],
    registers: [this.registry],
  });
  private readonly leaseLost = new Counter({
    name: "taskpool_lease_lost_total",
    help: "Leases found lost: 409 lease_lost refusals by route, and tasks a worker heartbeat reported lost (route /api/workers/heartbeat)",
    labelNames: ["route"],
    registers: [this.registry],
  });

  private readonly sweepOutcomes = new Counter({
    name: "taskpool_sweep_outcomes_total",
    help: "What the coordinator sweeps this server ran did (POST /api/tasks/recover-stale, or the coordinator it runs, while that leads): workers found dead or stale, tasks requeued, failed, reassigned or left without a worker",
    labelNames: ["outcome"],
    registers: [this.registry],
  });
  private readonly sweepSeconds = new Histogram({
    name: "taskpool_sweep_duration_seconds",
    help: "Coordinator sweeps this server ran",
    buckets: FAST_BUCKETS,
    registers: [this.registry],
  });

  private readonly claimSeconds = new Histogram({
    name: "taskpool_claim_duration_seconds",
    help: "One claim in the store (each look of a long-poll claim counts once), by whether it found a task",
    labelNames: ["result"],
    buckets: FAST_BUCKETS,
    registers: [this.registry],
  });
  private readonly heartbeatSeconds = new Histogram({
    name: "taskpool_heartbeat_duration_seconds",
    help: "Accepted heartbeats, request to answer: kind=worker (POST /api/workers/heartbeat) or kind=task (a lease's)",
    labelNames: ["kind"],
    buckets: FAST_BUCKETS,
    registers: [this.registry],
  });
  private readonly requestSeconds = new Histogram({
    name: "taskpool_http_request_duration_seconds",
    help: "HTTP requests, request to answer, by method, route pattern and status code",
    labelNames: ["method", "route", "status_code"],
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });

  /** The scrape reading the database now, which a scrape arriving meanwhile shares. */
  private scraping: Promise<string> | null = null;
  /** When the database stopped answering scrapes (monotonic ms); null while it answers. */
  private databaseDownSince: number | null = null;

  constructor(
    private readonly pool: Taskpool,
    waitingClaims: () => number,
  ) {
    new Gauge({
      name: "taskpool_waiting_claims",
      help: "Requests waiting for work on this server now: long-poll claims, and the wake-up waits of library workers connected over HTTP",
      registers: [this.registry],
      collect() {
        this.set(waitingClaims());
      },
    });
    collectDefaultMetrics({ register: this.registry });
    // Every known series from the start at 0: a counter that appears at its first event cannot be
    // rated or alerted on before it (absent is not 0), and a standby's sweep outcomes never appeared.
    for (const result of ["claimed", "empty"]) this.claims.inc({ result }, 0);
    for (const kind of ["automatic", "manual"]) this.retries.inc({ kind }, 0);
    for (const outcome of SWEEP_OUTCOMES) this.sweepOutcomes.inc({ outcome }, 0);
    // The routes a stale worker's result or beat comes back through; the rarer lease calls appear at their first refusal.
    for (const route of [COMPLETE, FAIL, COMPLETE_MANY, FAIL_MANY, TASK_HEARTBEAT, WORKER_HEARTBEAT]) this.leaseLost.inc({ route }, 0);
  }

  /** Records one claim in the store (LongPoll calls it for every look). */
  observeClaim(seconds: number, claimed: number): void {
    this.claimSeconds.observe({ result: claimed > 0 ? "claimed" : "empty" }, seconds);
  }

  /** Records one coordinator sweep this server ran (the coordinator's onSweep). */
  observeSweep(result: SweepResult, durationMs: number): void {
    const outcomes: Record<(typeof SWEEP_OUTCOMES)[number], unknown[]> = {
      dead_workers: result.deadWorkers,
      stale_workers: result.staleWorkers,
      requeued: result.requeued,
      failed: result.failed,
      reassigned: result.reassigned,
      unassigned: result.unassigned,
    };
    // inc(0) too: every outcome has its series from the first sweep on.
    for (const [outcome, items] of Object.entries(outcomes)) this.sweepOutcomes.inc({ outcome }, items.length);
    this.sweepSeconds.observe(durationMs / 1000);
  }

  /** Registers `GET /metrics` and the hooks that count what the server handles. */
  install(app: FastifyInstance, access: MetricsAccess): void {
    const config: RouteConfig = access === "public" ? { access: "public" } : { access: ["producer"], acceptsBearer: true };
    app.get("/metrics", { schema: { hide: true }, config }, async (request, reply) => {
      const text = await this.scrape(request);
      return reply.type(this.registry.contentType).serializer((payload: string) => payload).send(text);
    });
    // Success answers, before serialization: what they hold says how many tasks a claim handed out and whether a failure is retried.
    app.addHook("preSerialization", async (request: FastifyRequest, _reply: FastifyReply, payload: unknown) => {
      this.countAnswer(request.routeOptions.url, payload as Answer);
      return payload;
    });
    app.addHook("onError", async (request: FastifyRequest, _reply: FastifyReply, error: FastifyError) => {
      if (!(error instanceof TaskpoolError)) return;
      const route = request.routeOptions.url;
      if (error.code === "lease_lost" && route) this.leaseLost.inc({ route });
      if (error.code === "no_tasks" && route === CLAIM) this.claims.inc({ result: "empty" });
    });
    app.addHook("onResponse", async (request: FastifyRequest, reply: FastifyReply) => {
      const seconds = reply.elapsedTime / 1000;
      // Requests no route matched share one label: their URLs are whatever the client made up.
      const route = request.routeOptions.url ?? "unmatched";
      this.requestSeconds.observe({ method: request.method, route, status_code: String(reply.statusCode) }, seconds);
      if (reply.statusCode < 300 && (route === WORKER_HEARTBEAT || route === TASK_HEARTBEAT)) {
        this.heartbeatSeconds.observe({ kind: route === WORKER_HEARTBEAT ? "worker" : "task" }, seconds);
      }
    });
  }

  private countAnswer(route: string | undefined, answer: Answer): void {
    if (answer?.success !== true) return;
    // A worker that asks for its next task with each outcome (claim_next; the Python worker always does) claims through these routes.
    if ((route === COMPLETE || route === FAIL) && answer.next_tasks && answer.next_tasks.length > 0) this.claims.inc({ result: "claimed" }, answer.next_tasks.length);
    if (route === CLAIM) this.claims.inc({ result: "claimed" }, answer.tasks?.length ?? 1);
    else if (route === CLAIM_BY_ID) this.claims.inc({ result: "claimed" });
    else if (route === COMPLETE) this.completions.inc();
    else if (route === FAIL) {
      this.failures.inc();
      if (answer.task?.status === "pending") this.retries.inc({ kind: "automatic" });
    } else if (route === RETRY) this.retries.inc({ kind: "manual" });
    else if (route === WORKER_HEARTBEAT && answer.lost && answer.lost.length > 0) this.leaseLost.inc({ route }, answer.lost.length);
    else if ((route === COMPLETE_MANY || route === FAIL_MANY) && answer.outcomes) {
      for (const outcome of answer.outcomes) {
        if (!outcome.ok) {
          if (outcome.error === "lease_lost") this.leaseLost.inc({ route });
        } else if (route === COMPLETE_MANY) this.completions.inc();
        else {
          this.failures.inc();
          if (outcome.status === "pending") this.retries.inc({ kind: "automatic" });
        }
      }
    }
  }

  /**
   * The exposition text; the database is read first. A scrape arriving while one reads it shares that
   * one's answer: the gauges are reset and set by one read at a time, and queued behind each other
   * while the database hung, each waiting out its own deadline, two Prometheus replicas' scrapes took
   * 5, 9, 13 s, past their timeout, and showed the target down instead of taskpool_database_up 0.
   */
  private scrape(request: FastifyRequest): Promise<string> {
    this.scraping ??= (async () => {
      try {
        await this.readDatabase(request);
        return await this.registry.metrics();
      } finally {
        this.scraping = null;
      }
    })();
    return this.scraping;
  }

  private async readDatabase(request: FastifyRequest): Promise<void> {
    const gauges = [this.tasks, this.tasksByType, this.oldestReady, this.workers, this.reassignments, this.sweepAge];
    for (const gauge of gauges) gauge.reset();
    try {
      const [counts, capacity, workers, rate, coordinator] = await within(Promise.all([
        this.pool.counts(),
        // Its pass over the pending tasks is the scrape's costliest read with a large backlog (about 0.15 s
        // at a million pending on PostgreSQL here), as it is for counts().
        this.pool.capacity(),
        // Only its counts (of the whole registry) are read: the smallest page, one gone worker and no
        // live one, rather than up to a thousand live workers and a hundred gone ones a scrape.
        this.pool.workers({ status: "dead", limit: 1 }),
        // The rate alone: the rest of the statistics reads the whole reassignment history (on PostgreSQL
        // with 150,000 reassignments, 190 ms of the scrape).
        this.pool.reassignmentRate(),
        this.pool.protocol.leadershipStatus(COORDINATOR_LEADERSHIP),
      ]), DATABASE_WITHIN_MS);
      if (coordinator.secondsSinceSweep !== null) this.sweepAge.set({ swept_by: coordinator.lastSweptBy ?? "" }, coordinator.secondsSinceSweep);
      for (const status of TASK_STATUSES) this.tasks.set({ status }, counts.byStatus[status] ?? 0);
      for (const [taskType, byStatus] of Object.entries(counts.byType)) {
        // Every status of a type that exists, zeros included, so a rate or a ratio over them never lacks a series.
        for (const status of TASK_STATUSES) this.tasksByType.set({ task_type: taskType, status }, byStatus[status] ?? 0);
      }
      for (const row of capacity) this.oldestReady.set({ task_type: row.taskType }, row.oldestReadySeconds ?? 0);
      for (const status of WORKER_STATUSES) this.workers.set({ status }, workers.counts[status]);
      this.reassignments.set({ result: "successful" }, rate.successful);
      this.reassignments.set({ result: "failed" }, rate.total - rate.successful);
      this.databaseUp.set(1);
      if (this.databaseDownSince !== null) request.log.info(`Metrics: the database answers again, after ${Math.round((monotonicMs() - this.databaseDownSince) / 1000)} s`);
      this.databaseDownSince = null;
    } catch (error) {
      // The process metrics are still worth a scrape; the database ones are left out rather than stale.
      for (const gauge of gauges) gauge.reset();
      this.databaseUp.set(0);
      // Once per outage, not per scrape: taskpool_database_up says the rest.
      if (this.databaseDownSince === null) request.log.warn(`Metrics: the database did not answer (${(error as Error).message}); taskpool_database_up is 0 until it does`);
      this.databaseDownSince ??= monotonicMs();
    }
  }

  private gauge<L extends string>(name: string, help: string, labelNames: L[]): Gauge<L> {
    return new Gauge({ name, help, labelNames, registers: [this.registry] });
  }

  private counter(name: string, help: string): Counter {
    return new Counter({ name, help, registers: [this.registry] });
  }
}
