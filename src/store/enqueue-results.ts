import type { NewTask } from "../core/new-task.js";
import type { Task } from "../core/task.js";
import type { EnqueueResult } from "./store.js";

/**
 * Lines up what an insert returned with what was asked for. The insert skips items whose unique key
 * a pending task holds (in the table or earlier in the same batch) and returns the rest in input
 * order; those skipped items resolve to the task holding their key. Returns null for an item whose
 * holder is gone (claimed in the meantime): the caller enqueues that item again.
 */
export function matchEnqueueResults(
  prepared: NewTask[],
  inserted: Task[],
  holders: Map<string, Task>,
): (EnqueueResult | null)[] {
  const insertedKeys = new Set(inserted.map((t) => t.uniqueKey).filter((k) => k !== null));
  const seen = new Set<string>();
  let next = 0;
  return prepared.map((item) => {
    const key = item.uniqueKey;
    if (key === null || (!seen.has(key) && insertedKeys.has(key))) {
      if (key !== null) seen.add(key);
      const task = inserted[next++];
      if (key !== null) holders.set(key, task);
      return { task, created: true };
    }
    const holder = holders.get(key);
    return holder ? { task: holder, created: false } : null;
  });
}

/** Unique keys the insert skipped and whose holders must be looked up. */
export function skippedKeys(prepared: NewTask[], inserted: Task[]): string[] {
  const insertedKeys = new Set(inserted.map((t) => t.uniqueKey));
  return [...new Set(prepared.map((p) => p.uniqueKey).filter((k): k is string => k !== null && !insertedKeys.has(k)))];
}
