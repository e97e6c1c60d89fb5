// tsc compiles only TypeScript. What ships beside the compiled code: the migrations (.sql, next to
// each compiled store) and the dashboard's static files (next to the compiled server, which serves
// them). The argument is where the compiled src/ is (dist, or .build/src for the tests' processes).
// Each copy replaces what was there: a migration renamed or removed in src/ left its old copy behind,
// which the store then applied as well.
import { cpSync, existsSync, readdirSync, rmSync } from "node:fs";
import process from "node:process";

const out = process.argv[2] ?? "dist";

for (const dialect of readdirSync("src/store", { withFileTypes: true }).filter((d) => d.isDirectory())) {
  const from = `src/store/${dialect.name}/migrations`;
  if (!existsSync(from)) continue;
  rmSync(`${out}/store/${dialect.name}/migrations`, { recursive: true, force: true });
  cpSync(from, `${out}/store/${dialect.name}/migrations`, { recursive: true });
}

rmSync(`${out}/dashboard/public`, { recursive: true, force: true });
cpSync("src/dashboard/public", `${out}/dashboard/public`, { recursive: true });
