// Reassignment history and seed 003's statistics.
import { api } from "../lib/api.js";
import { ErrorBox, Loading, LongText } from "../lib/components.js";
import { ago, num, time } from "../lib/format.js";
import { html } from "../lib/html.js";
import { usePoll } from "../lib/live.js";

async function load() {
  const [history, stats] = await Promise.all([api("GET", "api/reassignments?limit=200"), api("GET", "api/reassignments/stats")]);
  return { history: history.reassignments, stats };
}

export function Reassignments() {
  const { data, error } = usePoll(load, []);
  if (!data) return html`<${ErrorBox} error=${error} />${!error && html`<${Loading} />`}`;
  const { history, stats } = data;
  const day = stats.last_24_hours;
  return html`<${ErrorBox} error=${error} />
    <div class="grid">
      <section class="panel">
        <h2>Last 24 hours</h2>
        <div class="cards">
          <div class="card"><div class="n">${num(day.total)}</div><div class="l">reassignments</div></div>
          <div class="card"><div class="n status-completed">${num(day.successful)}</div><div class="l">found a worker</div></div>
          <div class="card"><div class="n">${day.success_rate_percent === null ? "—" : `${day.success_rate_percent}%`}</div><div class="l">success rate</div></div>
        </div>
      </section>
      <section class="panel">
        <h2>Workers whose tasks were taken back (7 days)</h2>
        <table id="failing-workers">
          <thead><tr><th>worker</th><th class="num">tasks</th><th>last</th></tr></thead>
          <tbody>${stats.failing_workers.map((w) => html`<tr><td class="text">${w.worker_id ?? "—"}</td><td class="num">${w.failure_count}</td><td>${ago(w.last_failure_at)}</td></tr>`)}</tbody>
        </table>
        ${stats.failing_workers.length === 0 && html`<p class="muted">None.</p>`}
      </section>
      <section class="panel">
        <h2>Tasks reassigned more than once</h2>
        <table>
          <thead><tr><th>task</th><th class="num">times</th><th>last</th></tr></thead>
          <tbody>${stats.repeated_tasks.map((t) => html`<tr><td><a href="#/tasks/${t.task_id}">#${t.task_id}</a></td><td class="num">${t.reassignment_count}</td><td>${ago(t.last_reassignment_at)}</td></tr>`)}</tbody>
        </table>
        ${stats.repeated_tasks.length === 0 && html`<p class="muted">None.</p>`}
      </section>
    </div>
    <section class="panel">
      <h2>History (newest ${history.length})</h2>
      <div class="scroll">
        <table id="reassignments">
          <thead><tr><th>when</th><th>task</th><th>from</th><th>to</th><th>reason</th><th>outcome</th><th class="hide-narrow">checkpoint</th></tr></thead>
          <tbody>
            ${history.map(
              (r) => html`<tr class=${r.success ? "" : "bad"}>
                <td title=${time(r.created_at)}>${ago(r.created_at)}</td>
                <td><a href="#/tasks/${r.task_id}">#${r.task_id}</a></td>
                <td class="text">${r.from_worker_id ?? "—"}</td>
                <td class="text">${r.to_worker_id ?? "—"}</td>
                <td class="text small"><${LongText} text=${r.reason} /></td>
                <td class=${r.success ? "status-completed" : "text status-failed"}>${r.success ? "reassigned" : html`<${LongText} text=${r.error_message ?? "failed"} />`}</td>
                <td class="hide-narrow small">${r.checkpoint === null ? "—" : JSON.stringify(r.checkpoint).slice(0, 60)}</td>
              </tr>`,
            )}
          </tbody>
        </table>
        ${history.length === 0 && html`<p class="muted">No task has been reassigned.</p>`}
      </div>
    </section>`;
}
