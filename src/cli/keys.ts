import { type Command, Option } from "commander";
import { keysNotOverHttp } from "../client/errors.js";
import { API_KEY_SCOPES, type ApiKeyRecord } from "../core/api-key.js";
import { ValidationError } from "../core/errors.js";
import { DEFAULT_KEY_CACHE_MS } from "../server/defaults.js";
import { addDatabaseOnlyOptions, withPool } from "./database.js";
import { namedAsFlags } from "./errors.js";
import { keyId, positiveInteger } from "./parse.js";
import { type Column, emit, formatTable, jsonOption, time } from "./table.js";

/** The library's answer to managing keys over HTTP, with the server named. */
const overHttp = (server: string) => `${keysNotOverHttp().message}, not ${server}`;

const KEY_COLUMNS: Column<ApiKeyRecord>[] = [
  { header: "id", value: (k) => k.id },
  { header: "scope", value: (k) => k.scope },
  { header: "name", value: (k) => k.name },
  { header: "key", value: (k) => `${k.prefix}…` },
  { header: "created", value: (k) => time(k.createdAt) },
  { header: "state", value: (k) => (k.revokedAt === null ? "active" : `revoked ${time(k.revokedAt)}`) },
  { header: "rate limit", value: (k) => (k.rateLimitPerMinute === null ? "server's" : `${k.rateLimitPerMinute}/min`) },
];

const describeKey = (k: ApiKeyRecord) => `${k.id} (${k.scope}${k.name === null ? "" : `, "${k.name}"`})`;

export function keysCommand(program: Command): void {
  const keys = program.command("keys").description("API keys of the HTTP server (taskpool serve): create, list, revoke");
  const create = keys
    .command("create")
    .addHelpText("after", "\nExample:\n  $ taskpool keys create --scope worker --name crawlers --quiet\n  $ taskpool keys create --scope admin --name ops")
    .description("make a key; it is printed once, only its hash is stored")
    .addOption(new Option("--scope <scope>", "admin: everything; producer: create tasks, register types, read; worker: claim and the lease protocol").choices(API_KEY_SCOPES).makeOptionMandatory())
    .option("--name <name>", "a label for operators")
    .option("--rate-limit <n>", "requests per minute for this key (default: the server's)", positiveInteger)
    .option("--quiet", "print only the key (for scripts: KEY=$(taskpool keys create --scope worker --quiet))");
  addDatabaseOnlyOptions(create, overHttp).action((opts) =>
    withPool(opts, async (pool) => {
      const { key, apiKey } = await pool
        .createApiKey({ scope: opts.scope, name: opts.name, rateLimitPerMinute: opts.rateLimit })
        .catch((error: unknown) => Promise.reject(error instanceof ValidationError ? namedAsFlags(error, { name: "--name", scope: "--scope", rateLimitPerMinute: "--rate-limit" }) : error));
      if (opts.quiet) {
        console.log(key);
        return;
      }
      console.log(`Created API key ${describeKey(apiKey)}:\n${key}`);
      console.log("Store it now: only its hash is kept, so it cannot be shown again. Send it in the X-API-Key header.");
    }, {}, true),
  );
  const list = keys
    .command("list")
    .description("every key (never the keys themselves), revoked ones included")
    .addOption(jsonOption())
    .addHelpText("after", "\nExample:\n  $ taskpool keys list\n  $ taskpool keys list --json | jq '.[] | select(.revokedAt == null) | .id'");
  addDatabaseOnlyOptions(list, overHttp).action((opts) =>
    withPool(opts, async (pool) => {
      const all = await pool.apiKeys();
      emit(opts.json, all, () => (all.length === 0 ? ["No API keys (taskpool keys create --scope admin makes one)"] : formatTable(KEY_COLUMNS, all)));
    }),
  );
  const revoke = keys
    .command("revoke <id>")
    .description(`refuse a key for good (a running server within ${DEFAULT_KEY_CACHE_MS / 1000} s: it trusts a key it looked up that long)`)
    .addHelpText("after", "\nExample:\n  $ taskpool keys revoke 3      # the ID taskpool keys list shows first");
  addDatabaseOnlyOptions(revoke, overHttp).action((text: string, opts) => {
    const id = keyId(text);
    return withPool(opts, async (pool) => {
      // Revoking again changes nothing and returns the key as it was: read first, to tell the two apart.
      const earlier = (await pool.apiKeys()).find((k) => k.id === id);
      if (earlier?.revokedAt) {
        console.log(`API key ${describeKey(earlier)} was already revoked, at ${time(earlier.revokedAt)}; nothing changed`);
        return;
      }
      const revoked = await pool.revokeApiKey(id);
      // Said, since "revoked" reads as "refused now": servers refuse it once their key cache lets go of it.
      console.log(`Revoked API key ${describeKey(revoked)}; running servers refuse it within ${DEFAULT_KEY_CACHE_MS / 1000} s`);
    });
  });
}
