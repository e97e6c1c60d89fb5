// Pieces every page uses: status badges, load bars, the throughput chart, errors, JSON, long text.
import { useEffect, useState } from "preact/hooks";
import { html } from "./html.js";
import { json } from "./format.js";

/** A status word in its colour, with a dot for a quick scan. */
export function Status({ status }) {
  return html`<span class="status status-${status}"><span class="dot" style="background: currentColor"></span>${status}</span>`;
}

/** Load against capacity, as a bar and "2/4". */
export function LoadBar({ load, capacity }) {
  const percent = capacity > 0 ? Math.min(100, Math.round((100 * load) / capacity)) : 0;
  return html`<span class="bar ${percent >= 100 ? "full" : ""}" title="${percent}%"><span style="width: ${percent}%"></span></span>
    <span class="small"> ${load}/${capacity}</span>`;
}

/** What a failed call said; a 403 explains the key's scope. */
export function ErrorBox({ error }) {
  if (!error) return null;
  return html`<div class="alert bad" role="alert"><strong>${error.code ?? "error"}</strong>: ${error.message}</div>`;
}

/**
 * Text of any length, cut at three lines (in a `td.text`): the whole of it is its title, and a click
 * opens or closes it, and only that: in a row that opens a page on a click (Tasks) it went there instead.
 */
export function LongText({ text }) {
  const [open, setOpen] = useState(false);
  const toggle = (event) => {
    event.stopPropagation();
    setOpen(!open);
  };
  return html`<span class="clamp ${open ? "open" : ""}" title=${text} tabindex="0" role="button" aria-expanded=${open} onClick=${toggle} onKeyDown=${onActivate(toggle)}>${text}</span>`;
}

/**
 * What an action did, shown while it is still what the page shows: a task retried that failed again
 * kept "Put back in the pool." beside its new Retry. `version` changes whenever the thing does (a
 * task's updated_at); `state` is what the action leads to (a task's status). An outcome given the
 * state its action leads to (`leadsTo`: "pending" for a retry) goes once a change finds another; one
 * without (a refusal, most often because someone else changed the thing first) is shown through that
 * first change, and goes at the next.
 */
export function useOutcome(version, state) {
  const [outcome, setOutcome] = useState(null);
  useEffect(() => {
    if (outcome === null || version === outcome.at) return;
    const stale = outcome.leadsTo !== undefined ? state !== outcome.leadsTo : outcome.changed;
    setOutcome(stale ? null : { ...outcome, at: version, changed: true });
  }, [version]);
  return [outcome, (next, leadsTo) => setOutcome(next && { ...next, at: version, leadsTo, changed: false })];
}

/** A key handler doing what a click does, for an element that is no button or link (a row, a clamped text): Enter or Space. */
export const onActivate = (action) => (event) => {
  if (event.key !== "Enter" && event.key !== " ") return;
  event.preventDefault();
  action(event);
};

export function Json({ value }) {
  if (value === null || value === undefined) return html`<span class="muted">none</span>`;
  return html`<pre>${json(value)}</pre>`;
}

export function Loading() {
  return html`<p class="loading">Loading…</p>`;
}

/**
 * Completed (green) and failed (red, stacked on top) tasks per minute as SVG bars, oldest left;
 * the y axis is labelled with the busiest minute.
 */
export function ThroughputChart({ minutes }) {
  const width = 720;
  const height = 180;
  const left = 34;
  const bottom = 18;
  const plotH = height - bottom - 8;
  const max = Math.max(1, ...minutes.map((m) => m.completed + m.failed));
  const slot = (width - left) / minutes.length;
  const barW = Math.max(1, slot - 2);
  const y = (n) => (plotH * n) / max;
  return html`<svg class="chart" viewBox="0 0 ${width} ${height}" role="img" aria-label="Completed and failed tasks per minute">
    <line class="axis" x1=${left} y1=${8 + plotH} x2=${width} y2=${8 + plotH} />
    <line class="axis" x1=${left} y1="8" x2=${width} y2="8" stroke-dasharray="3 3" />
    <text x=${left - 4} y="12" text-anchor="end">${max}</text>
    <text x=${left - 4} y=${8 + plotH} text-anchor="end">0</text>
    ${minutes.map((m, i) => {
      const x = left + i * slot + 1;
      const c = y(m.completed);
      const f = y(m.failed);
      const label = `${new Date(m.minute).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" })}: ${m.completed} completed, ${m.failed} failed`;
      return html`<g>
        <title>${label}</title>
        ${c > 0 && html`<rect class="completed" x=${x} y=${8 + plotH - c} width=${barW} height=${c} />`}
        ${f > 0 && html`<rect class="failed" x=${x} y=${8 + plotH - c - f} width=${barW} height=${f} />`}
      </g>`;
    })}
    <text x=${left} y=${height - 3}>-${minutes.length} min</text>
    <text x=${width} y=${height - 3} text-anchor="end">now</text>
  </svg>
  <div class="legend"><span><span class="swatch" style="background: var(--completed)"></span>completed</span>
    <span><span class="swatch" style="background: var(--failed)"></span>failed</span></div>`;
}
