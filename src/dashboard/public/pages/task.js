// One task: its fields, params, checkpoint, progress, result or error, the whole event timeline, and
// retry / cancel when the key's scope allows them (admin) and the task's status admits them.
import { useState } from "preact/hooks";
import { api } from "../lib/api.js";
import { ErrorBox, Json, Loading, Status, useOutcome } from "../lib/components.js";
import { ago, duration, time } from "../lib/format.js";
import { html } from "../lib/html.js";
import { POLL_MS, usePoll } from "../lib/live.js";
import { serverNow } from "../lib/server-clock.js";

const UNFINISHED = ["pending", "claimed", "running"];

function Actions({ task, session, reload }) {
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useOutcome(task.updated_at, task.status);
  if (session.scope !== "admin") return null;
  const act = async (action, body) => {
    setBusy(true);
    try {
      await api("POST", `api/tasks/${task.id}/${action}`, body);
      setOutcome({ ok: true, text: action === "retry" ? "Put back in the pool." : "Cancelled." }, action === "retry" ? "pending" : "cancelled");
    } catch (error) {
      setOutcome({ ok: false, text: error.message });
    } finally {
      setBusy(false);
      reload();
    }
  };
  const canRetry = task.status === "failed";
  const canCancel = UNFINISHED.includes(task.status);
  // The reload after a cancel finds the task with no action left; what was done, or why not, must still show.
  if (!canRetry && !canCancel && !outcome) return null;
  return html`<div class="actions">
    ${canRetry && html`<button id="retry" class="primary" disabled=${busy} onClick=${() => act("retry")}>Retry</button>`}
    ${canCancel && html`<button id="cancel" class="danger" disabled=${busy} onClick=${() => confirm(`Cancel task #${task.id}?`) && act("cancel", { reason: "Cancelled from the dashboard" })}>Cancel</button>`}
    ${outcome && html`<span class=${outcome.ok ? "status-completed" : "status-failed"} role="status">${outcome.text}</span>`}
  </div>`;
}

/** Consecutive checkpoints read as one line ("checkpoint ×40"): a crawl saves one per page. */
function collapse(events) {
  const out = [];
  for (const e of events) {
    const last = out[out.length - 1];
    if (e.event === "checkpoint" && last?.event === "checkpoint") {
      last.count += 1;
      last.created_at = e.created_at;
    } else out.push({ ...e, count: 1 });
  }
  return out;
}

/** An event that records a failed attempt, retried or not. */
const isFailure = (e) => e.event === "retry_scheduled" || e.event === "failed";

/** The stack a worker sent with a failure (data.stack of its event), or null. */
const stackOf = (e) => (isFailure(e) && typeof e.data?.stack === "string" ? e.data.stack : null);

/** A stack, folded: a dozen lines of frames would push the timeline down. */
const Stack = ({ stack, id }) => html`<details class="stack" id=${id}><summary class="small">stack trace</summary><pre>${stack}</pre></details>`;

function Timeline({ events }) {
  return html`<ol class="timeline" id="timeline">
    ${collapse(events).map(
      (e) => html`<li class="ev-${e.event}">
        <strong>${e.event}${e.count > 1 ? ` ×${e.count}` : ""}</strong> <span class="muted small">${time(e.created_at)}</span>
        ${(e.from_worker_id || e.to_worker_id) && html` <span class="small">${e.from_worker_id ?? ""}${e.to_worker_id ? ` → ${e.to_worker_id}` : ""}</span>`}
        ${e.message && html`<div class="small">${e.message}</div>`}
        ${e.data !== null && e.data !== undefined && e.event !== "checkpoint" && html`<div class="small muted">${JSON.stringify(stackOf(e) === null ? e.data : { ...e.data, stack: undefined })}</div>`}
        ${stackOf(e) !== null && html`<${Stack} stack=${stackOf(e)} />`}
      </li>`,
    )}
  </ol>`;
}

const leased = (task) => task.status === "claimed" || task.status === "running";

/**
 * A lease time of the task's: a pending task back in the pool after a retry or a requeue still
 * carries its last attempt's, which must not read as a worker on it now.
 */
const ofTheLease = (task, at) => (at && task.status === "pending" ? `${time(at)} (an earlier attempt)` : time(at));

/**
 * Whom a reassignment reserved the task for. The reservation stays on the task once it lapses, until a
 * claim clears it, and any worker may claim it then: read as current, it sent an operator after the wrong worker.
 */
function reservation(task) {
  if (!task.reserved_for) return "—";
  if (Date.parse(task.reserved_until) > serverNow()) return `${task.reserved_for} until ${time(task.reserved_until)}`;
  return `— (${task.reserved_for}'s reservation lapsed at ${time(task.reserved_until)})`;
}

