import { expect } from "vitest";
import type { Store } from "../../src/store/store.js";

/** Reads the audit trail of every task: each must have been claimed exactly once and completed once. */
export async function claimedOnceEach(store: Store, expected: number): Promise<void> {
  const ids: number[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.list({}, { limit: 1000, cursor });
    ids.push(...page.tasks.map((t) => t.id));
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  expect(ids).toHaveLength(expected);
  const badly = [];
  for (const id of ids) {
    const events = (await store.events(id)).map((e) => e.event);
    const claims = events.filter((e) => e === "claimed").length;
    const completions = events.filter((e) => e === "completed").length;
    if (claims !== 1 || completions !== 1) badly.push({ id, events });
  }
  expect(badly).toEqual([]);
}
