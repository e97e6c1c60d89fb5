/** An integer from the environment, or the default when unset; anything else is a typo worth stopping for. */
export function envInt(name: string, fallback: number, min = 1): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer >= ${min}, got "${raw}"`);
  return value;
}

/** A comma-separated list from the environment, each item checked against the allowed values. */
export function envList<T extends string>(name: string, fallback: readonly T[], allowed: readonly T[]): T[] {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === "") return [...fallback];
  const items = raw.split(",").map((s) => s.trim()).filter((s) => s !== "");
  for (const item of items) {
    if (!(allowed as readonly string[]).includes(item)) throw new Error(`${name}: unknown value "${item}" (allowed: ${allowed.join(", ")})`);
  }
  return items as T[];
}

/** A comma-separated list of integers >= min from the environment, e.g. BENCH_CLAIMERS=1,2,4,8. */
export function envIntList(name: string, fallback: readonly number[], min = 1): number[] {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === "") return [...fallback];
  const items = raw.split(",").map((s) => s.trim()).filter((s) => s !== "");
  const values = items.map(Number);
  const bad = items.find((item, i) => !Number.isInteger(values[i]) || values[i] < min);
  if (bad !== undefined || values.length === 0) throw new Error(`${name} must list integers >= ${min}, got "${raw}"`);
  return values;
}
