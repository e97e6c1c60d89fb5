// The dashboard's shell: the key form, the header (pages, live state, key), and the hash router.
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, forgetKey, onUnauthorized, saveKey, storedKey } from "./lib/api.js";
import { duration } from "./lib/format.js";
import { html } from "./lib/html.js";
import { NO_ANSWER_MS, useLiveState, waitAsked, waitPending } from "./lib/live.js";
import { Capacity } from "./pages/capacity.js";
import { DeadLetter } from "./pages/dead-letter.js";
import { Overview } from "./pages/overview.js";
import { Reassignments } from "./pages/reassignments.js";
import { Schedules } from "./pages/schedules.js";
import { TaskPage } from "./pages/task.js";
import { Tasks } from "./pages/tasks.js";
import { Workers } from "./pages/workers.js";

const PAGES = [
  { path: "overview", title: "Overview", view: Overview },
  { path: "workers", title: "Workers", view: Workers },
  { path: "tasks", title: "Tasks", view: Tasks },
  { path: "dead-letter", title: "Dead letter", view: DeadLetter },
  { path: "reassignments", title: "Reassignments", view: Reassignments },
  { path: "capacity", title: "Capacity", view: Capacity },
  // Listed only when the server has /api/schedules (see App).
  { path: "schedules", title: "Schedules", view: Schedules, optional: true },
];

/** A part of the hash decoded; a malformed escape (`100%`) is kept as typed, rather than blanking the app. */
function decoded(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/** The page the hash names: `#/tasks/42?x=1` → path "tasks", rest ["42"], params {x: "1"}. */
function parseHash() {
  const [path, search = ""] = location.hash.replace(/^#\/?/, "").split("?");
  const [page = "overview", ...rest] = path.split("/").filter(Boolean).map(decoded);
  return { page, rest, params: Object.fromEntries(new URLSearchParams(search)) };
}

function useRoute() {
  const [route, setRoute] = useState(parseHash);
  useEffect(() => {
    const update = () => setRoute(parseHash());
    addEventListener("hashchange", update);
    return () => removeEventListener("hashchange", update);
  }, []);
  return route;
}

/** Asks for a key; says why when one was refused. */
function KeyForm({ message, onSaved }) {
  const [value, setValue] = useState("");
  const submit = (event) => {
    event.preventDefault();
    if (!value.trim()) return;
    saveKey(value.trim());
    onSaved();
  };
  return html`<main class="login">
    <div class="panel">
      <h2>taskpool dashboard</h2>
      ${message && html`<div class="alert bad" role="alert" id="key-message">${message}</div>`}
      <form onSubmit=${submit}>
        <label>API key
          <input id="api-key" type="password" autocomplete="off" placeholder="tp_…" value=${value} onInput=${(e) => setValue(e.currentTarget.value)} />
        </label>
        <p class="small muted">Kept in this browser only (localStorage) and sent as X-API-Key. <code>taskpool keys create --scope producer</code> makes a read-only key; an admin key may also retry and cancel.</p>
        <button class="primary" type="submit">Open the dashboard</button>
      </form>
    </div>
  </main>`;
}

/**
 * Before the server's first answer. One that takes the request and never answers (stopped, cut off by
 * the network) left "Connecting…" on screen for good, saying nothing; the header says the same later on.
 */
function Connecting() {
  const [since] = useState(Date.now);
  const [, tick] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => tick((n) => n + 1), 1000);
    return () => clearInterval(timer);
  }, []);
  const waited = Date.now() - since;
  if (waited < NO_ANSWER_MS) return html`<p class="loading">Connecting…</p>`;
  return html`<p class="loading status-failed" role="alert">⚠ waiting ${duration(waited / 1000)} for the server to answer: it may be stopped, or cut off by the network. The dashboard opens as soon as it answers.</p>`;
}

/** The wait a 429 or a 503 asked of the key's check, counting down; the check is sent again by itself once it is over. */
function RetryWait({ at }) {
  const [, tick] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => tick((n) => n + 1), 1000);
    return () => clearInterval(timer);
  }, []);
  const until = new Date(at).toLocaleTimeString(undefined, { timeStyle: "medium" });
  return html`<p class="muted" id="retry-wait">Waiting until ${until} (${duration(Math.max(0, at - Date.now()) / 1000)}), as the server asked; the key is checked again then.</p>`;
}

