// The worker registry: the live workers, the gone ones folded a page at a time; status by colour, heartbeat age, load, and a worker's running tasks.
import { useState } from "preact/hooks";
import { api, query } from "../lib/api.js";
import { ErrorBox, LoadBar, Loading, onActivate, Status } from "../lib/components.js";
import { ago, duration, num } from "../lib/format.js";
import { html } from "../lib/html.js";
import { usePoll } from "../lib/live.js";

function RunningTasks({ workerId }) {
  const { data, error } = usePoll(() => api("GET", `api/tasks${query({ worker_id: workerId, status: ["claimed", "running"], limit: 100 })}`), [workerId]);
  if (!data) return html`<${ErrorBox} error=${error} />${!error && html`<${Loading} />`}`;
  // A failed poll keeps the last list: said above it, or that list reads as what the worker holds now
  // (the registry's poll, answered, keeps the header "live").
  if (data.tasks.length === 0) return html`<${ErrorBox} error=${error} /><p class="muted">No task held.</p>`;
  return html`<${ErrorBox} error=${error} /><table class="running-tasks">
    <thead><tr><th>task</th><th>type</th><th>status</th><th class="num">attempt</th><th class="num">progress</th><th>claimed</th><th>last heartbeat</th></tr></thead>
    <tbody>
      ${data.tasks.map(
        (t) => html`<tr class="clickable" onClick=${() => (location.hash = `#/tasks/${t.id}`)}>
          <td><a href="#/tasks/${t.id}">#${t.id}</a></td><td class="text">${t.task_type}</td><td><${Status} status=${t.status} /></td>
          <td class="num">${t.attempts}/${t.max_attempts}</td><td class="num">${t.progress === null ? "—" : `${Math.round(t.progress * 100)}%`}</td>
          <td>${ago(t.claimed_at)}</td><td>${ago(t.last_heartbeat_at)}</td>
        </tr>`,
      )}
    </tbody>
  </table>`;
}

const LIVE = ["active", "stale"];
/** Stale ones first: they need a look. */
const ORDER = { stale: 0, active: 1 };

/**
 * The registry as the page shows it: the live workers, and one page of the gone ones (most recently
 * heard from first). The first page is the API's default answer, live workers and the 100 gone ones
 * in one request; a later page asks for the live ones apart, since its cursor goes on with gone ones
 * only. A worker named in the address that no page lists (a link to one gone long ago) is read alone.
 */
async function load(cursor, named) {
  const [first, later] = await Promise.all([
    api("GET", `api/workers${cursor ? query({ status: LIVE }) : ""}`),
    cursor ? api("GET", `api/workers${query({ cursor })}`) : null,
  ]);
  const gone = (later ?? first).workers.filter((w) => !LIVE.includes(w.status));
  const live = first.workers.filter((w) => LIVE.includes(w.status)).sort((a, b) => ORDER[a.status] - ORDER[b.status] || a.worker_id.localeCompare(b.worker_id));
  const listed = [...live, ...gone].some((w) => w.worker_id === named);
  const alone = named && !listed ? (await api("GET", `api/workers${query({ worker_id: named })}`).catch(() => null))?.workers ?? [] : [];
  return { live, gone: [...alone, ...gone], counts: (later ?? first).counts, nextCursor: (later ?? first).next_cursor };
}

function WorkerTable({ id, workers, open, setOpen }) {
  return html`<table id=${id}>
    <thead>
      <tr><th>worker</th><th>status</th><th>roles</th><th class="num">since heartbeat</th><th>load</th><th class="num">processed</th>
        <th class="hide-narrow">host</th><th class="num hide-narrow">pid</th><th class="hide-narrow">version</th><th class="hide-narrow">started</th></tr>
    </thead>
    <tbody>
      ${workers.map(
        (w) => html`<tr class="clickable ${w.status === "dead" ? "bad" : ""}" data-worker=${w.worker_id} tabindex="0" aria-expanded=${open === w.worker_id}
            onClick=${() => setOpen(open === w.worker_id ? null : w.worker_id)} onKeyDown=${onActivate(() => setOpen(open === w.worker_id ? null : w.worker_id))}>
            <td class="text">${open === w.worker_id ? "▾" : "▸"} ${w.worker_id}</td>
            <td><${Status} status=${w.status} /></td>
            <td class="text">${w.roles.join(", ")}</td>
            <td class="num">${duration(w.seconds_since_heartbeat)}</td>
            <td><${LoadBar} load=${w.current_load} capacity=${w.capacity} /></td>
            <td class="num">${num(w.tasks_processed)}</td>
            <td class="hide-narrow">${w.hostname ?? "—"}</td>
            <td class="num hide-narrow">${w.pid ?? "—"}</td>
            <td class="hide-narrow">${w.version ?? "—"}</td>
            <td class="hide-narrow">${ago(w.started_at)}</td>
          </tr>
          ${open === w.worker_id && html`<tr><td colspan="10"><h3>Tasks held by ${w.worker_id} (${w.active_tasks})</h3><${RunningTasks} workerId=${w.worker_id} /></td></tr>`}`,
      )}
    </tbody>
  </table>`;
}

export function Workers({ params }) {
  // cursors[i] opens page i of the gone workers; the first page has none (as on the Tasks page).
  const [cursors, setCursors] = useState([undefined]);
  const cursor = cursors[cursors.length - 1];
  const { data, error } = usePoll(() => load(cursor, params.worker), [cursor, params.worker]);
  const [open, setOpen] = useState(params.worker ?? null);
  if (!data) return html`<${ErrorBox} error=${error} />${!error && html`<${Loading} />`}`;
  const { live, gone, counts } = data;
  const goneCount = counts.dead + counts.inactive;
  return html`<${ErrorBox} error=${error} />
    <section class="panel">
      <h2>Workers (${num(live.length)})</h2>
      <div class="scroll">
        <${WorkerTable} id="workers" workers=${live} open=${open} setOpen=${setOpen} />
        ${live.length === 0 && html`<p class="muted">${goneCount === 0 ? "No worker has sent a heartbeat yet." : "No live worker."}</p>`}
      </div>
      <p class="small muted">active: heard from recently · stale: missed heartbeats, gets no targeted work · dead: its tasks were recovered · inactive: shut down cleanly.</p>
    </section>
    ${goneCount > 0 &&
    html`<section class="panel">
      <details id="gone-workers" open>
        <summary><h2>${num(goneCount)} gone worker${goneCount === 1 ? "" : "s"}</h2> <span class="muted small">${num(counts.dead)} dead, ${num(counts.inactive)} inactive · most recently heard from first</span></summary>
        <div class="scroll"><${WorkerTable} id="gone-workers-table" workers=${gone} open=${open} setOpen=${setOpen} /></div>
        <div class="actions">
          <button type="button" disabled=${cursors.length === 1} onClick=${() => setCursors(cursors.slice(0, -1))}>← more recent</button>
          <span class="muted small">page ${cursors.length}</span>
          <button type="button" id="older-gone" disabled=${!data.nextCursor} onClick=${() => setCursors([...cursors, data.nextCursor])}>older →</button>
        </div>
        <p class="small muted">One gone long ago: <code>#/workers?worker=ID</code> shows it, or <code>taskpool workers --worker ID</code>.</p>
      </details>
    </section>`}`;
}
