import { hostname } from "node:os";
import type { WorkerRecord } from "./worker.js";

/** Whether a process with this pid runs on this machine (one of another user, which we may not signal, counts as running). */
export function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Whether a worker's record is another live process's: active or stale, and its process running on
 * this host, or heard within two beats (`beatMs`) from another. Two live processes with one worker id
 * give back each other's tasks when either stops.
 */
export function ofAnotherLiveProcess(w: Pick<WorkerRecord, "status" | "pid" | "hostname" | "secondsSinceHeartbeat">, beatMs: number): boolean {
  if (w.pid === null || (w.status !== "active" && w.status !== "stale")) return false;
  if (w.hostname === hostname()) return w.pid !== process.pid && processRuns(w.pid);
  return w.secondsSinceHeartbeat * 1000 < 2 * beatMs;
}
