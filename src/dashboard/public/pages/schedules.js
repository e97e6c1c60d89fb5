// Recurring schedules: next and last run, what the last run did, pause, resume and cancelling their
// pending tasks (admin). Long names, crons and results wrap (a result cut at three lines), so the table
// fits the page. Listed in the header only when the server answers GET /api/schedules (app.js).
import { useState } from "preact/hooks";
import { api } from "../lib/api.js";
import { ErrorBox, Loading, LongText, useOutcome } from "../lib/components.js";
import { ago, time } from "../lib/format.js";
import { html } from "../lib/html.js";
import { usePoll } from "../lib/live.js";

function Toggle({ schedule, reload }) {
  const [failure, setFailure] = useState(null);
  const action = schedule.enabled ? "pause" : "resume";
  const run = async () => {
    try {
      await api("POST", `api/schedules/${encodeURIComponent(schedule.name)}/${action}`);
      setFailure(null);
    } catch (error) {
      setFailure(error.message);
    }
    reload();
  };
  return html`<button type="button" onClick=${run}>${action}</button>${failure && html` <span class="status-failed small">${failure}</span>`}`;
}

/** Cancels the tasks the schedule's runs made that no worker holds yet (a fan-out's later batches). */
function CancelPending({ schedule }) {
  // Said of the schedule as it was: resumed, its runs make pending tasks again.
  const [outcome, setOutcome] = useOutcome(schedule.enabled, schedule.enabled);
  const run = async () => {
    // A running schedule's next run makes pending tasks again: the docs' order is pause, then cancel.
    const question = `Cancel the tasks of schedule ${schedule.name} that are still pending? Tasks workers hold run on.${schedule.enabled ? " It is running: pause it first, or its next run makes more." : ""}`;
    if (!confirm(question)) return;
    try {
      const { cancelled } = await api("POST", `api/schedules/${encodeURIComponent(schedule.name)}/cancel-pending`);
      setOutcome({ ok: true, text: `Cancelled ${cancelled.length} pending task${cancelled.length === 1 ? "" : "s"}` }, schedule.enabled);
    } catch (error) {
      setOutcome({ ok: false, text: error.message }, schedule.enabled);
    }
  };
  return html`<button type="button" class="danger" onClick=${run}>cancel pending</button>${outcome && html` <span class="small ${outcome.ok ? "status-completed" : "status-failed"}" role="status">${outcome.text}</span>`}`;
}

export function Schedules({ session }) {
  const { data, error, reload } = usePoll(() => api("GET", "api/schedules"), []);
  if (!data) return html`<${ErrorBox} error=${error} />${!error && html`<${Loading} />`}`;
  const schedules = data.schedules ?? [];
  return html`<${ErrorBox} error=${error} />
    <section class="panel">
      <h2>Schedules (${schedules.length})</h2>
      <div class="scroll">
        <table id="schedules">
          <thead><tr><th>name</th><th>task type</th><th>cron</th><th>state</th><th>next run</th><th>last run</th><th>last result</th>${session.scope === "admin" && html`<th></th>`}</tr></thead>
          <tbody>
            ${schedules.map(
              (s) => html`<tr key=${s.name}>
                <td class="text">${s.name}</td><td class="text">${s.task_type}</td><td class="text"><code>${s.cron}</code> <span class="muted small">${s.timezone}</span></td>
                <td class=${s.enabled ? "status-active" : "status-inactive"}>${s.enabled ? "running" : "paused"}</td>
                <td>${s.next_run_at ? time(s.next_run_at) : "—"}</td>
                <td>${s.last_run_at ? ago(s.last_run_at) : "never"}</td>
                <td class="text small ${s.last_result?.error ? "status-failed" : ""}">${s.last_result ? html`<${LongText} text=${s.last_result.error ?? s.last_result.message} />` : "—"}</td>
                ${session.scope === "admin" && html`<td class="text"><${Toggle} schedule=${s} reload=${reload} /> <${CancelPending} schedule=${s} /></td>`}
              </tr>`,
            )}
          </tbody>
        </table>
        ${schedules.length === 0 && html`<p class="muted">No schedule.</p>`}
      </div>
    </section>`;
}
