export type Cell = string | number;

/**
 * A plain-text table: numbers right-aligned so their magnitudes line up, text left-aligned.
 * Plain text rather than console.table so the output can be pasted into notes as it is.
 */
export function formatTable(headers: string[], rows: Cell[][]): string {
  const text = rows.map((row) => row.map((cell) => (typeof cell === "number" ? formatNumber(cell) : cell)));
  const widths = headers.map((h, i) => Math.max(h.length, ...text.map((row) => row[i].length)));
  // "-" (no figure) does not make a column of numbers text.
  const numeric = headers.map((_, i) => rows.some((row) => typeof row[i] === "number") && rows.every((row) => typeof row[i] === "number" || row[i] === "-"));
  const line = (cells: string[]) =>
    cells.map((c, i) => (numeric[i] ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join("  ").trimEnd();
  return [line(headers), line(widths.map((w) => "-".repeat(w))), ...text.map(line)].join("\n");
}

/** Integers as they are; three decimals for small values, fewer for large ones: a latency table needs no more. */
function formatNumber(n: number): string {
  if (!Number.isFinite(n) || Number.isInteger(n)) return String(n);
  if (Math.abs(n) >= 1000) return Math.round(n).toString();
  if (Math.abs(n) >= 10) return n.toFixed(1);
  return n.toFixed(3);
}
