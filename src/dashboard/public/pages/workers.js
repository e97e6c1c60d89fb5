// The worker registry: status by colour, heartbeat age, load, and a worker's running tasks.
import { useState } from "preact/hooks";
import { api, query } from "../lib/api.js";
import { ErrorBox, LoadBar, Loading, onActivate, Status } from "../lib/components.js";
import { ago, duration, num } from "../lib/format.js";
import { html } from "../lib/html.js";
import { usePoll } from "../lib/live.js";

const ORDER = { dead: 0, stale: 1, active: 2, inactive: 3 };

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

export function Workers({ params }) {
  const { data, error } = usePoll(() => api("GET", "api/workers"), []);
  const [open, setOpen] = useState(params.worker ?? null);
  if (!data) return html`<${ErrorBox} error=${error} />${!error && html`<${Loading} />`}`;
  const workers = [...data.workers].sort((a, b) => ORDER[a.status] - ORDER[b.status] || a.worker_id.localeCompare(b.worker_id));
  return html`<${ErrorBox} error=${error} />
    <section class="panel">
      <h2>Workers (${workers.length})</h2>
      <div class="scroll">
        <table id="workers">
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
        </table>
        ${workers.length === 0 && html`<p class="muted">No worker has sent a heartbeat yet.</p>`}
      </div>
      <p class="small muted">active: heard from recently · stale: missed heartbeats, gets no targeted work · dead: its tasks were recovered · inactive: shut down cleanly.</p>
    </section>`;
}
