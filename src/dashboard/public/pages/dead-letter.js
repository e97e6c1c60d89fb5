// The dead letter: failed tasks grouped by type and error, each group retried in one go (admin).
import { useLayoutEffect, useState } from "preact/hooks";
import { api, query } from "../lib/api.js";
import { ErrorBox, Loading, LongText } from "../lib/components.js";
import { ago, num } from "../lib/format.js";
import { html } from "../lib/html.js";
import { POLL_MS, usePoll } from "../lib/live.js";

/** The newest failed tasks read per poll (one call): groups beyond them show on the next pages of Tasks. */
const READ = 1000;

/** When a failed task failed: ids follow creation, not failure (a task delayed or retried for hours fails late). */
const failedAt = (t) => t.completed_at ?? t.updated_at;

function group(tasks) {
  const groups = new Map();
  for (const t of tasks) {
    const key = `${t.task_type}\u0000${t.error_message ?? ""}`;
    const g = groups.get(key) ?? { key, taskType: t.task_type, error: t.error_message, tasks: [], latest: failedAt(t) };
    g.tasks.push(t);
    if (failedAt(t) > g.latest) g.latest = failedAt(t);
    groups.set(key, g);
  }
  return [...groups.values()].sort((a, b) => b.tasks.length - a.tasks.length || (b.latest > a.latest ? 1 : b.latest < a.latest ? -1 : 0));
}

/** Waits `ms`, or less if `signal` aborts first. */
const pause = (ms, signal) =>
  new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done);
  });

/**
 * Retries one by one (the API retries one task a call), waiting out a 429 as the API asks, until
 * `signal` aborts (the page is left): then it sends no further call and returns null; the tasks not
 * sent stay failed, in the dead letter.
 */
async function retryAll(ids, signal, progress) {
  let sent = 0;
  const refused = [];
  for (const id of ids) {
    for (;;) {
      if (signal.aborted) return null;
      try {
        await api("POST", `api/tasks/${id}/retry`);
        break;
      } catch (error) {
        if (error.status === 429) {
          progress(`rate limited; waiting ${error.retryAfter ?? 10} s`);
          await pause((error.retryAfter ?? 10) * 1000, signal);
          continue;
        }
        refused.push(`#${id}: ${error.message}`);
        break;
      }
    }
    // Sent, not retried: a refusal is counted apart.
    progress(`${++sent} of ${ids.length} sent${refused.length ? `, ${refused.length} refused` : ""}`);
  }
  return refused;
}

/** An error as a group's name in a sentence: a failure's message may run to 10,000 characters. */
const cut = (text, length = 100) => (text.length > length ? `${text.slice(0, length)}…` : text);

function Group({ g, admin, reload, report, left }) {
  const [progress, setProgress] = useState(null);
  const run = async () => {
    if (!confirm(`Retry ${g.tasks.length} failed ${g.taskType} task(s)? Leaving this page stops the retry.`)) return;
    // Busy from here: a second click while the first call is out would retry the group again.
    setProgress(`0 of ${g.tasks.length} sent`);
    const refused = await retryAll(g.tasks.map((t) => t.id), left, setProgress);
    if (refused === null) return; // the page was left: nobody to tell
    setProgress(null);
    // Said above the table, not in this row: the reload finds the retried tasks no longer failed and the row goes.
    const what = `${g.tasks.length} ${g.taskType} task${g.tasks.length === 1 ? "" : "s"}${g.error ? ` ("${cut(g.error)}")` : ""}`;
    report(
      refused.length
        ? { ok: false, text: `Retried ${g.tasks.length - refused.length} of ${what}; ${refused.length} refused: ${refused.slice(0, 3).join("; ")}` }
        : { ok: true, text: `Retried ${what}: back in the pool.` },
    );
    reload();
  };
  return html`<tr class="dead-group">
    <td class="text">${g.taskType}</td>
    <td class="small text">${g.error ? html`<${LongText} text=${g.error} />` : html`<span class="muted">no message</span>`}</td>
    <td class="num">${num(g.tasks.length)}</td>
    <td>${ago(g.latest)}</td>
    <td>${g.tasks.slice(0, 5).map((t) => html`<a href="#/tasks/${t.id}">#${t.id}</a> `)}${g.tasks.length > 5 ? "…" : ""}</td>
    <td>${admin && html`<button class="primary retry-group" disabled=${progress !== null} onClick=${run}>Retry ${g.tasks.length}</button>`}
      ${progress && html` <span class="small">${progress}</span>`}</td>
  </tr>`;
}

export function DeadLetter({ session }) {
  // Every retry's outcome, until the page is left: groups retried at once each get theirs.
  const [outcomes, setOutcomes] = useState([]);
  const report = (outcome) => setOutcomes((earlier) => [...earlier, outcome]);
  // Aborted when the page is left, as its polls stop: a group's retry then sends no further call.
  // Kept by the page, not the row: a row may go while its retry runs (its tasks no longer among the newest READ).
  // A layout effect's cleanup runs as the page unmounts; Preact 11 runs a useEffect cleanup after the
  // next paint, and a call answered before then sent the next one, and the next, after the page was left.
  const [left] = useState(() => new AbortController());
  useLayoutEffect(() => () => left.abort(), []);
  const { data, error, reload } = usePoll(() => api("GET", `api/tasks${query({ status: "failed", limit: READ })}`), [], Math.max(POLL_MS, 10_000));
  if (!data) return html`<${ErrorBox} error=${error} />${!error && html`<${Loading} />`}`;
  const groups = group(data.tasks);
  return html`<${ErrorBox} error=${error} />
    <section class="panel">
      <h2>Dead letter: ${num(data.tasks.length)}${data.next_cursor ? "+" : ""} failed task${data.tasks.length === 1 ? "" : "s"}</h2>
      ${outcomes.map((o) => html`<p class="small ${o.ok ? "status-completed" : "status-failed"}" role="status">${o.text}</p>`)}
      ${data.next_cursor && html`<p class="small muted">Grouping the newest ${READ}; <a href="#/tasks?status=failed">all failed tasks</a>.</p>`}
      <div class="scroll">
        <table id="dead-letter">
          <thead><tr><th>type</th><th>error</th><th class="num">tasks</th><th>latest</th><th>examples</th><th></th></tr></thead>
          <tbody>${groups.map((g) => html`<${Group} key=${g.key} g=${g} admin=${session.scope === "admin"} reload=${reload} report=${report} left=${left.signal} />`)}</tbody>
        </table>
        ${groups.length === 0 && html`<p class="muted">Nothing failed.</p>`}
      </div>
      ${session.scope !== "admin" && html`<p class="small muted">Retrying needs an admin key.</p>`}
    </section>`;
}
