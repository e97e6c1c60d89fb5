import pg from "pg";

const fallback = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, "text");

/**
 * A timestamptz as PostgreSQL writes it in text ("2026-11-24 04:58:33.123456+00", the offset in the
 * session's TimeZone), read by position. pg's parser (postgres-date) runs three regular expressions
 * per value, about 1 µs, and a task row holds eight timestamps: it was a tenth of a worker's CPU in a
 * drain. Any other shape (infinity, BC, a year past 9999 or before 100) goes to pg's parser.
 */
export function parseTimestamptz(text: string): Date | number | null {
  const n = text.length;
  const separators = text.charCodeAt(4) === DASH && text.charCodeAt(7) === DASH && text.charCodeAt(10) === SPACE;
  if (n < 22 || !separators || text.charCodeAt(13) !== COLON || text.charCodeAt(16) !== COLON) return fallback(text);
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 7);
  const day = digits(text, 8, 10);
  const hour = digits(text, 11, 13);
  const minute = digits(text, 14, 16);
  const second = digits(text, 17, 19);
  let i = 19;
  let ms = 0;
  if (text.charCodeAt(i) === DOT) {
    const from = ++i;
    while (i < n && isDigit(text.charCodeAt(i))) i++;
    // Date keeps milliseconds: the fraction's first three digits, the rest truncated.
    const msDigits = Math.min(i - from, 3);
    ms = digits(text, from, from + msDigits) * 10 ** (3 - msDigits);
  }
  const sign = text.charCodeAt(i) === PLUS ? 1 : text.charCodeAt(i) === DASH ? -1 : 0;
  // The offset: +HH, +HH:MM or +HH:MM:SS.
  const offsetHours = digits(text, i + 1, i + 3);
  let offsetMinutes = 0;
  let offsetSeconds = 0;
  i += 3;
  if (text.charCodeAt(i) === COLON) {
    offsetMinutes = digits(text, i + 1, i + 3);
    i += 3;
    if (text.charCodeAt(i) === COLON) {
      offsetSeconds = digits(text, i + 1, i + 3);
      i += 3;
    }
  }
  if (sign === 0 || i !== n || year < 100 || (month | day | hour | minute | second | offsetHours | offsetMinutes | offsetSeconds) < 0) {
    return fallback(text);
  }
  const offsetMs = (offsetHours * 3600 + offsetMinutes * 60 + offsetSeconds) * 1000;
  return new Date(Date.UTC(year, month - 1, day, hour, minute, second, ms) - sign * offsetMs);
}

const ZERO = 48;
const DASH = 45;
const SPACE = 32;
const COLON = 58;
const DOT = 46;
const PLUS = 43;

const isDigit = (code: number) => code >= ZERO && code <= ZERO + 9;

/** The decimal number in text[from, to), or -1 when a character there is not a digit. */
function digits(text: string, from: number, to: number): number {
  if (to > text.length) return -1;
  let value = 0;
  for (let i = from; i < to; i++) {
    const code = text.charCodeAt(i);
    if (!isDigit(code)) return -1;
    value = value * 10 + code - ZERO;
  }
  return value;
}
