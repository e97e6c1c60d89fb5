import { readFileSync } from "node:fs";

/** taskpool's own version, reported by workers and the server (src/ and dist/ both sit next to package.json). */
export const VERSION: string = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version;
