// At a glance: counts by role and status, throughput and pickup latency (of every role or one), dead workers, recent reassignments and whether a coordinator sweeps.
import { api, query } from "../lib/api.js";
import { ErrorBox, Loading, LongText, Status, ThroughputChart } from "../lib/components.js";
import { ago, duration, num, TASK_STATUSES, WORKER_STATUSES } from "../lib/format.js";
import { html } from "../lib/html.js";
import { serverNow } from "../lib/server-clock.js";
import { POLL_MS, usePoll } from "../lib/live.js";

/** Reassignments this recent are flagged. */
const RECENT_MS = 15 * 60_000;
/**
 * Dead workers stand out for a day; older ones (kept by retention for 7 days) are only counted: every
 * worker OOM-killed last week, each with its generated id, kept the banner red long after the incident.
 */
const DEAD_SHOWN_MS = 24 * 3600_000;
/** Workers the banner names; the rest it counts. 341 named in one line after an incident were no longer read. */
const BANNER_NAMED = 5;

/** The reassignments the overview reads to count the recent ones: past that many it says "100+". */
const REASSIGNMENTS_READ = 100;

/** The overview's data; `role` narrows the throughput to one task type. */
async function load(role) {
  const [counts, workers, throughput, reassignments, ready] = await Promise.all([
    api("GET", "api/tasks/counts"),
    // The workers the banner is about: every stale one and the 100 dead most recently heard from, with
    // the counts of the whole registry (the cards); the inactive ones pile up and are left to the Workers page.
    api("GET", `api/workers${query({ status: ["stale", "dead"] })}`),
    // A role the server refuses (a name typed into the address) is said in its panel, beside the picker
    // that fixes it: it replaced the whole page, the picker included.
    api("GET", `api/tasks/throughput${role ? `?task_type=${encodeURIComponent(role)}` : ""}`).catch((error) => {
      if (!role || error.status !== 400) throw error;
      return { refused: error };
    }),
    api("GET", `api/reassignments?limit=${REASSIGNMENTS_READ}`),
    api("GET", "readyz"),
  ]);
  return { counts, workers: workers.workers, workerCounts: workers.counts, throughput, reassignments: reassignments.reassignments, coordinator: ready.coordinator };
}

function Cards({ items }) {
  // Columns as wide as the longest figure (style.css): a pool's counts run to 7 digits and more,
  // which overflowed into the next card when the grid shrank columns to its 5rem minimum.
  const chars = Math.max(0, ...items.map(([, n]) => String(n ?? "").length));
  return html`<div class="cards" style=${`--chars: ${chars}`}>
    ${items.map(([label, n, cls]) => html`<div class="card"><div class="n ${cls ?? ""}">${n}</div><div class="l">${label}</div></div>`)}
  </div>`;
}

/** Without a coordinator sweeping, nothing takes back a dead worker's tasks: said loudly, once the pool is in use. */
function CoordinatorAlert({ coordinator, inUse }) {
  const never = coordinator.last_swept_at === null;
  if (never ? !inUse : !coordinator.sweep_overdue) return null;
  return html`<div class="alert bad" id="no-coordinator" role="alert">
    <strong>${never ? "No coordinator has ever swept" : `No coordinator has swept for ${duration(coordinator.seconds_since_sweep)}`}:</strong> dead workers are not detected and their tasks not recovered. Start one: <code>taskpool coordinator</code> (<code>taskpool serve</code> runs one unless given <code>--no-coordinator</code>).
  </div>`;
}

/** Every role, or the one whose throughput is shown (kept in the URL: `#/overview?role=crawl`). */
function RolePicker({ role, types }) {
  const choose = (e) => (location.hash = e.target.value ? `#/overview?role=${encodeURIComponent(e.target.value)}` : "#/overview");
  return html`<select id="throughput-role" aria-label="role" onChange=${choose}>
    <option value="" selected=${!role}>every role</option>
    ${[...new Set([...types, ...(role ? [role] : [])])].sort().map((t) => html`<option value=${t} selected=${t === role}>${t}</option>`)}
  </select>`;
}

