import { relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { type Command, Option } from "commander";
import type { Taskpool } from "../api/taskpool.js";
import { ofAnotherLiveProcess } from "../core/process-alive.js";
import { DEFAULT_SCHEMA, sqlitePathOf } from "../store/open-store.js";
import { consoleLogger } from "./console-log.js";
import { CliError } from "./errors.js";
import { addDatabaseOnlyOptions, openPool } from "./database.js";
import { type SimulatedCrash, simulateCrash } from "./dev-crash.js";
import { createDevKey, revokeDeadDevKeys } from "./dev-key.js";
import { removeDevSchedules, saveDevSchedules } from "./dev-schedules.js";
import { LiveStatus } from "./dev-status.js";
import { redactUrl } from "../core/redact-url.js";
import { loadDevSchedules, loadHandlers } from "./handlers-module.js";
import { listenOrExplain } from "./listen.js";
import { integerFrom, port, positiveInteger } from "./parse.js";
import { printStatus } from "./status.js";
import { whenStdoutCloses } from "./stdout.js";
import { counted } from "../core/counted.js";

/** Seed 004's pipeline, the example `dev` runs unless told otherwise (beside src/ and dist/ alike). */
const EXAMPLE = fileURLToPath(new URL("../../examples/dispensary-crawl/", import.meta.url));
/** The example's role whose crawl the simulated crash interrupts: five pages, a checkpoint after each. */
const CRASH_ROLE = "product_discovery";
/** dev's coordinator: fast, so the example's crash is recovered within seconds, not minutes. */
const DEV_SWEEP = { sweepIntervalMs: 1000, staleAfterMs: 4000, deadAfterMs: 7000, reservationMs: 10_000 };
/** How often dev's workers beat. */
const DEV_BEAT_SECONDS = 1;

/**
 * Where the database is, for people: the file's full path, or the URL without its password and the
 * schema, without which the commands run beside dev (taskpool status …) read another pool.
 */
function describeDatabase(db: string, schema = DEFAULT_SCHEMA): string {
  if (db === "sqlite::memory:") return "in memory (gone when dev stops)";
  const path = sqlitePathOf(db);
  return path !== null ? resolve(path) : `${redactUrl(db)}, schema ${schema}`;
}

/** A module path as the user would type it: relative to here when it is below here. */
const shown = (path: string) => (relative(".", path).startsWith("..") ? path : relative(".", path));

export function devCommand(program: Command): void {
  const command = program
    .command("dev")
    .description("the one-minute tour: on embedded SQLite, the HTTP API and dashboard, a coordinator, and a worker per role running the dispensary-crawl example")
    .addOption(new Option("--port <port>", "port of the API and dashboard on 127.0.0.1 (0: any free one)").default(0).argParser(port))
    .option("--handlers <module>", "run these handlers instead of the example's (a worker per exported role)")
    .option("--schedules <module>", "save the schedules this module exports (devSchedules, else schedules); default: the example's, unless --handlers is given")
    .option("--no-demo", "save no schedules: nothing runs until you enqueue tasks (and no simulated crash)")
    .option("--no-crash", "do not stage the example's worker crash (an extra worker process killed mid-task, whose task the coordinator recovers)")
    .option("--concurrency <n>", "tasks each role's worker runs at once", positiveInteger, 4)
    .option("--no-live", "plain log lines even on a terminal, instead of the live status redrawn in place")
    .option("--status-every <seconds>", "with plain log lines, print the status table this often (0: never)", integerFrom(0, 86_400), 10)
    .addHelpText("after", "\nExample:\n  $ taskpool dev                      # then open the dashboard URL it prints, with the key it prints\n  $ taskpool dev --db sqlite:./tour.db --port 8080 --no-demo");
  addDatabaseOnlyOptions(command, (server) => `dev runs its own server: give it a database (sqlite:./taskpool.db or postgres://…), not ${server}`)
    .action(async (opts: { db: string; schema?: string; port: number; handlers?: string; schedules?: string; demo: boolean; crash: boolean; live: boolean; concurrency: number; statusEvery: number }) => {
      // On a terminal the log lines feed the live status; piped (CI, tests), they are printed as they come.
      const live = opts.live && process.stdout.isTTY ? new LiveStatus() : null;
      // The tour shows every task move; a worker in production logs them at debug only.
      const logger = consoleLogger("debug", live?.print);
      // Ended at once while starting (Ctrl-C as it migrates or saves its schedules, the terminal or
      // the output's reader gone), dev would leave what it had saved behind: it stops once started,
      // unless asked twice. By default Node ends the process at SIGINT, SIGTERM and SIGHUP.
      let stop: (() => Promise<void>) | null = null;
      let stopAsked = false;
      let stopping = false;
      const onSignal = () => {
        if (stop) return void stop();
        if (stopAsked) process.exit(130);
        stopAsked = true;
        logger.info("Stopping once started, so nothing dev saves is left behind (Ctrl-C again to quit at once)");
      };
      for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, onSignal);
      // Not a second Ctrl-C when already stopping.
      whenStdoutCloses(() => (stop ? stopping || void stop() : (stopAsked = true)));
      const handlersPath = opts.handlers ?? `${EXAMPLE}handlers.js`;
      const handlers = await loadHandlers(handlersPath);
      const schedulesPath = opts.schedules ?? (opts.handlers === undefined ? `${EXAMPLE}schedules.js` : undefined);
      const schedulesAt = opts.demo && schedulesPath ? await loadDevSchedules(schedulesPath) : () => [];

      const pool = await openPool(opts);
      await refuseLiveDev(pool, Object.keys(handlers), opts.db, opts.schema).catch(async (error: unknown) => {
        await pool.close();
        throw error;
      });
      // Before anything is saved: a handlers module whose role is no task type name is refused here.
      const workers = Object.keys(handlers).map((role) => {
        const worker = pool.worker({
          roles: [role],
          // Its own handler only: given them all, each worker warned that the others would not run there.
          handlers: { [role]: handlers[role] },
          workerId: `dev-${role}`,
          concurrency: opts.concurrency,
          pollIntervalMs: 1000,
          heartbeatIntervalMs: DEV_BEAT_SECONDS * 1000,
          shutdownGraceMs: 5000,
          handleSignals: false,
          logger,
        });
        return { role, worker };
      });
      // The port first: a port already taken ends the session before anything ran or was saved (no
      // schedule, no worker, no crash process, no coordinator's leadership to undo).
      const { buildServer } = await import("../server/server.js");
      // The server's sweep thresholds are its coordinator's (below): recover-stale sweeps with them, and
      // the heartbeat interval it tells HTTP workers fits them (2 s, not 30: they would turn dead between beats).
      const app = await buildServer(pool, { auth: "keys", coordinator: DEV_SWEEP });
      const url = await listenOrExplain(app, pool, "127.0.0.1", opts.port);
      // Made once the database is open (migrating a new one takes a moment): the example's first tick is 2-3 s from now.
      const definitions = schedulesAt(new Date());
      await revokeDeadDevKeys(pool);
      const saved = await saveDevSchedules(pool, definitions, { db: opts.db, schema: opts.schema });
      // The crash is the example's: staged when its pipeline runs, on a database another process can open.
      const noCrash = !opts.crash
        ? "--no-crash"
        : !opts.demo
          ? "--no-demo"
          : opts.handlers !== undefined
            ? "it belongs to the example, and --handlers runs yours"
            : opts.db === "sqlite::memory:"
              ? "another process cannot open an in-memory database"
              : null;
      const crash: SimulatedCrash | null =
        noCrash === null ? simulateCrash(pool, { handlersPath, db: opts.db, schema: opts.schema, role: CRASH_ROLE, checkpoints: 2, logger }) : null;
      for (const { role, worker } of workers) {
        // The crash's role waits for the extra worker to hold its task: else dev's own would take them all.
        if (crash && role === CRASH_ROLE) {
          void crash.claimed.then(() => (stopping ? undefined : worker.start())).catch((error: Error) => logger.error(`Worker dev-${role} did not start: ${error.message}`));
        } else await worker.start();
      }
      // Sweeps every second: schedules fire at most a second after their tick. A worker silent for 7 s is
      // dead, before its leases (10 s from the last beat, at dev's beat every second) would run out.
      const coordinator = pool.coordinator({ ...DEV_SWEEP, logger });
      coordinator.start();
      const { key, apiKey } = await createDevKey(pool);

      const crashLine = crash
        ? `worker ${crash.workerId} (its own process) will be killed mid-crawl; watch the coordinator recover its task (--no-crash: none)`
        : `none (${noCrash})`;
      const banner = [
        "",
        `  taskpool dev: the API, a coordinator and ${counted(workers.length, "worker")} (one per role); Ctrl-C stops them all`,
        "",
        `  Dashboard   ${url}/   (it asks for the API key once)`,
        `  API         ${url}/api/…   reference: ${url}/docs`,
        `  API key     ${key}   (admin, for this session: revoked when dev stops)`,
        `  Database    ${describeDatabase(opts.db, opts.schema)}`,
        `  Handlers    ${shown(handlersPath)}: ${Object.keys(handlers).join(", ")}`,
        `  Schedules   ${definitions.length === 0 ? "none saved" : `${definitions.map((d) => `${d.name} (${d.cron})`).join(", ")} from ${shown(schedulesPath as string)}: for this session, removed when dev stops`}`,
        `  Crash       ${crashLine}`,
        "",
      ];
      const status = !live && opts.statusEvery > 0 ? setInterval(() => void printStatus(pool, (l) => logger.info(l)), opts.statusEvery * 1000) : null;

      stop = async () => {
        if (stopping) process.exit(130);
        stopping = true;
        // No staged kill from now: it would leave its task to a coordinator that is stopping too.
        crash?.disarm();
        await live?.stop();
        logger.info("Stopping: the server closes, running tasks get 5 s to finish (Ctrl-C again to quit at once)");
        if (status) clearInterval(status);
        // First, so that quitting at once with a second Ctrl-C still leaves no schedule to fire under a
        // later serve, and no admin key that works after the session.
        await removeDevSchedules(pool, saved);
        if (saved.length > 0) logger.info(`Removed the schedules dev saved: ${saved.join(", ")}`);
        await pool.revokeApiKey(apiKey.id);
        await app.close();
        // The extra worker gives its task back as dev's own stop claiming: else one of them took it again.
        await Promise.all([crash?.stop(), ...workers.map(({ worker }) => worker.stop())]);
        await coordinator.stop();
        await printStatus(pool, (l) => logger.info(l));
        await pool.close();
        logger.info("Stopped");
        process.exit(0);
      };
      process.stdout.write(`${banner.join("\n")}\n`);
      live?.start(pool, banner);
      if (stopAsked) void stop();
    });
}

/**
 * Refuses to start beside another live dev on the same database: its workers have the same ids
 * (dev-<role>), and two live workers with one id give back each other's tasks. The second dev warned
 * of it and went on; once it stopped, the first one's workers were shut down under it, and every task
 * they claimed was taken back. A dev killed leaves records that are no longer live: those pass.
 */
async function refuseLiveDev(pool: Taskpool, roles: string[], db: string, schema?: string): Promise<void> {
  const ids = new Set(roles.map((role) => `dev-${role}`));
  const other = (await pool.workers({ status: ["active", "stale"] })).workers.find((w) => ids.has(w.workerId) && ofAnotherLiveProcess(w, DEV_BEAT_SECONDS * 1000));
  if (!other) return;
  throw new CliError(
    `another taskpool dev runs on ${describeDatabase(db, schema)} (its worker ${other.workerId}, pid ${other.pid} on ${other.hostname ?? "another host"}, was heard ${other.secondsSinceHeartbeat} s ago): ` +
      "two would share their workers' ids and take each other's tasks. Stop that one first, or run this one on another database (--db sqlite:./tour.db)",
  );
}
