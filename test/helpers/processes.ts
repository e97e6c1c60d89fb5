import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/**
 * The file node starts for one of the tests' TypeScript scripts: its compiled copy in .build/
 * (test/global-setup.ts compiles them with the sources they import).
 */
export function script(tsFile: string): string {
  if (!tsFile.startsWith(ROOT) || !tsFile.endsWith(".ts")) throw new Error(`${tsFile} is not a TypeScript file of this checkout`);
  return `${ROOT}.build/${tsFile.slice(ROOT.length, -3)}.js`;
}