/** The latest events a task page shows: a task that saved a checkpoint per page has tens of thousands. */
const EVENTS_SHOWN = 500;
/** A finished task changes only when someone retries it: its page asks again this rarely. */
const FINISHED_POLL_MS = 30_000;

export function TaskPage({ id, session }) {
  const { data, error, reload } = usePoll(
    // One more than shown: whether it comes says whether earlier events were left out.
    () => api("GET", `api/tasks/${encodeURIComponent(id)}?events_limit=${EVENTS_SHOWN + 1}`),
    [id],
    (latest) => (latest && !UNFINISHED.includes(latest.task.status) ? FINISHED_POLL_MS : POLL_MS),
  );
  if (!data) return html`<${ErrorBox} error=${error} />${!error && html`<${Loading} />`}`;
  const { task } = data;
  // Past the limit, earlier events were left out: the counts below are of the latest ones. A task with
  // exactly EVENTS_SHOWN events was said to have more when the page asked for EVENTS_SHOWN.
  const more = data.events.length > EVENTS_SHOWN ? "+" : "";
  const events = more ? data.events.slice(-EVENTS_SHOWN) : data.events;
  const checkpoints = events.filter((e) => e.event === "checkpoint").length;
  // A checkpoint needs a lease: none comes before the first claim, so with that claim shown none was left out
  // (498 checkpoints among 501 events were "498+": the one left out was the task's creation).
  const firstClaimShown = events.some((e) => e.event === "claimed" && e.data?.attempt === 1);
  const checkpointsLeftOut = more && !firstClaimShown ? "+" : "";
  // The stack of the failure that left the task's error, if it came with one.
  const lastFailure = events.findLast(isFailure);
  const lastStack = lastFailure ? stackOf(lastFailure) : null;
  const fields = [
    ["type", task.task_type + (task.task_type_version ? ` (v${task.task_type_version})` : "")],
    ["priority", task.priority],
    ["attempts", `${task.attempts} of ${task.max_attempts}`],
    ["worker", task.worker_id ?? "—"],
    ["reserved for", reservation(task)],
    ["concurrency key", task.concurrency_key ?? "—"],
    ["unique key", task.unique_key ?? "—"],
    ["scheduled for", time(task.scheduled_for)],
    ["created", `${time(task.created_at)} (${ago(task.created_at)})`],
    ["claimed", ofTheLease(task, task.claimed_at)],
    ["started", ofTheLease(task, task.started_at)],
    ["finished", time(task.completed_at)],
    ["last heartbeat", leased(task) ? ago(task.last_heartbeat_at) : ofTheLease(task, task.last_heartbeat_at)],
    ["lease expires", time(task.lease_expires_at)],
    ["timeout", task.timeout_seconds === null ? "—" : duration(task.timeout_seconds)],
    ["parent", task.parent_id ? html`<a href="#/tasks/${task.parent_id}">#${task.parent_id}</a>` : "—"],
  ];
  return html`<${ErrorBox} error=${error} />
    <section class="panel">
      <p class="small"><a href="#/tasks">← tasks</a></p>
      <h2>Task #${task.id} <${Status} status=${task.status} /></h2>
      <${Actions} task=${task} session=${session} reload=${reload} />
      ${task.error_message &&
      html`<div class="alert ${task.status === "failed" ? "bad" : "warn"}" id="task-error">
        <strong>${task.status === "failed" ? "error" : "last error"}</strong>: ${task.error_message}
        ${lastStack !== null && html`<${Stack} stack=${lastStack} id="task-error-stack" />`}
      </div>`}
      ${task.progress !== null &&
      html`<p>progress <span class="bar"><span style="width: ${Math.round(task.progress * 100)}%"></span></span> ${Math.round(task.progress * 100)}%</p>`}
    </section>
    <div class="grid">
      <section class="panel"><h2>Fields</h2><dl class="fields">${fields.map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl></section>
      <section class="panel">
        <h2>Params</h2><${Json} value=${task.params} />
        <h3>Checkpoint (${checkpoints}${checkpoints > 0 ? checkpointsLeftOut : ""} saved)</h3><${Json} value=${task.checkpoint} />
        <h3>Result</h3><${Json} value=${task.result} />
      </section>
    </div>
    <section class="panel"><h2>Timeline (${more ? `the latest ${EVENTS_SHOWN} events; earlier ones left out` : `${events.length} event${events.length === 1 ? "" : "s"}`})</h2><${Timeline} events=${events} /></section>`;
}
