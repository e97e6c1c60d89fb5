// tsc compiles only TypeScript. What ships beside the compiled code: the migrations (.sql, next to
// each compiled store) and the dashboard's static files (next to the compiled server, which serves them).
import { cpSync, readdirSync } from "node:fs";

for (const dialect of readdirSync("src/store", { withFileTypes: true }).filter((d) => d.isDirectory())) {
  const from = `src/store/${dialect.name}/migrations`;
  try {
    cpSync(from, `dist/store/${dialect.name}/migrations`, { recursive: true });
  } catch (error) {
    if (error.code !== "ENOENT") throw error;
  }
}

cpSync("src/dashboard/public", "dist/dashboard/public", { recursive: true });
