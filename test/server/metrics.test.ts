import { describe, expect, it, vi } from "vitest";
import type { Taskpool } from "../../src/api/taskpool.js";
import { COORDINATOR_LEADERSHIP } from "../../src/coordinator/coordinator.js";
import { buildServer, type ServerOptions } from "../../src/server/server.js";
import { postgresKind, sqliteKind } from "../helpers/stores.js";
import { useServer } from "./harness.js";

/** One sample of the exposition text. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const LABEL_VALUE = String.raw`"(?:[^"\\\n]|\\[\\"n])*"`;
const LABEL = `[a-zA-Z_][a-zA-Z0-9_]*=${LABEL_VALUE}`;
// Values are what Go's ParseFloat reads, which takes NaN and Inf in any case (prom-client writes "Nan" for an empty mean).
const VALUE = String.raw`(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?[iI][nN][fF]|[nN][aA][nN])`;
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(${LABEL}(?:,${LABEL})*)?\\})? (${VALUE})(?: -?\\d+)?$`);
const HELP = new RegExp(String.raw`^# HELP (${NAME}) (?:[^\\\n]|\\[\\n])*$`);
const TYPE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);
const SUFFIXES: Record<string, string[]> = { counter: [""], gauge: [""], untyped: [""], histogram: ["_bucket", "_sum", "_count"], summary: ["", "_sum", "_count"] };

/**
 * A strict reader of Prometheus' text format (0.0.4): every line is empty, a HELP, a TYPE or a sample;
 * a family is declared once, before its samples; sample names belong to the family declared last;
 * no series twice; a histogram's buckets rise with `le` up to +Inf, which equals its _count.
 */
function parseExposition(text: string): Sample[] {
  expect(text.endsWith("\n"), "the text ends with a newline").toBe(true);
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  const seen = new Set<string>();
  let family: string | null = null;
  for (const line of text.slice(0, -1).split("\n")) {
    // The format ignores empty lines (prom-client puts one between families).
    if (line === "") continue;
    const help = HELP.exec(line);
    const type = TYPE.exec(line);
    if (help) continue;
    if (type) {
      expect(types.has(type[1]), `${type[1]} declared once`).toBe(false);
      types.set(type[1], type[2]);
      family = type[1];
      continue;
    }
    const sample = SAMPLE.exec(line);
    expect(sample, `not a valid exposition line: ${JSON.stringify(line)}`).not.toBeNull();
    const [, name, labelText, valueText] = sample as RegExpExecArray;
    expect(family, `${name} comes after a TYPE line`).not.toBeNull();
    const suffix = name.slice((family as string).length);
    expect(name.startsWith(family as string) && SUFFIXES[types.get(family as string) as string].includes(suffix), `${name} belongs to family ${family}`).toBe(true);
    const labels: Record<string, string> = {};
    for (const [, key, raw] of (labelText ?? "").matchAll(new RegExp(`([a-zA-Z_][a-zA-Z0-9_]*)=(${LABEL_VALUE})`, "g"))) {
      expect(labels[key], `label ${key} once in ${line}`).toBeUndefined();
      labels[key] = raw.slice(1, -1).replace(/\\(.)/g, (_m, c: string) => (c === "n" ? "\n" : c));
    }
    const series = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    expect(seen.has(series), `series ${series} once`).toBe(false);
    seen.add(series);
    const lower = valueText.toLowerCase();
    samples.push({ name, labels, value: lower === "nan" ? NaN : lower.endsWith("inf") ? (lower.startsWith("-") ? -Infinity : Infinity) : Number(valueText) });
  }
  for (const [name, type] of types) if (type === "histogram") checkHistogram(name, samples);
  return samples;
}

