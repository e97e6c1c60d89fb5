// Capacity planning per role (seed 004): backlog, throughput, hours to drain, workers needed.
import { api } from "../lib/api.js";
import { ErrorBox, Loading } from "../lib/components.js";
import { duration, num } from "../lib/format.js";
import { html } from "../lib/html.js";
import { usePoll } from "../lib/live.js";

/** Workers needed beyond those active, for a column: flagged in red. */
const short = (needed, active) => (needed !== null && needed > active ? "status-failed" : "");

export function Capacity() {
  const { data, error } = usePoll(() => api("GET", "api/tasks/capacity"), []);
  if (!data) return html`<${ErrorBox} error=${error} />${!error && html`<${Loading} />`}`;
  const rows = data.capacity;
  return html`<${ErrorBox} error=${error} />
    <section class="panel">
      <h2>Capacity per role</h2>
      <div class="scroll">
        <table id="capacity">
          <thead>
            <tr><th>role</th><th class="num">pending</th><th class="num">ready</th><th class="num" title="How long the longest-waiting ready task has waited since it was due">oldest ready</th><th class="num">running</th><th class="num">cap</th>
              <th class="num">active workers</th><th class="num">done last hour</th><th class="num">per worker-hour</th><th class="num">hours to drain</th>
              <th class="num">workers for 1 h</th><th class="num">4 h</th><th class="num">8 h</th></tr>
          </thead>
          <tbody>
            ${rows.map((r) => {
              const need = r.workers_needed;
              return html`<tr>
                <td class="text"><a href="#/tasks?task_type=${encodeURIComponent(r.task_type)}">${r.task_type}</a></td>
                <td class="num">${num(r.pending_tasks)}</td><td class="num">${num(r.ready_tasks)}</td>
                <td class="num oldest-ready">${duration(r.oldest_ready_seconds)}</td><td class="num">${num(r.running_tasks)}</td>
                <td class="num">${num(r.max_running)}</td>
                <td class="num ${r.active_workers === 0 && r.pending_tasks > 0 ? "status-failed" : ""}">${num(r.active_workers)}</td>
                <td class="num">${num(r.completed_last_hour)}</td><td class="num">${num(r.tasks_per_worker_hour)}</td>
                <td class="num">${num(r.estimated_hours_to_drain)}</td>
                <td class="num ${short(need.for_1_hour, r.active_workers)}">${num(need.for_1_hour)}</td>
                <td class="num ${short(need.for_4_hours, r.active_workers)}">${num(need.for_4_hours)}</td>
                <td class="num ${short(need.for_8_hours, r.active_workers)}">${num(need.for_8_hours)}</td>
              </tr>`;
            })}
          </tbody>
        </table>
        ${rows.length === 0 && html`<p class="muted">No role has tasks, workers or a registration yet.</p>`}
      </div>
      <p class="small muted">Rates come from the tasks completed in the last hour; without throughput a role shows dashes. Red: more workers needed than are active.</p>
    </section>`;
}
