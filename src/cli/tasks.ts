import { InvalidArgumentError, Option } from "commander";
import { isRefusal } from "../core/errors.js";
import type { TaskEvent } from "../core/event.js";
import { LIST_ORDERS } from "../core/schemas.js";
import { TASK_STATUSES, type Task, type TaskStatus } from "../core/task.js";
import { type TaskpoolCommand, withPool } from "./database.js";
import { CliError, explainServerTimeout } from "./errors.js";
import { integerFrom, taskId } from "./parse.js";
import { type Cell, type Column, cell, emit, formatFields, formatTable, jsonOption } from "./table.js";
import { counted } from "../core/counted.js";

/** Progress is stored as a fraction of 1. */
const percent = (progress: number | null) => (progress === null ? null : `${Math.round(progress * 100)}%`);

const TASK_COLUMNS: Column<Task>[] = [
  { header: "id", value: (t) => t.id },
  { header: "type", value: (t) => t.taskType },
  { header: "status", value: (t) => t.status },
  { header: "priority", value: (t) => t.priority },
  { header: "attempts", value: (t) => `${t.attempts}/${t.maxAttempts}` },
  { header: "worker", value: (t) => t.workerId },
  { header: "progress", value: (t) => percent(t.progress) },
  { header: "created", value: (t) => t.createdAt },
  { header: "updated", value: (t) => t.updatedAt },
];

/** An event that records a failed attempt, retried or not. */
const isFailure = (e: TaskEvent) => e.event === "retry_scheduled" || e.event === "failed";

/** The stack a worker sent with a failure (data.stack of its event), or null. */
function stackOf(e: TaskEvent): string | null {
  const data = e.data as { stack?: unknown } | null;
  return isFailure(e) && typeof data?.stack === "string" ? data.stack : null;
}

/** A timeline row: an event, or a run of consecutive checkpoints as one (its count, and the last one's time and data). */
type EventRow = TaskEvent & { count: number };

/** Consecutive checkpoints folded into one row, as the dashboard does: a crawl saves one per page, 60 rows of them buried the rest. */
function folded(events: TaskEvent[]): EventRow[] {
  const rows: EventRow[] = [];
  for (const e of events) {
    const last = rows.at(-1);
    if (e.event === "checkpoint" && last?.event === "checkpoint") rows[rows.length - 1] = { ...e, count: last.count + 1 };
    else rows.push({ ...e, count: 1 });
  }
  return rows;
}

const EVENT_COLUMNS: Column<EventRow>[] = [
  { header: "time", value: (e) => e.createdAt },
  { header: "event", value: (e) => (e.count > 1 ? `${e.event} ×${e.count}` : e.event) },
  { header: "from", value: (e) => e.fromWorkerId },
  { header: "to", value: (e) => e.toWorkerId },
  { header: "message", value: (e) => e.message },
  // A stack is many lines: it is printed below the table, not in a cell.
  { header: "data", value: (e) => (stackOf(e) === null ? e.data : { ...(e.data as object), stack: "(below)" }) },
];

/** --status may be repeated or comma-separated: `--status failed,cancelled --status pending`. */
function statuses(value: string, previous: TaskStatus[] = []): TaskStatus[] {
  const next = value.split(",").map((s) => s.trim());
  for (const s of next) {
    if (!(TASK_STATUSES as readonly string[]).includes(s)) throw new InvalidArgumentError(`"${s}" is not a task status; use one of ${TASK_STATUSES.join(", ")}`);
  }
  return [...new Set([...previous, ...(next as TaskStatus[])])];
}

/** Every id checked before the first is acted on, so a typo changes nothing. */
function parseIds(values: string[]): number[] {
  try {
    return values.map(taskId);
  } catch (error) {
    throw new CliError((error as Error).message);
  }
}

function showTask(task: Task, events: TaskEvent[]): string[] {
  const at = (label: string, date: Date | null): [string, Date | null][] => (date === null ? [] : [[label, date]]);
  const fields: [string, Cell][] = [
    ["type", task.taskTypeVersion === null ? task.taskType : `${task.taskType} v${task.taskTypeVersion}`],
    ["status", task.status],
    ["params", task.params],
    ["priority", task.priority],
    ["attempts", `${task.attempts} of ${task.maxAttempts}`],
    ["worker", task.workerId],
    ["concurrency key", task.concurrencyKey],
    ["unique key", task.uniqueKey],
    ["parent", task.parentId],
    ["scheduled for", task.scheduledFor],
    ["created", task.createdAt],
    ...at("claimed", task.claimedAt),
    ...at("started", task.startedAt),
    ...at("lease expires", task.leaseExpiresAt),
    ...at("last heartbeat", task.lastHeartbeatAt),
    ...at("finished", task.completedAt),
    ["progress", percent(task.progress)],
    ["checkpoint", task.checkpoint],
    ["result", task.result],
    ["error", task.errorMessage],
  ];
  const lastFailure = events.findLast(isFailure);
  const stack = lastFailure ? stackOf(lastFailure) : null;
  return [
    `Task ${task.id}`,
    ...formatFields(fields).map((l) => `  ${l}`),
    "",
    `Events (${events.length}, oldest first; runs of checkpoints as one row, with the last one's time and data):`,
    ...formatTable(EVENT_COLUMNS, folded(events)).map((l) => `  ${l}`),
    ...(stack === null ? [] : ["", `Stack of the last failure (${lastFailure!.createdAt.toISOString()}):`, ...stack.split("\n").map((l) => `  ${cell(l)}`)]),
  ];
}

type Outcome = { id: number; task: Task } | { id: number; error: { code: string; message: string } };

