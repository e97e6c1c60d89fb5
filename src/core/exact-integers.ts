/**
 * JSON numbers become JavaScript numbers, which hold integers exactly only up to 2^53 − 1: a larger
 * one (a 64-bit id from another system) was stored rounded, 12345678901234567890 as
 * 12345678901234567000, and nothing said so. Where JSON text comes in (an HTTP body, the CLI's
 * params), such an integer is refused, naming where it is; sent as a string it is kept exactly.
 * Numbers written with a fraction or an exponent are taken as the approximations they are.
 */

// Strings are matched to be skipped; an integer token is 16 digits or more, not part of a fraction or an exponent.
const TOKENS = /"(?:[^"\\]|\\.)*"|(?<![\d.eE+-])-?\d{16,}(?![\d.eE])/g;

const SIXTEEN_DIGITS = /\d{16}/;

/** The refusal for the first integer in `text` (already parsed as `value`) that JSON numbers cannot hold exactly, or null. */
export function inexactInteger(text: string, value: unknown, root = ""): string | null {
  if (!SIXTEEN_DIGITS.test(text)) return null;
  for (const [token] of text.matchAll(TOKENS)) {
    if (token.startsWith('"') || Number.isSafeInteger(Number(token))) continue;
    const where = pathTo(value, Number(token), root);
    // Some (2^53, 10^19) happen to be kept; past the range most are not, so all are refused alike.
    const stored = String(Number(token)) === token ? "" : `; it would be stored as ${Number(token)}`;
    return `${where === "" ? "" : `${where}: `}${token} is an integer beyond ±${Number.MAX_SAFE_INTEGER}, the largest a JSON number keeps exactly here${stored}: send it as a string`;
  }
  return null;
}

/** Where `target` is in `value` (dotted, under `root`); "" at the root or when not found. Iterative: a body is walked before its depth is checked. */
function pathTo(value: unknown, target: number, root: string): string {
  const stack: [unknown, string][] = [[value, root]];
  for (let entry = stack.pop(); entry !== undefined; entry = stack.pop()) {
    const [node, path] = entry;
    if (node === target) return path;
    if (typeof node !== "object" || node === null) continue;
    // Pushed last first: the first match in document order is found first.
    for (const [key, child] of Object.entries(node).reverse()) stack.push([child, path === "" ? key : `${path}.${key}`]);
  }
  return "";
}
