// The task list: filtered by status, role, worker and text in the params (kept in the URL), paged with the API's cursors.
import { useEffect, useState } from "preact/hooks";
import { api, query } from "../lib/api.js";
import { ErrorBox, Loading, LongText, Status } from "../lib/components.js";
import { ago, TASK_STATUSES } from "../lib/format.js";
import { html } from "../lib/html.js";
import { POLL_MS, usePoll } from "../lib/live.js";

const PAGE_SIZE = 25;
const ROLES_POLL_MS = 60_000;

function Filters({ params, types }) {
  const [draft, setDraft] = useState(params);
  useEffect(() => setDraft(params), [JSON.stringify(params)]);
  const set = (name) => (event) => setDraft({ ...draft, [name]: event.currentTarget.value });
  const apply = (event) => {
    event.preventDefault();
    location.hash = `#/tasks${query({ status: draft.status, task_type: draft.task_type, worker_id: draft.worker_id?.trim(), search: draft.search?.trim() })}`;
  };
  return html`<form class="filters" onSubmit=${apply}>
    <label>status
      <select name="status" value=${draft.status ?? ""} onChange=${set("status")}>
        <option value="">any</option>
        ${TASK_STATUSES.map((s) => html`<option value=${s}>${s}</option>`)}
      </select>
    </label>
    <label>role (task type)
      <select name="task_type" value=${draft.task_type ?? ""} onChange=${set("task_type")}>
        <option value="">any</option>
        ${[...new Set([...types, ...(draft.task_type ? [draft.task_type] : [])])].sort().map((t) => html`<option value=${t}>${t}</option>`)}
      </select>
    </label>
    <label>worker <input name="worker_id" value=${draft.worker_id ?? ""} onInput=${set("worker_id")} placeholder="worker id" /></label>
    <label>params contain <input name="search" value=${draft.search ?? ""} onInput=${set("search")} placeholder="e.g. a store id" /></label>
    <button class="primary" type="submit">Filter</button>
    <a href="#/tasks">clear</a>
  </form>`;
}

export function Tasks({ params }) {
  const filter = { status: params.status, task_type: params.task_type, worker_id: params.worker_id, search: params.search };
  const key = JSON.stringify(filter);
  // cursors[i] opens page i; the first page has none. They are the filters' own: a cursor sent with
  // other filters is refused, so new filters start at page 1 in the same render, not one request later.
  const [paging, setPaging] = useState({ key, cursors: [undefined] });
  const cursors = paging.key === key ? paging.cursors : [undefined];
  // And forgotten then: kept, filters changed and changed back ("clear") found them again, and the list
  // opened at the page it was left on before filtering, not at its newest tasks.
  if (paging.key !== key) setPaging({ key, cursors });
  const setCursors = (next) => setPaging({ key, cursors: next });
  const cursor = cursors[cursors.length - 1];
  const { data, error } = usePoll(() => api("GET", `api/tasks${query({ ...filter, cursor, limit: PAGE_SIZE })}`), [key, cursor]);
  // Apart from the list: a filter the server refuses must not empty the role picker that fixes it.
  // Roles come and go rarely, and counts() walks the backlog's index: once a minute, not with the list.
  const { data: types } = usePoll(async () => Object.keys((await api("GET", "api/tasks/counts")).by_type).sort(), [], Math.max(POLL_MS, ROLES_POLL_MS));
  return html`<section class="panel">
    <h2>Tasks</h2>
    <${Filters} params=${filter} types=${types ?? []} />
    <${ErrorBox} error=${error} />
    ${!data
      ? !error && html`<${Loading} />`
      : html`<div class="scroll">
            <table id="tasks">
              <thead><tr><th>id</th><th>type</th><th>status</th><th class="num">priority</th><th class="num">attempts</th><th>worker</th><th class="hide-narrow">created</th><th class="hide-narrow">updated</th><th class="hide-narrow">error</th></tr></thead>
              <tbody>
                ${data.tasks.map(
                  (t) => html`<tr class="clickable" data-task=${t.id} onClick=${() => (location.hash = `#/tasks/${t.id}`)}>
                    <td><a href="#/tasks/${t.id}">#${t.id}</a></td><td class="text">${t.task_type}</td><td><${Status} status=${t.status} /></td>
                    <td class="num">${t.priority}</td><td class="num">${t.attempts}/${t.max_attempts}</td><td class="text">${t.worker_id ?? "—"}</td>
                    <td class="hide-narrow">${ago(t.created_at)}</td><td class="hide-narrow">${ago(t.updated_at)}</td>
                    <td class="hide-narrow text small">${t.error_message && html`<${LongText} text=${t.error_message} />`}</td>
                  </tr>`,
                )}
              </tbody>
            </table>
            ${data.tasks.length === 0 && html`<p class="muted">No task matches.</p>`}
          </div>
          <div class="actions">
            <button type="button" disabled=${cursors.length === 1} onClick=${() => setCursors(cursors.slice(0, -1))}>← newer</button>
            <span class="muted small">page ${cursors.length}</span>
            <button type="button" disabled=${!data.next_cursor} onClick=${() => setCursors([...cursors, data.next_cursor])}>older →</button>
          </div>`}
  </section>`;
}