export function Overview({ params }) {
  const role = params.role ?? "";
  // Five calls a poll (readyz is public, outside the key's limit): a slower period keeps a default key (100 requests a minute) well inside its limit.
  const { data, error } = usePoll(() => load(role), [role], Math.max(POLL_MS, 5000));
  if (!data) return html`<${ErrorBox} error=${error} />${!error && html`<${Loading} />`}`;
  const { counts, workers, workerCounts, throughput, reassignments, coordinator } = data;
  const listedDead = workers.filter((w) => w.status === "dead");
  const dead = workers.filter((w) => w.status === "stale" || (w.status === "dead" && w.seconds_since_heartbeat * 1000 < DEAD_SHOWN_MS));
  const recentDead = dead.filter((w) => w.status === "dead").length;
  // The dead come most recently heard from first: when every one listed died within the day, so may
  // some of those left out, and how many died longer ago is not known.
  const moreRecent = recentDead === listedDead.length && workerCounts.dead > listedDead.length;
  const deadLongAgo = moreRecent ? 0 : workerCounts.dead - recentDead;
  const named = dead.slice(0, BANNER_NAMED);
  const unnamed = dead.length - named.length;
  const recent = reassignments.filter((r) => serverNow() - Date.parse(r.created_at) < RECENT_MS);
  const types = Object.keys(counts.by_type).sort();
  const inUse = Object.values(workerCounts).some((n) => n > 0) || Object.values(counts.by_status).some((n) => n > 0);
  return html`
    <${ErrorBox} error=${error} />
    <${CoordinatorAlert} coordinator=${coordinator} inUse=${inUse} />
    ${dead.length > 0 &&
    html`<div class="alert bad" id="dead-workers" role="alert">
      <strong>${num(dead.length)}${moreRecent ? "+" : ""} worker${dead.length === 1 ? "" : "s"} not heard from:</strong>
      ${named.map((w) => html` <a href="#/workers?worker=${encodeURIComponent(w.worker_id)}"><${Status} status=${w.status} /> ${w.worker_id}</a> (${duration(w.seconds_since_heartbeat)})`)}
      ${(unnamed > 0 || moreRecent) && html` <span id="dead-unnamed">and ${num(unnamed)}${moreRecent ? "+" : ""} more (<a href="#/workers">workers</a>)</span>`}
      ${deadLongAgo > 0 && html` <span class="muted" id="dead-long-ago">· and ${num(deadLongAgo)} dead for over a day (<a href="#/workers">workers</a>)</span>`}
    </div>`}
    ${recent.length > 0 &&
    html`<div class="alert warn" id="recent-reassignments">
      <strong>${recent.length}${recent.length === REASSIGNMENTS_READ ? "+" : ""} reassignment${recent.length === 1 ? "" : "s"} in the last 15 minutes</strong> (${recent.filter((r) => !r.success).length} without a worker) · <a href="#/reassignments">history</a>
    </div>`}
    <div class="grid">
      <section class="panel">
        <h2>Tasks</h2>
        <${Cards} items=${TASK_STATUSES.map((s) => [s, num(counts.by_status[s]), `status-${s}`])} />
      </section>
      <section class="panel">
        <h2>Workers</h2>
        <${Cards} items=${WORKER_STATUSES.map((s) => [s, num(workerCounts[s]), `status-${s}`])} />
        <p class="small muted" id="coordinator">
          Coordinator: ${coordinator.holder ? html`<code>${coordinator.holder}</code> leads` : "none leads"}
          ${coordinator.last_swept_at && ` · last sweep ${ago(coordinator.last_swept_at)}`}
        </p>
      </section>
    </div>
    <section class="panel">
      <h2>Throughput, last hour <${RolePicker} role=${role} types=${types} /></h2>
      ${throughput.refused
        ? html`<${ErrorBox} error=${throughput.refused} />`
        : html`<${Cards}
              items=${[
                ["completed", num(throughput.completed), "status-completed"],
                ["failed", num(throughput.failed), "status-failed"],
                ["mean pickup latency", duration(throughput.pickup_seconds.mean)],
                ["max pickup latency", duration(throughput.pickup_seconds.max)],
              ]}
            />
            <${ThroughputChart} minutes=${throughput.minutes} />`}
      <p class="small muted">Pickup latency: from ready (scheduled_for) to the last claim, over the tasks that finished in the hour.</p>
    </section>
    <div class="grid">
      <section class="panel">
        <h2>By role</h2>
        <div class="scroll">
          <table id="counts-by-role">
            <thead><tr><th>role</th>${TASK_STATUSES.map((s) => html`<th class="num">${s}</th>`)}</tr></thead>
            <tbody>
              ${types.map(
                (t) => html`<tr class="clickable" onClick=${() => (location.hash = `#/tasks?task_type=${encodeURIComponent(t)}`)}>
                  <td class="text"><a href="#/tasks?task_type=${encodeURIComponent(t)}">${t}</a></td>${TASK_STATUSES.map((s) => html`<td class="num">${num(counts.by_type[t][s] ?? 0)}</td>`)}
                </tr>`,
              )}
            </tbody>
          </table>
          ${types.length === 0 && html`<p class="muted">No tasks yet.</p>`}
        </div>
      </section>
      <section class="panel">
        <h2>Recent reassignments</h2>
        <div class="scroll">
          <table>
            <thead><tr><th>when</th><th>task</th><th>from → to</th><th>reason</th></tr></thead>
            <tbody>
              ${reassignments.map(
                (r) => html`<tr class=${r.success ? "" : "bad"}>
                  <td>${ago(r.created_at)}</td>
                  <td><a href="#/tasks/${r.task_id}">#${r.task_id}</a></td>
                  <td class="text">${r.from_worker_id ?? "—"} → ${r.to_worker_id ?? html`<span class="status-failed">none</span>`}</td>
                  <td class="small text"><${LongText} text=${r.success ? r.reason : (r.error_message ?? r.reason)} /></td>
                </tr>`,
              )}
            </tbody>
          </table>
          ${reassignments.length === 0 && html`<p class="muted">None.</p>`}
        </div>
      </section>
    </div>`;
}