function LiveIndicator() {
  const live = useLiveState();
  const [, tick] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => tick((n) => n + 1), 1000);
    return () => clearInterval(timer);
  }, []);
  if (live.mode === "paused") return html`<span id="live">⏸ paused while the tab is hidden</span>`;
  // A 429 or a 503 asked the polls to wait (retry_after): said with until when, as a page left keeps the wait.
  if (live.retryAt !== null && live.retryAt > Date.now()) {
    const until = new Date(live.retryAt).toLocaleTimeString(undefined, { timeStyle: "medium" });
    return html`<span id="live" class="status-failed">⚠ ${live.retryError?.message} · waiting until ${until} (${duration((live.retryAt - Date.now()) / 1000)}), as the server asked</span>`;
  }
  const waited = live.waitingSince === null ? 0 : Date.now() - live.waitingSince;
  if (waited >= NO_ANSWER_MS) {
    const last = live.at ? `; last answer ${duration((Date.now() - live.at) / 1000)} ago` : "";
    return html`<span id="live" class="status-failed">⚠ waiting ${duration(waited / 1000)} for the server to answer${last}</span>`;
  }
  if (live.mode === "error") return html`<span id="live" class="status-failed">⚠ ${live.error?.message}</span>`;
  const since = live.at ? duration((Date.now() - live.at) / 1000) : "…";
  return html`<span id="live"><span class="dot" style="background: var(--active)"></span>live · updated ${since} ago</span>`;
}

function Header({ route, session, pages, onForget }) {
  return html`<header class="top">
    <h1>taskpool</h1>
    <nav>
      ${pages.map((p) => html`<a href="#/${p.path}" class=${route.page === p.path ? "current" : ""}>${p.title}</a>`)}
    </nav>
    <div class="live">
      <${LiveIndicator} />
      <span id="scope" class="muted">${session.auth === "none" ? "no auth" : `key ${session.key.prefix}… (${session.scope})`}</span>
      ${session.auth === "keys" && html`<button type="button" onClick=${onForget}>Forget key</button>`}
    </div>
  </header>`;
}

function App() {
  const [session, setSession] = useState(null);
  const [gate, setGate] = useState(null);
  const [hasSchedules, setHasSchedules] = useState(false);
  const route = useRoute();
  const recheck = useRef(null);

  const check = async () => {
    clearTimeout(recheck.current);
    // A wait the server asked of the polls holds for the key's check too (a key entered again after
    // "Forget key" during it): sent at once, it would only be refused again.
    const pending = waitPending();
    if (pending !== null) {
      recheck.current = setTimeout(check, pending.at - Date.now());
      setGate({ message: `The server asked for a wait${pending.error ? `: ${pending.error.message}` : ""}`, retry: true, retryAt: pending.at });
      return;
    }
    try {
      const who = await api("GET", "api/whoami");
      if (who.scope === "worker") {
        forgetKey();
        setGate({ message: "This key's scope is worker: it may run tasks but not read the pool. The dashboard needs a producer key (read) or an admin key (read, retry, cancel)." });
        return;
      }
      setSession(who);
      setGate(null);
      // The Schedules page appears once the server has the routes. Only a 404 says it has none: a 429 or a
      // 503 answered to this one call hid the page, and its link said "No page", until the next login.
      api("GET", "api/schedules").then(() => setHasSchedules(true), (error) => setHasSchedules(error.status !== 404));
    } catch (error) {
      if (error.status === 401) return; // onUnauthorized has shown the form
      // A 429 (too many wrong keys from this address, say) or a 503 asking for a wait is waited out, as
      // the polls do, and the key checked again then: "Try again" at once is only refused again.
      const retryAt = waitAsked(error);
      if (retryAt !== null) recheck.current = setTimeout(check, retryAt - Date.now());
      setGate({ message: `The server did not answer as expected: ${error.message}`, retry: true, retryAt });
    }
  };

  useEffect(() => {
    onUnauthorized((error) => {
      const had = storedKey();
      forgetKey();
      setSession(null);
      setGate({
        message: had
          ? `Wrong API key: the server answered "${error.message}". Check it (taskpool keys list shows the first characters of each key) and enter it again.`
          : "This server needs an API key.",
      });
    });
    check();
  }, []);

  if (gate) {
    if (gate.retry) {
      return html`<main class="login"><div class="alert bad" role="alert">${gate.message}</div>
        ${gate.retryAt === null ? html`<button onClick=${check}>Try again</button>` : html`<${RetryWait} at=${gate.retryAt} />`}</main>`;
    }
    return html`<${KeyForm} message=${gate.message} onSaved=${check} />`;
  }
  if (!session) return html`<${Connecting} />`;
  const pages = PAGES.filter((p) => !p.optional || hasSchedules);
  const isTask = route.page === "tasks" && route.rest.length > 0;
  const page = pages.find((p) => p.path === route.page);
  const forget = () => {
    forgetKey();
    setSession(null);
    setGate({ message: null });
  };
  return html`<${Header} route=${route} session=${session} pages=${pages} onForget=${forget} />
    <main>
      ${isTask
        ? html`<${TaskPage} id=${route.rest[0]} session=${session} />`
        : page
          ? html`<${page.view} params=${route.params} rest=${route.rest} session=${session} />`
          : html`<div class="alert warn">No page "${route.page}". <a href="#/overview">Overview</a></div>`}
    </main>`;
}

render(html`<${App} />`, document.getElementById("app"));
