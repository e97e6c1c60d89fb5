/**
 * Idempotency keys, the rule both stores keep (their SQL is in each dialect's queries): a keyed
 * enqueue call writes its tasks and a record of the key (its request's fingerprint and the tasks'
 * ids, in input order) in one transaction. A call that finds the key recorded writes nothing: with
 * the same fingerprint it answers the recorded tasks as they are now (created: false, replayed:
 * true); with another it is refused. Records live IDEMPOTENCY_KEY_SECONDS at least; the retention
 * pass deletes them after that.
 */
import { createHash } from "node:crypto";
import { IdempotencyKeyReusedError, TaskNotFoundError } from "../core/errors.js";
import type { EnqueueInput, Task } from "../core/task.js";
import type { EnqueueResult } from "./store.js";

/** What a store remembers of a keyed call. */
export interface IdempotencyRecord {
  fingerprint: string;
  taskIds: number[];
}

/** JSON with object keys sorted, so params written in another order are the same request. */
function canonical(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined);
    return Object.fromEntries(entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => [k, canonical(v)]));
  }
  return value;
}

/**
 * The request a key names: the call's kind (a single enqueue answers one task, a batch a list) and its
 * inputs as the producer sent them, before any default is filled in (a type registered since must not
 * make a retry a different request).
 */
export function requestFingerprint(kind: "one" | "many", inputs: EnqueueInput[]): string {
  return createHash("sha256").update(JSON.stringify([kind, canonical(inputs)])).digest("hex");
}

/**
 * The answer to a call whose key was recorded: the recorded tasks in input order, none created.
 * Refused when the request differs; a task that retention deleted since (a completed one kept less
 * than the key's lifetime) cannot be answered and is named.
 */
export function replayResults(key: string, fingerprint: string, record: IdempotencyRecord, tasks: Task[]): EnqueueResult[] {
  if (record.fingerprint !== fingerprint) throw new IdempotencyKeyReusedError(key);
  const byId = new Map(tasks.map((t) => [t.id, t]));
  return record.taskIds.map((id) => {
    const task = byId.get(id);
    if (!task) {
      const error = new TaskNotFoundError(id);
      error.message = `Task ${id}, created by the first call with idempotency key "${key}", was deleted by retention since; look for its outcome elsewhere or enqueue with a new key`;
      throw error;
    }
    return { task, created: false, replayed: true };
  });
}
