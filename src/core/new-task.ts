import {
  type BackoffPolicy,
  DEFAULT_BACKOFF,
  DEFAULT_MAX_ATTEMPTS,
  type EnqueueInput,
  type JsonObject,
} from "./task.js";
import { assertJson, EnqueueInputSchema, validate } from "./validation.js";

/** A validated task row, with every default filled in, ready for a store to insert. */
export interface NewTask {
  taskType: string;
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

/** Validates producer input and applies defaults; throws ValidationError and builds nothing on bad input. */
export function prepareNewTask(input: EnqueueInput, now: Date, parentId: number | null = null): NewTask {
  validate<EnqueueInput>(EnqueueInputSchema, input, "task");
  const params = input.params ?? {};
  assertJson(params, "params");
  const backoff = { ...DEFAULT_BACKOFF, ...input.backoff };
  return {
    taskType: input.taskType,
    params,
    priority: input.priority ?? 0,
    scheduledFor: input.scheduledFor ?? now,
    concurrencyKey: input.concurrencyKey ?? null,
    uniqueKey: input.uniqueKey ?? null,
    maxAttempts: input.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    backoff,
    timeoutSeconds: input.timeoutSeconds ?? null,
    parentId,
  };
}

/** Validates a whole batch before any of it is written, naming the index of the bad item. */
export function prepareNewTasks(inputs: EnqueueInput[], now: Date, parentId: number | null = null): NewTask[] {
  return inputs.map((input, index) => {
    try {
      return prepareNewTask(input, now, parentId);
    } catch (error) {
      if (error instanceof Error) error.message = `item ${index}: ${error.message}`;
      throw error;
    }
  });
}
