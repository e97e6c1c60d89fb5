import { appendFileSync } from "node:fs";
import { TaskpoolError } from "../../src/core/errors.js";
import type { ClaimedTask, Json, Lease } from "../../src/core/task.js";
import type { BatchOutcome, Store } from "../../src/store/store.js";
import { withOverrides } from "../helpers/stores.js";
import type { HistoryEntry, WriteOp } from "./history.js";

/** Appends one line per call, synchronously, so a SIGKILL loses at most the line being written. */
export function historyFile(path: string): (entry: HistoryEntry) => void {
  return (entry) => appendFileSync(path, `${JSON.stringify(entry)}\n`);
}

/**
 * The real store a worker runs on, with every lease granted and every fenced write (and its answer)
 * appended to the worker's history. It changes nothing: calls go through and answers come back as
 * they were, so the worker under test is the real runtime.
 */
export function recordingStore(store: Store, worker: string, record: (entry: HistoryEntry) => void): Store {
  const write = async <T>(op: WriteOp, taskId: number, lease: Lease, call: () => Promise<T>, data?: Json): Promise<T> => {
    const sentAt = Date.now();
    const base = { kind: "write" as const, worker, taskId, token: lease.leaseToken, op, sentAt, ...(data === undefined ? {} : { data }) };
    try {
      const answer = await call();
      record({ ...base, ok: true, at: Date.now() });
      return answer;
    } catch (error) {
      record({ ...base, ...refusal(error), at: Date.now() });
      throw error;
    }
  };
  const batch = async (op: WriteOp, items: { id: number; lease: Lease }[], call: () => Promise<BatchOutcome[]>): Promise<BatchOutcome[]> => {
    const sentAt = Date.now();
    try {
      const outcomes = await call();
      for (const [i, o] of outcomes.entries()) {
        const item = items[i];
        record({ kind: "write", worker, taskId: item.id, token: item.lease.leaseToken, op, sentAt, at: Date.now(), ...(o.ok ? { ok: true } : refusal(o.error)) });
      }
      return outcomes;
    } catch (error) {
      for (const item of items) record({ kind: "write", worker, taskId: item.id, token: item.lease.leaseToken, op, sentAt, at: Date.now(), ...refusal(error) });
      throw error;
    }
  };
  const granted = (tasks: ClaimedTask[]) => {
    for (const t of tasks) record({ kind: "claimed", worker, taskId: t.id, token: t.leaseToken, attempt: t.attempts, at: Date.now() });
    return tasks;
  };
  const overrides: Partial<Store> = {
    claim: (options) => store.claim(options).then(granted),
    claimById: (id, options) => store.claimById(id, options).then((t) => granted([t])[0]),
    start: (id, lease) => write("start", id, lease, () => store.start(id, lease)),
    checkpoint: (id, lease, data) => write("checkpoint", id, lease, () => store.checkpoint(id, lease, data), data),
    progress: (id, lease, value) => write("progress", id, lease, () => store.progress(id, lease, value)),
    complete: (id, lease, options) => write("complete", id, lease, () => store.complete(id, lease, options)),
    fail: (id, lease, options) => write("fail", id, lease, () => store.fail(id, lease, options)),
    release: (id, lease, options) => write("release", id, lease, () => store.release(id, lease, options)),
    completeMany: (items) => batch("complete", items, () => store.completeMany(items)),
    failMany: (items) => batch("fail", items, () => store.failMany(items)),
  };
  return withOverrides(store, overrides);
}

/** A refused write says why; a write with no answer (connection lost) has an unknown outcome. */
function refusal(error: unknown): { ok: false; code: string } | { ok: null; code: string } {
  if (error instanceof TaskpoolError) return { ok: false, code: error.code };
  return { ok: null, code: (error as Error).message };
}
