import { ValidationError } from "../../core/errors.js";
import { DEFAULT_STATEMENT_TIMEOUT_MS, idleInTransactionTimeoutMs } from "./timeouts.js";

/**
 * The settings of every connection of the store. Every statement is unqualified; the schema is chosen
 * once per connection. Generic plans: re-planning the claim for each call's parameters cost more than
 * running it (and the auto mode never switched). No JIT: compiling a plan costs far more than any
 * query here runs. The statement timeout: see DEFAULT_STATEMENT_TIMEOUT_MS; the idle-in-transaction
 * timeout: see idleInTransactionTimeoutMs.
 */
export const sessionSettings = (schema: string, statementTimeoutMs = DEFAULT_STATEMENT_TIMEOUT_MS) =>
  `-c search_path=${schema} -c plan_cache_mode=force_generic_plan -c jit=off -c statement_timeout=${statementTimeoutMs}` +
  ` -c idle_in_transaction_session_timeout=${idleInTransactionTimeoutMs(statementTimeoutMs)}`;

/** The settings above, and what a user who set one of them in the URL should do instead. */
const OWN_SETTINGS: Record<string, string> = {
  search_path: "choose the schema with the schema option (--schema, TASKPOOL_SCHEMA)",
  plan_cache_mode: "taskpool's statements are written for generic plans: remove it",
  jit: "taskpool turns JIT off for its short statements: remove it",
  statement_timeout: "set the limit with the statementTimeoutMs option (taskpool serve --statement-timeout)",
  idle_in_transaction_session_timeout: "taskpool derives it from the statement timeout: remove it",
};

/** The names of the settings in a PostgreSQL startup `options` string: `-c name=value` or `--name=value`, blanks escaped by `\`. */
function settingNames(options: string): string[] {
  const words = options.split(/(?<!\\)\s+/).filter(Boolean);
  const names: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const word = words[i];
    const assignment = word === "-c" ? words[++i] : word.startsWith("-c") ? word.slice(2) : word.startsWith("--") ? word.slice(2) : null;
    if (assignment) names.push(assignment.split("=")[0].toLowerCase().replaceAll("-", "_"));
  }
  return names;
}

/**
 * The URL without its `options` parameter, and that parameter's value (decoded as pg decodes it), or
 * null. The other parameters are left as written.
 */
function takeOptions(url: string): { url: string; options: string | null } {
  const at = url.indexOf("?");
  if (at < 0) return { url, options: null };
  const options = new URLSearchParams(url.slice(at + 1)).get("options");
  if (options === null) return { url, options };
  const kept = url
    .slice(at + 1)
    .split("&")
    .filter((pair) => new URLSearchParams(pair).get("options") === null);
  return { url: kept.length === 0 ? url.slice(0, at) : `${url.slice(0, at)}?${kept.join("&")}`, options };
}

/**
 * The URL and `options` for the store's connections: the user's own settings (the URL's `options`,
 * else PGOPTIONS, as libpq reads them), then the store's. pg reads a URL's `options` in place of the
 * ones it is given, so a URL with `?options=-c%20lock_timeout%3D5000` silently put the store in the
 * `public` schema with no statement timeout, and PGOPTIONS was never read. A setting of the store's
 * own among the user's is refused, naming what sets it: one of the two would be dropped without a word.
 */
export function connectionSettings(url: string, schema: string, statementTimeoutMs: number, env: NodeJS.ProcessEnv = process.env): { url: string; options: string } {
  const taken = takeOptions(url);
  const own = (taken.options ?? env.PGOPTIONS ?? "").trim();
  const clashes = [...new Set(settingNames(own))].filter((name) => Object.hasOwn(OWN_SETTINGS, name));
  if (clashes.length > 0) {
    const where = taken.options === null ? "PGOPTIONS sets" : "The connection URL's options set";
    throw new ValidationError(`${where} ${clashes.join(", ")}, which taskpool sets on its connections: ${clashes.map((name) => `for ${name}, ${OWN_SETTINGS[name]}`).join("; ")}`, [
      { path: "url", message: `sets ${clashes.join(", ")}` },
    ]);
  }
  const ours = sessionSettings(schema, statementTimeoutMs);
  return { url: taken.url, options: own === "" ? ours : `${own} ${ours}` };
}
