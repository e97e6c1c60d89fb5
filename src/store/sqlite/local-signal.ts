import { randomUUID } from "node:crypto";
import { resolve } from "node:path";

type Listener = (taskTypes: string[]) => void;

/**
 * SQLite has no NOTIFY. Within this process every SqliteStore on the same file shares one channel
 * (e.g. `taskpool dev`'s server and workers), which carries task types at once. Other processes on
 * the file are heard through commit-watcher.ts, a little later (~1 ms) and without types.
 */
const channels = new Map<string, Set<Listener>>();

/** The channel of a database: its absolute path, or a private one for an in-memory database. */
export function channelOf(path: string): string {
  return path === ":memory:" || path === "" ? `memory:${randomUUID()}` : resolve(path);
}

export function subscribeLocal(channel: string, listener: Listener): () => void {
  let set = channels.get(channel);
  if (!set) channels.set(channel, (set = new Set()));
  set.add(listener);
  return () => {
    set.delete(listener);
    if (set.size === 0) channels.delete(channel);
  };
}

export function notifyLocal(channel: string, taskTypes: string[]): void {
  const set = channels.get(channel);
  if (!set) return;
  // Deferred so listeners run after the notifying transaction has returned (and committed).
  queueMicrotask(() => {
    for (const l of set) l(taskTypes);
  });
}