function checkHistogram(name: string, samples: Sample[]): void {
  const groups = new Map<string, Sample[]>();
  for (const s of samples.filter((x) => x.name === `${name}_bucket`)) {
    const { le, ...rest } = s.labels;
    expect(le, `${name}_bucket has le`).toBeDefined();
    const key = JSON.stringify(Object.entries(rest).sort());
    groups.set(key, [...(groups.get(key) ?? []), s]);
  }
  for (const [key, buckets] of groups) {
    const les = buckets.map((b) => (b.labels.le === "+Inf" ? Infinity : Number(b.labels.le)));
    expect(les, `${name} buckets in order`).toEqual([...les].sort((a, b) => a - b));
    expect(les.at(-1)).toBe(Infinity);
    for (let i = 1; i < buckets.length; i++) expect(buckets[i].value).toBeGreaterThanOrEqual(buckets[i - 1].value);
    const count = samples.find((x) => x.name === `${name}_count` && JSON.stringify(Object.entries(x.labels).sort()) === key);
    expect(count?.value, `${name}_count ${key}`).toBe(buckets.at(-1)?.value);
  }
}

/** The value of one series, undefined when absent. */
function valueOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const match = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return match.length === 0 ? undefined : match.reduce((sum, s) => sum + s.value, 0);
}

/** Another server on the same pool, as a second process of a fleet would be. */
async function listen(pool: Taskpool, options: ServerOptions) {
  const app = await buildServer(pool, options);
  return { app, url: await app.listen({ host: "127.0.0.1", port: 0 }) };
}

async function scrape(url: string, headers: Record<string, string> = {}): Promise<Sample[]> {
  const response = await fetch(`${url}/metrics`, { headers });
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(await response.text());
}

describe("the exposition reader the tests rely on", () => {
  it("refuses what is not the text format", () => {
    expect(() => parseExposition("# TYPE a counter\na 1\n")).not.toThrow();
    expect(() => parseExposition("# TYPE a counter\na{x=unquoted} 1\n")).toThrow();
    expect(() => parseExposition("# TYPE a counter\na one\n")).toThrow();
    expect(() => parseExposition("a 1\n")).toThrow();
    expect(() => parseExposition("# TYPE a counter\nb 1\n")).toThrow();
    expect(() => parseExposition("# TYPE a counter\na 1\na 2\n")).toThrow();
    expect(() => parseExposition('# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n')).toThrow();
  });
});

