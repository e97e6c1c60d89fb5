// Polling while the tab is visible (document.visibilityState), and the "live" state the header shows.
import { useEffect, useRef, useState } from "preact/hooks";

const params = new URLSearchParams(location.search);
/**
 * Poll period in ms; `?interval=` overrides it (500 ms to 10 minutes), for demos and tests. Unbounded,
 * a period past what a timer can wait (2^31 - 1 ms, or Infinity) fired at once: hundreds of polls a second.
 */
export const POLL_MS = Math.min(600_000, Math.max(500, Number(params.get("interval")) || 3000));

/** How many times as long as its last answer took a poll waits, at least (see usePoll). */
const SLOW_FACTOR = 10;

/**
 * The longest a slow answer puts the next poll off. An answer slow because the server hung (stopped, cut
 * off, its database locked) says nothing of the query's cost: 10 times a 2-minute outage left the page
 * 20 minutes unasked after the server came back, under "live".
 */
const SLOW_WAIT_MAX_MS = 10 * POLL_MS;

/**
 * A request out this long says so in the header: a server stopped or cut off by the network takes the
 * request and never answers, and the fetch waits minutes, while the header said "live · updated 4 min ago".
 */
export const NO_ANSWER_MS = 5 * POLL_MS;

const listeners = new Set();
let state = { mode: "live", at: null, error: null, waitingSince: null, retryAt: null, retryError: null };

/**
 * Until when the server asked every poll to wait (Date.now() ms; 0: it did not): a 429's or a 503's
 * `retry_after` (a database unreachable or its statement cancelled, a server shutting down, a proxy's
 * Retry-After). Shared by all polls, the page's and the next page's, and the key's check: the whole
 * server asked, not one call. Only 429s were waited out; after a 503 every poll asked again each period.
 */
let notBefore = 0;

/** How long a 429 without `retry_after` waits (a proxy's, say). */
const RATE_LIMITED_WAIT_S = 10;

/** The longest wait a server (or a proxy's Retry-After: 86400) can put the polls off: a page that never asks again is dead. */
const RETRY_WAIT_MAX_S = 300;

/**
 * Puts every call off as long as `error` asks (a 429 or a 503 with `retry_after`, at most
 * RETRY_WAIT_MAX_S; a 429 without one RATE_LIMITED_WAIT_S). Returns until when (Date.now() ms), or
 * null when it asks no wait.
 */
export function waitAsked(error) {
  const asked = error.retryAfter ?? (error.status === 429 ? RATE_LIMITED_WAIT_S : undefined);
  if (asked === undefined) return null;
  notBefore = Math.max(notBefore, Date.now() + Math.min(asked, RETRY_WAIT_MAX_S) * 1000);
  return notBefore;
}

/** Until when (Date.now() ms) the server asked every call to wait, with the error that asked it; null when it is over or was never asked. */
export function waitPending() {
  return Date.now() < notBefore ? { at: notBefore, error: state.retryError } : null;
}

/** The requests of the polls now out, each with when it was sent. */
const outstanding = new Map();

function track(token, sentAt) {
  if (sentAt === null) outstanding.delete(token);
  else outstanding.set(token, sentAt);
  const since = outstanding.size === 0 ? null : Math.min(...outstanding.values());
  if (since !== state.waitingSince) publish({ waitingSince: since });
}

function publish(next) {
  state = { ...state, ...next };
  for (const listener of listeners) listener(state);
}

/**
 * The live state (`live` | `paused` | `error`), the time of the last good answer, the last error, since
 * when the oldest request out has waited (null: none out), and until when the server asked the polls
 * to wait (`retryAt`, with the error that asked it, `retryError`; null: it did not, or a good answer came since).
 */
export function useLiveState() {
  const [current, setCurrent] = useState(state);
  useEffect(() => {
    listeners.add(setCurrent);
    return () => listeners.delete(setCurrent);
  }, []);
  return current;
}

/**
 * Calls `load` now and every `periodMs` while the tab is visible, again at once when it becomes
 * visible; after an answer with `retry_after` (a 429 or a 503) it and every other poll wait as long as
 * the API asks (a 429 without one: RATE_LIMITED_WAIT_S), and after a slow answer SLOW_FACTOR times
 * as long as it took (at most SLOW_WAIT_MAX_MS). Returns the last data, the last error (cleared by
 * the next success) and `reload()`. `periodMs` may be a function of the last data: a page whose subject stopped changing
 * polls rarely.
 */
export function usePoll(load, deps, periodMs = POLL_MS) {
  const [result, setResult] = useState({ data: null, error: null });
  const reloadRef = useRef(() => {});
  useEffect(() => {
    let stopped = false;
    let running = false;
    let timer = null;
    let failed = null; // the last error this poll put in the header
    // A reload asked for while a request was out: that request's answer may predate what was just done
    // (a retry), and the next poll can be 30 s off, so it is asked again as soon as the answer comes.
    let reloadAsked = false;
    const token = {}; // this poll's request while it is out
    const schedule = (ms) => {
      clearTimeout(timer);
      timer = setTimeout(tick, ms);
    };
    async function tick() {
      if (stopped || running) return;
      if (document.visibilityState === "hidden") return publish({ mode: "paused" });
      // The server asked for a wait (another poll's answer, maybe): a reload or the tab shown again comes after it.
      if (Date.now() < notBefore) return schedule(notBefore - Date.now());
      running = true;
      let wait = typeof periodMs === "function" ? periodMs(null) : periodMs;
      const started = Date.now();
      track(token, started);
      try {
        const data = await load();
        if (typeof periodMs === "function") wait = periodMs(data);
        if (!stopped) setResult({ data, error: null });
        publish({ mode: "live", at: Date.now(), error: null, retryAt: null, retryError: null });
      } catch (error) {
        // Its page was left while the request was out: no later answer of this poll would clear the error.
        if (stopped) return;
        setResult((r) => ({ data: r.data, error }));
        failed = error;
        publish({ mode: "error", error });
        const retryAt = waitAsked(error);
        if (retryAt !== null) {
          publish({ retryAt, retryError: error });
          reloadAsked = false; // the server's wait comes first
        }
      } finally {
        track(token, null);
        running = false;
        // A slow answer is a costly one (a search of the params reads every task): ask again only
        // after SLOW_FACTOR times as long as it took, so one open tab keeps the server busy a small
        // share of the time, instead of re-running it every period (up to SLOW_WAIT_MAX_MS: see there).
        wait = reloadAsked ? 0 : Math.max(wait, Math.min((Date.now() - started) * SLOW_FACTOR, SLOW_WAIT_MAX_MS));
        reloadAsked = false;
        wait = Math.max(wait, notBefore - Date.now());
        if (!stopped && document.visibilityState !== "hidden") schedule(wait);
      }
    }
    const onVisibility = () => {
      if (document.visibilityState === "visible") schedule(0);
      else {
        clearTimeout(timer);
        publish({ mode: "paused" });
      }
    };
    document.addEventListener("visibilitychange", onVisibility);
    reloadRef.current = () => (running ? (reloadAsked = true) : schedule(0));
    setResult({ data: null, error: null });
    tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
      // A request still out is no longer waited for: left for another page, it must not hold the header.
      track(token, null);
      document.removeEventListener("visibilitychange", onVisibility);
      // Only this poll's next answer would clear its error: left for a page that polls nothing, the header kept it for good.
      if (state.mode === "error" && state.error === failed) publish({ mode: "live", error: null });
    };
  }, deps);
  return { ...result, reload: () => reloadRef.current() };
}
