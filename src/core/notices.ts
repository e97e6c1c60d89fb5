/**
 * What a wake-up notification may carry besides task types: "task N was cancelled", so the worker
 * running it stops at once rather than at its next heartbeat (up to 30 s). A task type cannot start
 * with "!", so no listener takes a notice for a type: one that only looks for its roles ignores it.
 */
export const CANCEL_NOTICE_PREFIX = "!cancelled:";

export const cancelNotice = (taskId: number): string => `${CANCEL_NOTICE_PREFIX}${taskId}`;

/** The ids of the tasks a notification says were cancelled. */
export function cancelledTasks(entries: readonly string[]): number[] {
  const ids: number[] = [];
  for (const entry of entries) if (entry.startsWith(CANCEL_NOTICE_PREFIX)) ids.push(Number(entry.slice(CANCEL_NOTICE_PREFIX.length)));
  return ids.filter(Number.isSafeInteger);
}
