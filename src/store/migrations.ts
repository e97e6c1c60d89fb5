import { readdirSync, readFileSync } from "node:fs";

/** One forward-only schema change: `NNN_name.sql` in a dialect's migrations folder. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** Reads a migrations folder in version order; file names carry the version so order is explicit. */
export function loadMigrations(folder: URL): Migration[] {
  return readdirSync(folder)
    .filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((file) => ({
      version: Number(file.slice(0, 3)),
      name: file.slice(4, -4),
      sql: readFileSync(new URL(file, folder), "utf8"),
    }));
}
