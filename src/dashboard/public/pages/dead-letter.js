// The dead letter: failed tasks grouped by type and error, each group retried in one go (admin).
import { useLayoutEffect, useState } from "preact/hooks";
import { api, query } from "../lib/api.js";
import { ErrorBox, Loading, LongText } from "../lib/components.js";
import { ago, num } from "../lib/format.js";
import { html } from "../lib/html.js";
import { POLL_MS, usePoll } from "../lib/live.js";

/** The newest failed tasks grouped per poll (one call, ids and errors only): older ones show on the next pages of Tasks. */
const READ = 1000;

/** The characters of an error a group answers (FAILURE_MESSAGE_SHOWN on the server): one that long was cut. */
const ERROR_SHOWN = 1000;

/** The server's groups, most tasks first, as the rows use them; an error cut by the server says so. */
const group = (groups) =>
  groups.map((g) => ({
    key: `${g.task_type}\u0000${g.error_message ?? ""}`,
    taskType: g.task_type,
    error: g.error_message !== null && g.error_message.length >= ERROR_SHOWN ? `${g.error_message}… (the whole error is on each task's page)` : g.error_message,
    ids: g.task_ids,
    latest: g.latest_at,
  }));

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
    if (!confirm(`Retry ${g.ids.length} failed ${g.taskType} task(s)? Leaving this page stops the retry.`)) return;
    // Busy from here: a second click while the first call is out would retry the group again.
    setProgress(`0 of ${g.ids.length} sent`);
    const refused = await retryAll(g.ids, left, setProgress);
    if (refused === null) return; // the page was left: nobody to tell
    setProgress(null);
    // Said above the table, not in this row: the reload finds the retried tasks no longer failed and the row goes.
    const what = `${g.ids.length} ${g.taskType} task${g.ids.length === 1 ? "" : "s"}${g.error ? ` ("${cut(g.error)}")` : ""}`;
    report(
      refused.length
        ? { ok: false, text: `Retried ${g.ids.length - refused.length} of ${what}; ${refused.length} refused: ${refused.slice(0, 3).join("; ")}` }
        : { ok: true, text: `Retried ${what}: back in the pool.` },
    );
    reload();
  };
  return html`<tr class="dead-group">
    <td class="text">${g.taskType}</td>
    <td class="small text">${g.error ? html`<${LongText} text=${g.error} />` : html`<span class="muted">no message</span>`}</td>
    <td class="num">${num(g.ids.length)}</td>
    <td>${ago(g.latest)}</td>
    <td>${g.ids.slice(0, 5).map((id) => html`<a href="#/tasks/${id}">#${id}</a> `)}${g.ids.length > 5 ? "…" : ""}</td>
    <td>${admin && html`<button class="primary retry-group" disabled=${progress !== null} onClick=${run}>Retry ${g.ids.length}</button>`}
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
  const { data, error, reload } = usePoll(() => api("GET", `api/tasks/failures${query({ limit: READ })}`), [], Math.max(POLL_MS, 10_000));
  if (!data) return html`<${ErrorBox} error=${error} />${!error && html`<${Loading} />`}`;
  const groups = group(data.groups);
  return html`<${ErrorBox} error=${error} />
    <section class="panel">
      <h2>Dead letter: ${num(data.read)}${data.more ? "+" : ""} failed task${data.read === 1 ? "" : "s"}</h2>
      ${outcomes.map((o) => html`<p class="small ${o.ok ? "status-completed" : "status-failed"}" role="status">${o.text}</p>`)}
      ${data.more && html`<p class="small muted">Grouping the newest ${READ}; <a href="#/tasks?status=failed">all failed tasks</a>.</p>`}
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
