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
    // The dashboard's modules run in the browser, unbuilt: the browser globals they use.
    files: ["src/dashboard/public/**/*.js"],
    languageOptions: {
      globals: Object.fromEntries(
        ["AbortController", "addEventListener", "clearInterval", "clearTimeout", "confirm", "document", "fetch", "localStorage", "location", "removeEventListener", "setInterval", "setTimeout", "URLSearchParams"].map((name) => [name, "readonly"]),
      ),
    },
  },
);
