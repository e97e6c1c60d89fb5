import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { InvalidArgumentError } from "commander";
import type { ScheduleDefinition } from "../core/schedule.js";
import type { Handler } from "../worker/options.js";

/**
 * Why a module could not be imported. Node's own words name the CLI's file as the importer of a
 * missing one, and say of a .ts file only that the extension is unknown (Node 20 loads no TypeScript).
 */
function whyNotLoaded(error: Error & { code?: string }, path: string, file: string): string {
  if (error.code === "ERR_MODULE_NOT_FOUND" && !existsSync(file)) return `there is no file ${file}`;
  if (error.code === "ERR_UNKNOWN_FILE_EXTENSION" && /\.[cm]?ts$/.test(path)) return "taskpool loads JavaScript, not TypeScript: compile it (tsc) and pass the .js it makes";
  return error.message;
}

/** An ES module named on the command line (a path, relative to the working directory), or one line saying why it cannot be loaded. */
async function loadModule(path: string, what: string): Promise<Record<string, unknown>> {
  const file = resolve(path);
  return import(pathToFileURL(file).href).catch((error: Error) => {
    throw new InvalidArgumentError(`cannot load ${what} from ${path}: ${whyNotLoaded(error, path, file)}`);
  });
}

/** The `handlers` a module exports: `export const handlers = { task_type: async (params, ctx) => … }`. */
export async function loadHandlers(path: string): Promise<Record<string, Handler>> {
  const handlers = (await loadModule(path, "handlers")).handlers;
  if (!handlers || typeof handlers !== "object") {
    throw new InvalidArgumentError(`${path} does not export "handlers" (export const handlers = { task_type: async (params, ctx) => … })`);
  }
  return handlers as Record<string, Handler>;
}

/**
 * The schedules a module defines for `taskpool dev`, as a function of the time they are saved: its
 * `devSchedules` (a list, or a function of that time returning one: a cadence compressed for
 * watching, which may start from it), else its `schedules`. Checked when saved.
 */
export async function loadDevSchedules(path: string): Promise<(start: Date) => ScheduleDefinition[]> {
  const module = await loadModule(path, "schedules");
  const { devSchedules, schedules } = module;
  if (typeof devSchedules === "function") return (start) => devSchedules(start);
  const found = devSchedules ?? schedules;
  if (!Array.isArray(found)) throw new InvalidArgumentError(`${path} exports neither "devSchedules" nor "schedules" (a list of schedule definitions, docs/schedules.md)`);
  return () => found;
}
