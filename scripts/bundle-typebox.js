// Replaces the compiled src/core/typebox.js, which re-exports @sinclair/typebox, with TypeBox itself
// bundled into that one module. The package is 218 ES modules: loading them took 105–145 ms of every
// process's start, a bundle of them about 16 ms. TypeBox marks its schemas with Symbol.for(), so they
// work the same with a user's own copy of TypeBox. The argument is where the compiled src/ is (dist,
// or .build/src for the tests' processes).
import { buildSync } from "esbuild";
import process from "node:process";

const file = `${process.argv[2] ?? "dist"}/core/typebox.js`;
buildSync({ entryPoints: [file], outfile: file, allowOverwrite: true, bundle: true, format: "esm", platform: "node", target: "node20", logLevel: "warning" });
