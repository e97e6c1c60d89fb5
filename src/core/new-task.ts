import type { ParamsValidators } from "./params-schema.js";
import { type BackoffPolicy, DEFAULT_BACKOFF, DEFAULT_MAX_ATTEMPTS, type EnqueueInput, type JsonObject } from "./task.js";
import type { TaskTypeRecord } from "./task-type.js";
import { assertJson, EnqueueInputSchema, validate } from "./validation.js";

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

/** The shape checks of producer input, which need no database; throws ValidationError naming the field. */
export function checkEnqueueInput(input: EnqueueInput): void {
  validate<EnqueueInput>(EnqueueInputSchema, input, "task");
  assertJson(input.params ?? {}, "params");
}

/** checkEnqueueInput for a batch, naming the index of the bad item. */
export function checkEnqueueInputs(inputs: EnqueueInput[]): void {
  inputs.forEach((input, index) => atItem(index, () => checkEnqueueInput(input)));
}

/**
 * Builds the row of a checked input. Each field comes from the producer if given, else from the
 * latest registered version of the task's type (`type`, absent when unregistered), else from the
 * built-in defaults. Params must satisfy that version's schema.
 */
export function prepareNewTask(
  input: EnqueueInput,
  now: Date,
  type: TaskTypeRecord | undefined,
  validators: ParamsValidators,
  parentId: number | null = null,
): NewTask {
  const params = input.params ?? {};
  if (type) validators.check(type, params);
  return {
    taskType: input.taskType,
    taskTypeVersion: type?.version ?? null,
    params,
    priority: input.priority ?? type?.priority ?? 0,
    scheduledFor: input.scheduledFor ?? now,
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
  validators: ParamsValidators,
  parentId: number | null = null,
): NewTask[] {
  return inputs.map((input, index) => atItem(index, () => prepareNewTask(input, now, types.get(input.taskType), validators, parentId)));
}

function atItem<T>(index: number, fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    if (error instanceof Error) error.message = `item ${index}: ${error.message}`;
    throw error;
  }
}