describe.each([sqliteKind, postgresKind])("/metrics on $name", (kind) => {
  const s = useServer(kind, { auth: "none", dashboard: false, coordinator: { staleAfterMs: 10_000, deadAfterMs: 20_000 } });

  it("the figures move as tasks are enqueued, claimed, completed and failed, in valid exposition format", async () => {
    const before = await scrape(s.url);
    expect(valueOf(before, "taskpool_tasks", { status: "pending" })).toBe(0);
    expect(valueOf(before, "taskpool_database_up")).toBe(1);
    expect(valueOf(before, "taskpool_waiting_claims")).toBe(0);
    expect(valueOf(before, "process_cpu_user_seconds_total")).toBeGreaterThan(0);
    expect(valueOf(before, "nodejs_heap_size_used_bytes")).toBeGreaterThan(0);
    // Counters of known series are there at 0 from the start, not at their first event: absent is not 0 to an alert.
    for (const result of ["claimed", "empty"]) expect(valueOf(before, "taskpool_claims_total", { result })).toBe(0);
    for (const kind of ["automatic", "manual"]) expect(valueOf(before, "taskpool_retries_total", { kind })).toBe(0);
    for (const outcome of ["dead_workers", "stale_workers", "requeued", "failed", "reassigned", "unassigned"]) {
      expect(valueOf(before, "taskpool_sweep_outcomes_total", { outcome })).toBe(0);
    }
    for (const route of ["/api/tasks/:id/complete", "/api/tasks/complete", "/api/workers/heartbeat"]) {
      expect(valueOf(before, "taskpool_lease_lost_total", { route })).toBe(0);
    }

    const batch = await s.call("POST", "/api/tasks/batch", {
      tasks: [
        { task_type: "crawl", max_attempts: 3 },
        { task_type: "crawl", max_attempts: 3 },
        { task_type: "crawl", max_attempts: 1 },
        { task_type: "report" },
      ],
    });
    expect(batch.status).toBe(201);
    let m = await scrape(s.url);
    expect(valueOf(m, "taskpool_tasks", { status: "pending" })).toBe(4);
    expect(valueOf(m, "taskpool_tasks_by_type", { task_type: "crawl", status: "pending" })).toBe(3);
    expect(valueOf(m, "taskpool_tasks_by_type", { task_type: "report", status: "pending" })).toBe(1);
    expect(valueOf(m, "taskpool_tasks_by_type", { task_type: "report", status: "completed" })).toBe(0);

    const claimed = await s.call("POST", "/api/tasks/claim", { worker_id: "w1", task_types: ["crawl"], limit: 3, sort_by: "created_at" });
    expect(claimed.body.tasks).toHaveLength(3);
    const [first, second, last] = claimed.body.tasks.map((t: { id: number; lease_token: string }) => ({ id: t.id, lease: { worker_id: "w1", lease_token: t.lease_token } }));
    expect((await s.call("POST", "/api/tasks/claim", { worker_id: "w1", task_types: ["nothing"] })).status).toBe(404);
    m = await scrape(s.url);
    expect(valueOf(m, "taskpool_claims_total", { result: "claimed" })).toBe(3);
    expect(valueOf(m, "taskpool_claims_total", { result: "empty" })).toBe(1);
    expect(valueOf(m, "taskpool_claim_duration_seconds_count", { result: "claimed" })).toBe(1);
    expect(valueOf(m, "taskpool_claim_duration_seconds_count", { result: "empty" })).toBe(1);
    expect(valueOf(m, "taskpool_tasks", { status: "claimed" })).toBe(3);
    expect(valueOf(m, "taskpool_tasks", { status: "pending" })).toBe(1);

    for (const t of [first, second, last]) expect((await s.call("POST", `/api/tasks/${t.id}/start`, t.lease)).status).toBe(200);
    expect((await s.call("POST", `/api/tasks/${first.id}/heartbeat`, first.lease)).status).toBe(200);
    expect((await s.call("POST", `/api/tasks/${first.id}/complete`, { ...first.lease, result: { ok: true } })).status).toBe(200);
    expect((await s.call("POST", `/api/tasks/${second.id}/fail`, { ...second.lease, error: "timeout" })).body.task.status).toBe("pending");
    expect((await s.call("POST", `/api/tasks/${last.id}/fail`, { ...last.lease, error: "broken" })).body.task.status).toBe("failed");
    expect((await s.call("POST", `/api/tasks/${last.id}/retry`)).status).toBe(200);
    // A stale lease: the task was given back and claimed by another worker; the first one's token is refused.
    const report = await s.call("POST", "/api/tasks/claim", { worker_id: "w1", task_types: ["report"] });
    const stale = { worker_id: "w1", lease_token: report.body.lease_token };
    expect((await s.call("POST", `/api/tasks/${report.body.task.id}/release`, stale)).status).toBe(200);
    expect((await s.call("POST", "/api/tasks/claim", { worker_id: "w2", task_types: ["report"] })).status).toBe(200);
    expect((await s.call("POST", `/api/tasks/${report.body.task.id}/progress`, { ...stale, progress: 0.5 })).body.error).toBe("lease_lost");
    const beat = await s.call("POST", "/api/workers/heartbeat", {
      worker_id: "w1",
      roles: ["crawl"],
      capacity: 2,
      current_load: 0,
      tasks_processed: 3,
      // Its lease on the report task, since released and claimed by w2.
      leases: [{ task_id: report.body.task.id, lease_token: stale.lease_token }],
    });
    expect(beat.body.lost).toEqual([report.body.task.id]);

    m = await scrape(s.url);
    expect(valueOf(m, "taskpool_completions_total")).toBe(1);
    expect(valueOf(m, "taskpool_failures_total")).toBe(2);
    expect(valueOf(m, "taskpool_retries_total", { kind: "automatic" })).toBe(1);
    expect(valueOf(m, "taskpool_retries_total", { kind: "manual" })).toBe(1);
    expect(valueOf(m, "taskpool_claims_total", { result: "claimed" })).toBe(5);
    expect(valueOf(m, "taskpool_lease_lost_total", { route: "/api/tasks/:id/progress" })).toBe(1);
    expect(valueOf(m, "taskpool_lease_lost_total", { route: "/api/workers/heartbeat" })).toBe(1);
    expect(valueOf(m, "taskpool_tasks", { status: "completed" })).toBe(1);
    expect(valueOf(m, "taskpool_tasks", { status: "pending" })).toBe(2);
    expect(valueOf(m, "taskpool_tasks", { status: "claimed" })).toBe(1);
    expect(valueOf(m, "taskpool_tasks_by_type", { task_type: "crawl", status: "completed" })).toBe(1);
    expect(valueOf(m, "taskpool_workers", { status: "active" })).toBe(1);
    expect(valueOf(m, "taskpool_heartbeat_duration_seconds_count", { kind: "worker" })).toBe(1);
    expect(valueOf(m, "taskpool_heartbeat_duration_seconds_count", { kind: "task" })).toBe(1);

    // Request latency is labelled by route pattern, never by the raw URL.
    const routes = new Set(m.filter((x) => x.name === "taskpool_http_request_duration_seconds_count").map((x) => x.labels.route));
    expect(routes).toContain("/api/tasks/:id/start");
    expect([...routes].filter((r) => /\/\d/.test(r))).toEqual([]);
    expect(valueOf(m, "taskpool_http_request_duration_seconds_count", { method: "POST", route: "/api/tasks/:id/start", status_code: "200" })).toBe(3);
    expect(valueOf(m, "taskpool_http_request_duration_seconds_count", { route: "/api/tasks/claim", status_code: "404" })).toBe(1);
    await s.call("GET", `/no/such/${Date.now()}`);
    m = await scrape(s.url);
    expect(valueOf(m, "taskpool_http_request_duration_seconds_count", { route: "unmatched", status_code: "404" })).toBe(1);
  });

  it("how long the oldest ready task of each type has waited since it was due", async () => {
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    await s.call("POST", "/api/tasks/batch", {
      tasks: [{ task_type: "crawl", scheduled_for: hourAgo }, { task_type: "crawl" }, { task_type: "report", scheduled_for: new Date(Date.now() + 3_600_000).toISOString() }],
    });
    let m = await scrape(s.url);
    expect(valueOf(m, "taskpool_oldest_ready_task_age_seconds", { task_type: "crawl" })).toBeGreaterThanOrEqual(3600);
    expect(valueOf(m, "taskpool_oldest_ready_task_age_seconds", { task_type: "crawl" })).toBeLessThan(3630);
    // Pending but not yet due: nothing is waiting.
    expect(valueOf(m, "taskpool_oldest_ready_task_age_seconds", { task_type: "report" })).toBe(0);
    expect((await s.call("POST", "/api/tasks/claim", { worker_id: "w1", task_types: ["crawl"], limit: 2 })).body.tasks).toHaveLength(2);
    m = await scrape(s.url);
    expect(valueOf(m, "taskpool_oldest_ready_task_age_seconds", { task_type: "crawl" })).toBe(0);
  });

  it("the batched completions and failures of HTTP workers count per item", async () => {
    await s.call("POST", "/api/tasks/batch", { tasks: [{ task_type: "crawl" }, { task_type: "crawl" }, { task_type: "crawl" }] });
    const claimed = await s.call("POST", "/api/tasks/claim", { worker_id: "w1", limit: 3 });
    const [a, b, c] = claimed.body.tasks.map((t: { id: number; lease_token: string }) => ({ id: t.id, lease: { worker_id: "w1", lease_token: t.lease_token } }));
    const completed = await s.call("POST", "/api/tasks/complete", { completions: [{ id: a.id, lease: a.lease }, { id: b.id, lease: { ...b.lease, lease_token: "stale" } }] });
    expect(completed.body.outcomes.map((o: { ok: boolean }) => o.ok)).toEqual([true, false]);
    const failed = await s.call("POST", "/api/tasks/fail", { failures: [{ id: c.id, lease: c.lease, error: "timeout" }] });
    expect(failed.body.outcomes).toMatchObject([{ ok: true, status: "pending" }]);
    const m = await scrape(s.url);
    expect(valueOf(m, "taskpool_completions_total")).toBe(1);
    expect(valueOf(m, "taskpool_failures_total")).toBe(1);
    expect(valueOf(m, "taskpool_retries_total", { kind: "automatic" })).toBe(1);
    expect(valueOf(m, "taskpool_lease_lost_total", { route: "/api/tasks/complete" })).toBe(1);
  });

  it("tasks claimed with claim_next count as claims, as the histogram times them", async () => {
    await s.call("POST", "/api/tasks/batch", { tasks: [{ task_type: "crawl" }, { task_type: "crawl" }, { task_type: "crawl" }, { task_type: "crawl" }] });
    const first = await s.call("POST", "/api/tasks/claim", { worker_id: "w1", start: true });
    const lease = { worker_id: "w1", lease_token: first.body.lease_token };
    const completed = await s.call("POST", `/api/tasks/${first.body.task.id}/complete`, { ...lease, claim_next: { start: true } });
    expect(completed.body.next_tasks).toHaveLength(1);
    const next = completed.body.next_tasks[0];
    const failed = await s.call("POST", `/api/tasks/${next.id}/fail`, { worker_id: "w1", lease_token: next.lease_token, error: "timeout", claim_next: { limit: 5 } });
    expect(failed.body.next_tasks).toHaveLength(2);
    const m = await scrape(s.url);
    expect(valueOf(m, "taskpool_claims_total", { result: "claimed" })).toBe(4);
    expect(valueOf(m, "taskpool_claim_duration_seconds_count", { result: "claimed" })).toBe(3);
  });

  it("waiting long-poll claims, dead workers and sweeps show up", async () => {
    const waiting = s.call("POST", "/api/tasks/claim", { worker_id: "w2", task_types: ["later"], wait_ms: 10_000 });
    for (let i = 0; valueOf(await scrape(s.url), "taskpool_waiting_claims") !== 1; i++) {
      expect(i, "the claim is waiting within 5 s").toBeLessThan(100);
      await new Promise((r) => setTimeout(r, 50));
    }
    await s.call("POST", "/api/tasks", { task_type: "later" });
    expect((await waiting).status).toBe(200);
    let m = await scrape(s.url);
    expect(valueOf(m, "taskpool_waiting_claims")).toBe(0);
    expect(valueOf(m, "taskpool_claims_total", { result: "claimed" })).toBe(1);
    // The first look found nothing, a later one the task.
    expect(valueOf(m, "taskpool_claim_duration_seconds_count", { result: "empty" })).toBeGreaterThanOrEqual(1);
    expect(valueOf(m, "taskpool_claim_duration_seconds_count", { result: "claimed" })).toBe(1);

    expect(valueOf(m, "taskpool_coordinator_sweep_age_seconds"), "no coordinator has swept yet").toBeUndefined();

    await s.call("POST", "/api/workers/heartbeat", { worker_id: "w2", roles: ["later"], capacity: 1, current_load: 1, tasks_processed: 0 });
    s.clock.advance(30_000);
    const swept = await s.call("POST", "/api/tasks/recover-stale");
    expect(swept.body.dead_workers).toEqual(["w2"]);
    m = await scrape(s.url);
    // A sweep asked for by hand is not a coordinator at work: only a leader's periodic sweeps count.
    expect(valueOf(m, "taskpool_coordinator_sweep_age_seconds")).toBeUndefined();
    await s.pool.protocol.recordSweep(COORDINATOR_LEADERSHIP, "coordinator-a", 60);
    s.clock.advance(90_000);
    expect(valueOf(await scrape(s.url), "taskpool_coordinator_sweep_age_seconds", { swept_by: "coordinator-a" })).toBe(90);
    expect(valueOf(m, "taskpool_workers", { status: "dead" })).toBe(1);
    expect(valueOf(m, "taskpool_workers", { status: "active" })).toBe(0);
    expect(valueOf(m, "taskpool_sweep_outcomes_total", { outcome: "dead_workers" })).toBe(1);
    expect(valueOf(m, "taskpool_sweep_outcomes_total", { outcome: "requeued" })).toBe(swept.body.requeued.length);
    expect(valueOf(m, "taskpool_sweep_duration_seconds_count")).toBe(1);
    expect(valueOf(m, "taskpool_reassignments_24h", { result: "successful" }) ?? 0).toBe(swept.body.reassigned.length);
  });

  it("a scrape reads the 24-hour reassignment figures alone, not the statistics of the whole history", async () => {
    // reassignmentStats() also reads 7 days and every reassignment ever logged (v_repeated_reassignments):
    // 190 ms of a scrape on PostgreSQL with 150,000 of them, for figures /metrics does not report.
    const stats = vi.spyOn(s.pool.protocol, "reassignmentStats");
    const rate = vi.spyOn(s.pool.protocol, "reassignmentRate");
    try {
      expect(valueOf(await scrape(s.url), "taskpool_reassignments_24h", { result: "failed" })).toBe(0);
      expect([stats.mock.calls.length, rate.mock.calls.length]).toEqual([0, 1]);
    } finally {
      vi.restoreAllMocks();
    }
  });

  it("each server counts on its own registry", async () => {
    const other = await listen(s.pool, { auth: "none", dashboard: false });
    try {
      await s.call("POST", "/api/tasks", { task_type: "crawl" });
      expect((await fetch(`${other.url}/api/tasks/claim`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"worker_id":"w9"}' })).status).toBe(200);
      expect(valueOf(await scrape(other.url), "taskpool_claims_total", { result: "claimed" })).toBe(1);
      expect(valueOf(await scrape(s.url), "taskpool_claims_total", { result: "claimed" }) ?? 0).toBe(0);
      // Both read the same database.
      expect(valueOf(await scrape(s.url), "taskpool_tasks", { status: "claimed" })).toBe(1);
    } finally {
      await other.app.close();
    }
  });
});

describe.each([sqliteKind, postgresKind])("who may read /metrics on $name", (kind) => {
  const s = useServer(kind, { auth: "keys", dashboard: false });

  it("a producer or admin key, as X-API-Key or Authorization: Bearer; 401 without, 403 for a worker key", async () => {
    const producer = (await s.pool.createApiKey({ scope: "producer" })).key;
    const worker = (await s.pool.createApiKey({ scope: "worker" })).key;
    const admin = (await s.pool.createApiKey({ scope: "admin" })).key;
    expect(await s.call("GET", "/metrics")).toMatchObject({
      status: 401,
      body: { success: false, error: "unauthorized", message: "Missing API key: send it in the X-API-Key header or as Authorization: Bearer <key> (`taskpool keys create` makes one)" },
    });
    expect(await s.call("GET", "/metrics", undefined, { key: worker })).toMatchObject({ status: 403, body: { success: false, error: "forbidden" } });
    expect(await s.call("GET", "/metrics", undefined, { key: null, headers: { authorization: "Bearer tp_wrong" } })).toMatchObject({ status: 401 });
    expect(await s.call("GET", "/metrics", undefined, { key: null, headers: { authorization: `Basic ${producer}` } })).toMatchObject({ status: 401 });
    expect(valueOf(await scrape(s.url, { "x-api-key": producer }), "taskpool_database_up")).toBe(1);
    expect(valueOf(await scrape(s.url, { authorization: `Bearer ${producer}` }), "taskpool_database_up")).toBe(1);
    expect(valueOf(await scrape(s.url, { authorization: `bearer ${admin}` }), "taskpool_database_up")).toBe(1);
    // Two keys in the Authorization header are refused naming that header, not X-API-Key, which was not sent.
    expect(await s.call("GET", "/metrics", undefined, { key: null, headers: { authorization: `Bearer ${producer},${admin}` } })).toMatchObject({
      status: 400,
      body: { error: "bad_request", message: "Send one Authorization: Bearer header, with one key: this request sent 2 (keys joined with a comma)" },
    });
    // Bearer is for /metrics only: the API's other routes document and take X-API-Key.
    expect((await s.call("GET", "/api/tasks/counts", undefined, { key: null, headers: { authorization: `Bearer ${admin}` } })).status).toBe(401);
  });

  it("metricsAccess public: no key needed, the rest of the API still asks for one", async () => {
    const open = await listen(s.pool, { auth: "keys", dashboard: false, metricsAccess: "public" });
    try {
      expect(valueOf(await scrape(open.url), "taskpool_database_up")).toBe(1);
      expect((await fetch(`${open.url}/api/tasks/counts`)).status).toBe(401);
    } finally {
      await open.app.close();
    }
  });
});
