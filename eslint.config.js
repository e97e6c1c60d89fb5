import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", ".build/", "node_modules/", "scratch/", ".prof/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
    },
  },
  {
    // The build bundles TypeBox into src/core/typebox.ts's compiled copy; a module importing the
    // package itself would load its 218 modules again at every start (scripts/bundle-typebox.js).
    files: ["src/**/*.ts"],
    ignores: ["src/core/typebox.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [{ group: ["@sinclair/typebox", "@sinclair/typebox/*"], message: "import TypeBox from src/core/typebox.ts, which the build bundles" }] }],
    },
  },
  {
    // The dashboard's modules run in the browser, unbuilt: the browser globals they use.
    files: ["src/dashboard/public/**/*.js"],
    languageOptions: {
      globals: Object.fromEntries(
        ["AbortController", "addEventListener", "clearInterval", "clearTimeout", "confirm", "document", "fetch", "localStorage", "location", "removeEventListener", "setInterval", "setTimeout", "URLSearchParams"].map((name) => [name, "readonly"]),
      ),
    },
  },
);
