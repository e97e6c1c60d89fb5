import type { ParamsValidators } from "./params-schema.js";
import { type BackoffPolicy, DEFAULT_BACKOFF, DEFAULT_MAX_ATTEMPTS, type EnqueueInput, type JsonObject } from "./task.js";
import type { TaskTypeRecord } from "./task-type.js";
import { ValidationError } from "./errors.js";

/** What a store applies to each new task besides the input's own checks. */
export interface NewTaskRules {
  validators: ParamsValidators;
  requireRegistered: boolean;
}

export function unregistered(taskType: string): ValidationError {
  return new ValidationError(
    (v) =>
      `Task type "${taskType}" is not registered, and this pool requires registered types (${v.setting("requireRegistered")}): register it first (${v.call("registerTaskType")} or \`taskpool types register\`) or check the name for a typo`,
    [{ path: "taskType", message: "not registered" }],
  );
}

/** A validated task row, with every default filled in, ready for a store to insert. */
export interface NewTask {
  taskType: string;
  /** The registered version whose defaults and schema applied; null for an unregistered type. */
  taskTypeVersion: number | null;
  params: JsonObject;
  priority: number;
  scheduledFor: Date;
  concurrencyKey: string | null;
  uniqueKey: string | null;
  maxAttempts: number;
  backoff: BackoffPolicy;
  timeoutSeconds: number | null;
  parentId: number | null;
}

/**
 * Builds the row of a checked input. Each field comes from the producer if given, else from the
 * latest registered version of the task's type (`type`, absent when unregistered), else from the
 * built-in defaults. Params must satisfy that version's schema. With `requireRegistered`, an
 * unregistered type is refused (producers that want typos caught instead of tasks waiting forever).
 */
export function prepareNewTask(
  input: EnqueueInput,
  now: Date,
  type: TaskTypeRecord | undefined,
  rules: NewTaskRules,
  parentId: number | null = null,
): NewTask {
  const params = input.params ?? {};
  if (type) rules.validators.check(type, params);
  else if (rules.requireRegistered) throw unregistered(input.taskType);
  return {
    taskType: input.taskType,
    taskTypeVersion: type?.version ?? null,
    params,
    priority: input.priority ?? type?.priority ?? 0,
    scheduledFor: input.scheduledFor ?? (input.delaySeconds === undefined ? now : new Date(now.getTime() + input.delaySeconds * 1000)),
    concurrencyKey: input.concurrencyKey ?? null,
    uniqueKey: input.uniqueKey ?? null,
    maxAttempts: input.maxAttempts ?? type?.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    backoff: { ...DEFAULT_BACKOFF, ...type?.backoff, ...input.backoff },
    timeoutSeconds: input.timeoutSeconds ?? type?.timeoutSeconds ?? null,
    parentId,
  };
}

/** prepareNewTask for a checked batch: everything is built before anything is written, naming a bad item's index. */
export function prepareNewTasks(
  inputs: EnqueueInput[],
  now: Date,
  types: ReadonlyMap<string, TaskTypeRecord>,
  rules: NewTaskRules,
  parentId: number | null = null,
): NewTask[] {
  // Tasks with a parent are the follow-ups of its completion.
  const list = parentId === null ? undefined : "followUps";
  return inputs.map((input, index) => atItem(index, () => prepareNewTask(input, now, types.get(input.taskType), rules, parentId), list));
}

/**
 * Runs a check of one item of a batch, prefixing its error with the item's index: in the message
 * ("item 1: …") and in each issue's path ("1.params.storeId", or "followUps.1.params.storeId" for an
 * item of the list `list` names), so that a program reading the issues can find the field.
 */
export function atItem<T>(index: number, fn: () => T, list?: string): T {
  try {
    return fn();
  } catch (error) {
    if (error instanceof ValidationError) {
      error.prefixMessage(`item ${index}: `);
      error.nestUnder(list === undefined ? `${index}` : `${list}.${index}`);
    } else if (error instanceof Error) error.message = `item ${index}: ${error.message}`;
    throw error;
  }
}
