import { setTimeout as sleep } from "node:timers/promises";
import { type Command, Option } from "commander";
import { isLoopback } from "../core/loopback.js";
import { serviceLogger } from "./service-log.js";
import { DEFAULT_AUTH_FAILURES_PER_MINUTE, DEFAULT_BODY_LIMIT, DEFAULT_CLOSE_GRACE_MS, DEFAULT_RATE_LIMIT_PER_MINUTE } from "../server/defaults.js";
import { addDatabaseOnlyOptions, openPool, requireRegisteredOption, requiresRegistered, usesSchema } from "./database.js";
import { DEFAULT_SCHEMA } from "../store/open-store.js";
import { redactUrl } from "../core/redact-url.js";
import { CliError } from "./errors.js";
import { listenOrExplain } from "./listen.js";
import { integerFrom, nonNegativeInteger, port, positiveInteger, trustedProxies } from "./parse.js";
import { addRetentionOptions, retentionFrom } from "./retention-options.js";
import { addSweepOptions, checkCoordinatorFlags, sweepFrom } from "./sweep-options.js";

export function serveCommand(program: Command): void {
  const command = program
    .command("serve")
    .addHelpText("after", "\nExample:\n  $ taskpool keys create --scope admin --quiet      # the key clients send\n  $ taskpool serve --db postgres://app@db/app --host 0.0.0.0 --port 8080")
    .description("the HTTP API for workers and producers in any language, with its OpenAPI document and /docs")
    .addOption(new Option("--host <host>", "address to listen on (0.0.0.0: every interface)").env("TASKPOOL_HOST").default("127.0.0.1"))
    .addOption(new Option("--port <port>", "port to listen on (0: any free one)").env("TASKPOOL_PORT").default(8080).argParser(port))
    .option("--no-auth", "ask for no API key, even when keys exist (only on a network you trust)")
    .option("--rate-limit <n>", "requests per minute per API key, unless the key sets its own (0: no limit but the keys' own)", nonNegativeInteger, DEFAULT_RATE_LIMIT_PER_MINUTE)
    .option("--auth-failure-limit <n>", "failed API key attempts per minute from one client address before it gets 429 without a lookup (0: no limit)", nonNegativeInteger, DEFAULT_AUTH_FAILURES_PER_MINUTE)
    .addOption(
      new Option("--trust-proxy <addresses>", "the reverse proxies in front of this server, whose X-Forwarded-For gives the client's address (for --auth-failure-limit): their addresses or ranges, comma-separated (10.0.0.0/8,loopback)")
        .env("TASKPOOL_TRUST_PROXY")
        .argParser(trustedProxies),
    )
    .option("--body-limit <bytes>", "largest request body", positiveInteger, DEFAULT_BODY_LIMIT)
    // The default now; still accepted from the days it had to be asked for.
    .addOption(new Option("--coordinator").hideHelp())
    .option("--no-coordinator", "run no coordinator in this process; then run `taskpool coordinator` elsewhere, or no dead worker's task is ever recovered")
    .option("--public-metrics", "serve /metrics without a key (for a Prometheus on a network you trust; default: a producer or admin key)")
    .option(
      "--shutdown-delay <seconds>",
      "on SIGTERM, serve this long more with /readyz answering 503, so a load balancer takes the server out before it stops accepting; a second signal ends the wait",
      nonNegativeInteger,
      0,
    )
    .option(
      "--shutdown-grace <seconds>",
      "on SIGTERM, how long the requests in flight get to finish before their connections are dropped and the database is closed",
      // A timer's longest wait: past it Node fires at once, and the grace asked for became none.
      integerFrom(0, 2_147_483),
      DEFAULT_CLOSE_GRACE_MS / 1000,
    )
    .option(
      "--statement-timeout <seconds>",
      "PostgreSQL: how long the database runs one statement (a slow search, say) before cancelling it, answered 503 (default 10; at most 25, under the 30 s an HTTP client waits for an answer)",
      integerFrom(1, 25),
    )
    .addOption(requireRegisteredOption("refuse tasks (and schedules' tasks) of a type never registered, whoever enqueues them (catches typos)"));
  addSweepOptions(command);
  addDatabaseOnlyOptions(command, (server) => `serve is the server: give it a database (sqlite:./taskpool.db or postgres://…), not ${server}`);
  addRetentionOptions(command).action(async (opts) => {
      const logger = serviceLogger();
      const retention = retentionFrom(opts);
      // Bad settings are refused before the database is opened.
      checkCoordinatorFlags(sweepFrom(opts), retention);
      if (opts.statementTimeout !== undefined && !usesSchema(command)) {
        throw new CliError("--statement-timeout is PostgreSQL's setting; a SQLite database has no limit to set: leave it out");
      }
      const statementTimeoutMs = opts.statementTimeout === undefined ? undefined : opts.statementTimeout * 1000;
      // Past loopback a key must exist, and a database not set up holds none: it is refused unopened. Created
      // empty and then refused, a mistyped --db or --schema left a stray file or schema, and the refusal
      // sent the operator to make a key in it rather than to fix the name.
      const needsKey = opts.auth && !isLoopback(opts.host);
      const pool = await openPool(opts, { requireRegistered: requiresRegistered(opts.requireRegistered), statementTimeoutMs, create: !needsKey }, (notSetUp) =>
        new CliError(
          `refusing to listen on ${opts.host} with no API key, as there is ${notSetUp} to hold one: fix ${usesSchema(command) ? "--db or --schema" : "--db"}, ` +
            `or create the database and a key first (taskpool keys create --scope admin), or pass --no-auth on a network you trust`,
        ),
      );
      // Whether keys are required is decided here, once: keys created later apply after a restart.
      let auth: "keys" | "none" = "keys";
      if (!opts.auth) {
        auth = "none";
        logger.warn(`Serving without API keys (--no-auth): anyone who can reach ${opts.host}:${opts.port} can use the API`);
      } else if ((await pool.apiKeys()).every((k) => k.revokedAt !== null)) {
        if (needsKey) {
          await pool.close();
          throw new CliError(
            `refusing to listen on ${opts.host} with no API key: anyone who can reach it could create, claim and cancel tasks. ` +
              `Create one first (taskpool keys create --scope admin), or pass --no-auth on a network you trust`,
          );
        }
        auth = "none";
        logger.warn(`No API key exists: serving without keys on ${opts.host}, which only this machine can reach. Create one (taskpool keys create --scope admin) and restart to require keys`);
      }
      const { buildServer } = await import("../server/server.js");
      const app = await buildServer(pool, {
        auth,
        rateLimitPerMinute: opts.rateLimit === 0 ? false : opts.rateLimit,
        authFailuresPerMinute: opts.authFailureLimit === 0 ? false : opts.authFailureLimit,
        // Keyless because it is on loopback (not by --no-auth): it answers only requests addressed to loopback (auth.ts).
        loopbackOnly: auth === "none" && opts.auth !== false,
        bodyLimit: opts.bodyLimit,
        closeGraceMs: opts.shutdownGrace * 1000,
        trustProxy: opts.trustProxy,
        // On by default, as recovery is in pg-boss's and BullMQ's workers: a server with HTTP workers and
        // no coordinator anywhere would never take back a dead worker's tasks. One leads at a time.
        runCoordinator: opts.coordinator !== false,
        coordinator: { retention, ...sweepFrom(opts) },
        metricsAccess: opts.publicMetrics === true ? "public" : "key",
        logger,
      });
      const address = await listenOrExplain(app, pool, opts.host, opts.port);
      // A signal while serving begins the stop; one during --shutdown-delay's wait ends the wait; one
      // while closing exits at once, said (it used to end the process without a word, exit 143).
      let phase: "serving" | "delaying" | "closing" = "serving";
      const cut = new AbortController();
      const stop = async (signal: string) => {
        if (phase === "delaying") return cut.abort();
        if (phase === "closing") {
          logger.warn(`Second ${signal}: exiting now, without waiting for the requests in flight; if this server's coordinator led, another leads once its lease runs out`);
          process.exit(1);
        }
        if (opts.shutdownDelay > 0) {
          phase = "delaying";
          // Load balancers see /readyz fail at their next probe and stop sending; until then requests still come, and are served.
          app.taskpool.drain();
          logger.info(`${signal}: /readyz answers 503 from now; serving ${opts.shutdownDelay} s more so load balancers move away (a second signal ends the wait)`);
          await sleep(opts.shutdownDelay * 1000, undefined, { signal: cut.signal }).catch(() => {});
        }
        phase = "closing";
        logger.info(`${signal}: no new requests; finishing those in flight, for up to ${opts.shutdownGrace} s; requests arriving on connections still open are answered 503 (a second signal exits at once)`);
        // Stops accepting, answers waiting claims at once, lets in-flight requests finish (up to the grace), then closes the store.
        await app.close();
        await pool.close();
        logger.info("Stopped");
        process.exit(0);
      };
      process.on("SIGTERM", () => void stop("SIGTERM"));
      process.on("SIGINT", () => void stop("SIGINT"));
      // Said once a signal is handled: one sent on reading this line would otherwise kill the server unclean.
      // The database is named here: a mistyped --schema makes a new, empty pool, and this line is where it shows.
      const database = opts.db.startsWith("postgres") ? `${redactUrl(opts.db)}, schema ${opts.schema ?? DEFAULT_SCHEMA}` : opts.db;
      logger.info(`taskpool ${auth === "keys" ? "requires API keys" : "asks for no API key"}; listening on ${address} (docs: ${address}/docs); database ${database}`);
    });
}