/**
 * Acts on each id in turn and reports each; the command fails afterwards, naming every id that was
 * refused and why, so a script sees the failure and an operator sees what did happen.
 */
async function actOnEach(ids: number[], action: "retry" | "cancel", json: boolean | undefined, act: (id: number) => Promise<Task>): Promise<void> {
  const done = action === "retry" ? "retried" : "cancelled";
  const outcomes: Outcome[] = [];
  const report = () =>
    emit(json, outcomes, () =>
      formatTable<Outcome>(
        [
          { header: "id", value: (o) => o.id },
          { header: "type", value: (o) => ("task" in o ? o.task.taskType : null) },
          { header: "status", value: (o) => ("task" in o ? o.task.status : null) },
          { header: "outcome", value: (o) => ("task" in o ? done : `not ${done}: ${o.error.message}`) },
        ],
        outcomes,
      ),
    );
  for (const id of ids) {
    try {
      outcomes.push({ id, task: await act(id) });
    } catch (error) {
      // Only refusals are reported per id; anything else (the server out of reach, or silent) stops the
      // command after showing what was done: each further id would wait for it as long again.
      if (!isRefusal(error)) {
        if (outcomes.length > 0) report();
        throw explainServerTimeout(error, { what: `task ${id} was ${done}`, check: `taskpool tasks show ${id}` });
      }
      outcomes.push({ id, error: { code: error.code, message: error.message } });
    }
  }
  report();
  const refused = outcomes.flatMap((o) => ("error" in o ? [`${o.id} (${o.error.message})`] : []));
  if (refused.length > 0) throw new CliError(`${refused.length} of ${counted(ids.length, "task")} not ${done}: ${refused.join("; ")}`);
}

export function tasksCommand(program: TaskpoolCommand): void {
  const tasks = program.command("tasks").description("inspect tasks and act on them: list, show, retry, cancel");
  tasks
    .command("list")
    .description("tasks matching the filters, newest first, a page at a time")
    .option("--status <status>", `only these statuses, repeatable or comma-separated: ${TASK_STATUSES.join(", ")}`, statuses)
    .option("--type <taskType>", "only this task type")
    .option("--worker <workerId>", "only tasks held (or last held) by this worker")
    .option("--search <text>", "only tasks whose params' keys or values contain this text (case-insensitive; not across a key and its value)")
    .option("--limit <n>", "at most this many (1-1000, default 100)", integerFrom(1, 1000))
    .option("--cursor <cursor>", "the next page: the cursor the previous page printed")
    .addOption(new Option("--order <order>", "newest or oldest first").choices(LIST_ORDERS))
    .addOption(jsonOption())
    .poolOptions()
    .addHelpText("after", "\nExample:\n  $ taskpool tasks list --status failed,cancelled --type product_resync --limit 20\n  $ taskpool tasks list --worker resync-1 --json")
    .action((opts) =>
      withPool(opts, async (pool) => {
        const page = await pool.list({ status: opts.status, taskType: opts.type, workerId: opts.worker, search: opts.search }, { limit: opts.limit, cursor: opts.cursor, order: opts.order });
        emit(opts.json, page, () => {
          if (page.tasks.length === 0) return ["No tasks match"];
          // The cursor is a position in this listing: followed with another --order or other filters, it reads another.
          const more = page.nextCursor === null ? [] : [`More: run the same command (its filters and --order too) with --cursor ${page.nextCursor}`];
          return [...formatTable(TASK_COLUMNS, page.tasks), ...more];
        });
      }),
    );
  tasks
    .command("show <id>")
    .description("one task: params, checkpoint, progress, result or error, and its event timeline")
    .addOption(jsonOption())
    .poolOptions()
    .addHelpText("after", "\nExample:\n  $ taskpool tasks show 42\n  $ taskpool tasks show 42 --json | jq .task.checkpoint")
    .action((value: string, opts) => {
      const [id] = parseIds([value]);
      return withPool(opts, async (pool) => {
        const task = await pool.get(id);
        if (task === null) throw new CliError(`task ${id} does not exist; \`taskpool tasks list\` shows the ids`);
        const events = await pool.events(id);
        emit(opts.json, { task, events }, () => showTask(task, events));
      });
    });
  tasks
    .command("retry <ids...>")
    .description("put failed (dead-letter) tasks back in the pool with a fresh attempt budget; they resume from their checkpoint")
    .option("--reset-checkpoint", "start them afresh: clear their checkpoint and progress (when the checkpoint is what makes them fail)")
    .addOption(jsonOption())
    .poolOptions()
    .addHelpText("after", "\nExample:\n  $ taskpool tasks retry 17 18 21\n  $ taskpool tasks list --status failed --json | jq -r '.tasks[].id' | xargs -r taskpool tasks retry")
    .action((values: string[], opts) => {
      const ids = parseIds(values);
      const options = opts.resetCheckpoint === true ? { resetCheckpoint: true } : {};
      return withPool(opts, (pool) => actOnEach(ids, "retry", opts.json, (id) => pool.retry(id, options)));
    });
  tasks
    .command("cancel <ids...>")
    .description("cancel pending, claimed or running tasks (a worker running one stops it: at once on PostgreSQL or through the worker's own server, --url; else, SQLite from another process, at its next heartbeat, 30 s by default)")
    .option("--reason <text>", "why, kept in the task's event timeline")
    .addOption(jsonOption())
    .poolOptions()
    .addHelpText("after", '\nExample:\n  $ taskpool tasks cancel 17 18 --reason "store closed"')
    .action((values: string[], opts) => {
      const ids = parseIds(values);
      return withPool(opts, (pool) => actOnEach(ids, "cancel", opts.json, (id) => pool.cancel(id, { reason: opts.reason })));
    });
}
