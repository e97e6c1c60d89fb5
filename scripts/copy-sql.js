// tsc compiles only TypeScript; the migrations ship as .sql files next to the compiled stores.
import { cpSync, readdirSync } from "node:fs";

for (const dialect of readdirSync("src/store", { withFileTypes: true }).filter((d) => d.isDirectory())) {
  const from = `src/store/${dialect.name}/migrations`;
  try {
    cpSync(from, `dist/store/${dialect.name}/migrations`, { recursive: true });
  } catch (error) {
    if (error.code !== "ENOENT") throw error;
  }
}
