/**
 * The web dashboard (docs/dashboard.md): static ES modules from src/dashboard/public (copied next to
 * the compiled server by the build), and the three browser modules of preact and htm it imports,
 * served from the package's own node_modules so the page works with no internet access and nothing is
 * built at run time. The page calls only the public API with the operator's key, so serving it needs
 * no key: what it shows is what that key may read.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance } from "fastify";
import type { RouteConfig } from "./route.js";

/** Where the page's files are: src/dashboard/public from the sources, dist/dashboard/public once built. */
export const DASHBOARD_ROOT = fileURLToPath(new URL("../dashboard/public/", import.meta.url));

const require = createRequire(import.meta.url);
/** The ES module build next to a package's main file (htm exports no package.json to start from). */
const besideMain = (specifier: string, file: string) => join(dirname(require.resolve(specifier)), file);

/** The browser builds the page's import map names (index.html), by the URL it asks for. */
const VENDOR: Record<string, () => string> = {
  "preact.mjs": () => besideMain("preact", "preact.mjs"),
  "preact-hooks.mjs": () => besideMain("preact/hooks", "hooks.mjs"),
  "htm.mjs": () => besideMain("htm", "htm.mjs"),
};

const publicRoute: RouteConfig = { access: "public" };

/**
 * What the page's responses are sent with. The page holds an operator's key, possibly an admin's: no
 * other site may frame it (a click on Cancel made through an invisible frame), and nothing but the
 * page's own files may run in it, so text that slipped into the DOM unescaped could not run either.
 * Its one inline script, the import map, is allowed by its hash; styles set from scripts
 * (`element.style`) are not inline styles to CSP, so `style-src 'self'` holds.
 */
function securityHeaders(indexHtml: string): Record<string, string> {
  const importMaps = [...indexHtml.matchAll(/<script type="importmap">([\s\S]*?)<\/script>/g)];
  const hashes = importMaps.map(([, text]) => ` 'sha256-${createHash("sha256").update(text).digest("base64")}'`).join("");
  const policy = [
    "default-src 'none'",
    `script-src 'self'${hashes}`,
    "style-src 'self'",
    "img-src 'self'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ];
  return {
    "content-security-policy": policy.join("; "),
    // For browsers that predate frame-ancestors.
    "x-frame-options": "DENY",
    // A module or stylesheet is run only when served as one: no guessing a type from the content.
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
  };
}

/** Serves the dashboard at `/` (its modules, styles and the vendored preact and htm). */
export async function dashboard(app: FastifyInstance): Promise<void> {
  // Read once at start: a missing file fails the server's start, not a browser's request.
  const vendor = new Map(await Promise.all(Object.entries(VENDOR).map(async ([name, path]) => [name, await readFile(path())] as const)));
  // This plugin's own routes only (Fastify encapsulates hooks): the API's answers and /docs are left as they are.
  const headers = securityHeaders(await readFile(join(DASHBOARD_ROOT, "index.html"), "utf8"));
  app.addHook("onSend", async (_request, reply) => {
    reply.headers(headers);
  });
  app.get("/vendor/:file", { schema: { hide: true }, config: publicRoute }, async (request, reply) => {
    const body = vendor.get((request.params as { file: string }).file);
    if (!body) return reply.callNotFound();
    return reply.type("text/javascript; charset=utf-8").header("cache-control", "public, max-age=3600").send(body);
  });
  // wildcard: false registers one route per file found now, so any other path still gets the API's 404 envelope.
  // Default caching (max-age=0 with an ETag): the browser revalidates, so an upgrade is seen at once.
  await app.register(fastifyStatic, { root: DASHBOARD_ROOT, prefix: "/", wildcard: false, index: "index.html", decorateReply: false });
}
