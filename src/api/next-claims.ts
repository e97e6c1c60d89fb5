import type { ClaimedTask, ClaimOptions } from "../core/task.js";
import type { BatchOutcome } from "../store/store.js";
import type { CheckedStore } from "./checked-store.js";

/** A call's answer or its error. */
export type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** An outcome to write and, with claim_next, the claim to make for its worker. */
export interface Chained<T> {
  write: T;
  next: ClaimOptions | undefined;
}

/** What a written outcome answers: the outcome, and the next claim's tasks (or its error) when one was asked for. */
export type Written = BatchOutcome & { ok: true; next?: Settled<ClaimedTask[]> };
export type Refused = BatchOutcome & { ok: false };

export type NextClaimStore = Pick<CheckedStore, "claimEach" | "release">;

/**
 * A batch of outcomes (completions or failures) written with the next claims of their workers
 * (HTTP's `claim_next`), for WriteBatcher.
 *
 * The claims run beside the write, not after it: the write waits for a durable commit (the WAL
 * flush) and a claim does not, so a chained request waits for the longer of the two rather than for
 * their sum (bench:http, 3 alternated pairs: 3,119–3,337 → 3,734–3,828 chained cycles/s;
 * docs/benchmarks.md). Beside the write, a claim does not see what the write frees: the worker's
 * finished task still holds its concurrency key and counts against its type's max_running cap. So a
 * claim that comes back short of its limit claims again for the rest once the outcomes are written,
 * and sees those slots free, as a claim made after the write would. A claim whose outcome was refused
 * (a stale lease, say) releases what it took: its caller gets the refusal, not the tasks. A claim
 * that fails does not undo its outcome.
 */
export function writeWithNextClaims<T extends { id: number }>(
  write: (items: T[]) => Promise<BatchOutcome[]>,
  claims: NextClaimStore | null,
): (entries: Chained<T>[]) => Promise<(Written | Refused)[]> {
  return async (entries) => {
    const asking = entries.flatMap((e, i) => (e.next !== undefined ? [i] : []));
    const items = entries.map((e) => e.write);
    if (asking.length === 0 || claims === null) return (await write(items)) as (Written | Refused)[];
    const wanted = asking.map((i) => entries[i].next as ClaimOptions);
    const claiming = claimAll(claims, wanted);
    let outcomes: BatchOutcome[];
    try {
      outcomes = await write(items);
    } catch (error) {
      // Nothing was written (or nothing is known to be): no caller gets its next tasks.
      await release(claims, (await claiming).flatMap(tasksOf), "the outcome before it could not be written");
      throw error;
    }
    const next = await claiming;
    const refused = asking.flatMap((i, n) => (outcomes[i].ok ? [] : tasksOf(next[n])));
    const short = asking.flatMap((i, n) => {
      const got = next[n];
      const limit = wanted[n].limit ?? 1;
      return outcomes[i].ok && got.ok && got.value.length < limit ? [n] : [];
    });
    const [, again] = await Promise.all([
      release(claims, refused, "its worker's outcome was refused"),
      claimAll(
        claims,
        short.map((n) => ({ ...wanted[n], limit: (wanted[n].limit ?? 1) - tasksOf(next[n]).length })),
      ),
    ]);
    short.forEach((n, k) => {
      const more = again[k];
      if (more.ok) next[n] = { ok: true, value: [...tasksOf(next[n]), ...more.value] };
    });
    const answers = outcomes as (Written | Refused)[];
    asking.forEach((i, n) => {
      if (outcomes[i].ok) answers[i] = { ...(outcomes[i] as Written), next: next[n] };
    });
    return answers;
  };
}

function tasksOf(settled: Settled<ClaimedTask[]>): ClaimedTask[] {
  return settled.ok ? settled.value : [];
}

/** claimEach, each claim answered alone; an error of the whole call (the database unreachable) answers every claim. */
async function claimAll(claims: NextClaimStore, wanted: ClaimOptions[]): Promise<Settled<ClaimedTask[]>[]> {
  if (wanted.length === 0) return [];
  return claims.claimEach(wanted).catch((error: unknown) => wanted.map(() => ({ ok: false as const, error })));
}

/** Gives tasks back at once; one that cannot be released now goes back when its lease runs out. */
async function release(claims: NextClaimStore, tasks: ClaimedTask[], why: string): Promise<void> {
  await Promise.allSettled(tasks.map((t) => claims.release(t.id, t, { reason: `claim_next released: ${why}` })));
}
