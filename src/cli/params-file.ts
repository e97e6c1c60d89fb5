import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { InvalidArgumentError } from "commander";
import { ValidationError } from "../core/errors.js";
import { inexactInteger } from "../core/exact-integers.js";
import { EnqueueBatchSchema } from "../core/schemas.js";
import type { JsonObject } from "../core/task.js";
import { CLI_VOCABULARY } from "./errors.js";

/** The most tasks one `enqueue --file` takes: the batch's own limit, so the file goes in one transaction. */
export const MOST_TASKS_PER_FILE = EnqueueBatchSchema.maxItems!;

/** How many bad lines a refusal names before it counts the rest. */
const LINES_NAMED = 10;

/**
 * The params of `enqueue --file`: one JSON object per line (JSON Lines; blank lines skipped), from a
 * file or `-` for stdin. Every line is checked before anything is enqueued, and a refusal names each
 * bad line by its number, so a file with one typo adds nothing and says where to look.
 */
export async function readParamsFile(path: string): Promise<ParamsFile> {
  const where = path === "-" ? "stdin" : path;
  let text: string;
  try {
    // An editor's byte order mark would make the first line bad JSON.
    text = (path === "-" ? await readStdin() : await readFile(path, "utf8")).replace(/^\uFEFF/, "");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why =
      code === "ENOENT"
        ? `no such file (looked for ${resolve(path)})`
        : code === "EISDIR"
          ? "a directory: give a file of JSON lines, one task's params on each, or - to read them from stdin"
          : (error as Error).message;
    throw new InvalidArgumentError(`--file ${path}: ${why}`);
  }
  const params: JsonObject[] = [];
  const lines: number[] = [];
  const bad: string[] = [];
  for (const [index, line] of text.split("\n").entries()) {
    if (line.trim() === "") continue;
    const problem = lineProblem(line);
    if (problem === null) {
      params.push(JSON.parse(line) as JsonObject);
      lines.push(index + 1);
    } else bad.push(`line ${index + 1}: ${problem}`);
  }
  if (bad.length > 0) {
    const more = bad.length > LINES_NAMED ? `; and ${bad.length - LINES_NAMED} more bad lines` : "";
    throw new InvalidArgumentError(`${where} has lines that are not a task's params (a JSON object on one line), so nothing was enqueued: ${bad.slice(0, LINES_NAMED).join("; ")}${more}`);
  }
  if (params.length === 0) throw new InvalidArgumentError(`${where} holds no tasks: give one params object per line, e.g. {"storeId":42}`);
  if (params.length > MOST_TASKS_PER_FILE) {
    throw new InvalidArgumentError(
      `${where} holds ${params.length} tasks, more than the ${MOST_TASKS_PER_FILE} one enqueue takes (all or nothing, in one transaction), so nothing was enqueued: ` +
        `split it, e.g. split -l ${MOST_TASKS_PER_FILE} ${path === "-" ? "tasks.jsonl" : path} part-, and enqueue each part`,
    );
  }
  return { source: where, params, lines };
}

/** A file's tasks, each with the line it came from. */
export interface ParamsFile {
  /** The file's path, or "stdin". */
  source: string;
  params: JsonObject[];
  lines: number[];
}

/**
 * A refusal of one task of the file, which the batch names by its index ("item 3: …"), named by its
 * line instead: the operator has the file, not the list made from it. A refusal of the options alone
 * (`fields`: the task type and the flags every task shares) names no line: each line would have been refused.
 * Either is worded as the CLI words refusals (CLI_VOCABULARY): the new error keeps only its text.
 */
export function namedByLine(error: ValidationError, file: ParamsFile, fields: readonly string[]): ValidationError {
  const message = error.messageIn(CLI_VOCABULARY);
  const item = /^item (\d+): /.exec(message);
  if (item === null) return error;
  const issues = error.issues.map((issue) => ({ ...issue, path: issue.path.slice(`${item[1]}.`.length) }));
  const rest = message.slice(item[0].length);
  if (issues.length > 0 && issues.every((issue) => fields.includes(issue.path))) return new ValidationError(rest, issues, error.unlisted);
  return new ValidationError(`${file.source} line ${file.lines[Number(item[1])]}: ${rest}; nothing was enqueued`, issues, error.unlisted);
}

/** Why a line is not one task's params, or null when it is. */
function lineProblem(line: string): string | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (error) {
    return `not valid JSON (${(error as Error).message})`;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return `expected a JSON object, got ${Array.isArray(value) ? "an array" : JSON.stringify(value)}`;
  return inexactInteger(line, value, "params");
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
