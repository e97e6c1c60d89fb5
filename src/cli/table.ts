import { Option } from "commander";

/** What a cell may hold; null and undefined print as "-". */
export type Cell = string | number | boolean | Date | object | null | undefined;

/** One column: its header and how to read its cell from a row. */
export interface Column<T> {
  header: string;
  value: (row: T) => Cell;
}

/** A time to the second, in UTC: what an operator compares across machines. */
export function time(date: Date): string {
  return `${date.toISOString().slice(0, 19)}Z`;
}

/** One cell as text on one line; control characters (newlines, terminal escapes) become spaces. */
export function cell(value: Cell): string {
  if (value === null || value === undefined) return "-";
  const text = value instanceof Date ? time(value) : typeof value === "object" ? JSON.stringify(value) : String(value);
  // eslint-disable-next-line no-control-regex -- stored text may hold escapes that would garble the terminal
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, " ");
}

/**
 * Rows as lines of aligned columns under an upper-case header. A column of numbers (some cells may be
 * empty) is right-aligned, header included, so digits line up.
 */
export function formatTable<T>(columns: Column<T>[], rows: T[], { header = true } = {}): string[] {
  const values = rows.map((row) => columns.map((c) => c.value(row)));
  const texts = values.map((row) => row.map(cell));
  const numeric = columns.map(
    (_, i) => values.some((row) => typeof row[i] === "number") && values.every((row) => row[i] === null || row[i] === undefined || typeof row[i] === "number"),
  );
  const lines = header ? [columns.map((c) => c.header.toUpperCase()), ...texts] : texts;
  const widths = columns.map((_, i) => Math.max(...lines.map((line) => line[i].length)));
  return lines.map((line) =>
    line
      .map((text, i) => (numeric[i] ? text.padStart(widths[i]) : text.padEnd(widths[i])))
      .join("  ")
      .trimEnd(),
  );
}

/** Label/value pairs as two aligned columns (one record, shown field by field). */
export function formatFields(fields: [string, Cell][]): string[] {
  return formatTable<[string, Cell]>([{ header: "field", value: ([label]) => label }, { header: "value", value: ([, value]) => value }], fields, { header: false });
}

/** The --json option every operator command takes. */
export const jsonOption = () => new Option("--json", "print the records as JSON, as the library returns them (for scripts)");

/** Prints the records as JSON when asked, else the lines `render` makes of them. */
export function emit(json: boolean | undefined, records: unknown, render: () => string[]): void {
  if (json) console.log(JSON.stringify(records, null, 2));
  else for (const line of render()) console.log(line);
}
