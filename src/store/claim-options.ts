import { type ClaimOptions, DEFAULT_LEASE_SECONDS, type SortBy, type SortOrder } from "../core/task.js";

/** Checked claim options with every default applied. */
export interface ResolvedClaim {
  workerId: string;
  taskTypes: string[] | null;
  maxAttemptsRemaining: number | null;
  sortBy: SortBy;
  sortOrder: SortOrder;
  limit: number;
  leaseSeconds: number;
  start: boolean;
}

export function resolveClaim(options: ClaimOptions): ResolvedClaim {
  const sortBy = options.sortBy ?? "priority";
  return {
    workerId: options.workerId,
    taskTypes: options.taskTypes ?? null,
    maxAttemptsRemaining: options.maxAttemptsRemaining ?? null,
    sortBy,
    sortOrder: options.sortOrder ?? (sortBy === "created_at" ? "asc" : "desc"),
    limit: options.limit ?? 1,
    leaseSeconds: options.leaseSeconds ?? DEFAULT_LEASE_SECONDS,
    start: options.start ?? false,
  };
}

/** Claims that can share one statement: the same filters, order, lease and start, for several workers. */
export interface ClaimGroup {
  /** The shared options (workerId and limit are each worker's). */
  shape: ResolvedClaim;
  /** Distinct worker ids, each with its total limit and the input positions of its claims, in input order. */
  workers: { workerId: string; limit: number; members: number[] }[];
}

/** Groups claims by everything but worker and limit, keeping input order; one worker's claims merge into one entry. */
export function groupClaims(claims: ResolvedClaim[]): ClaimGroup[] {
  const groups = new Map<string, ClaimGroup>();
  claims.forEach((c, index) => {
    const key = JSON.stringify([c.taskTypes === null ? null : [...new Set(c.taskTypes)].sort(), c.maxAttemptsRemaining, c.sortBy, c.sortOrder, c.leaseSeconds, c.start]);
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { shape: c, workers: [] }));
    const worker = group.workers.find((w) => w.workerId === c.workerId);
    if (worker) {
      worker.limit += c.limit;
      worker.members.push(index);
    } else group.workers.push({ workerId: c.workerId, limit: c.limit, members: [index] });
  });
  return [...groups.values()];
}

/** Hands one worker's claimed tasks (in claim order) to its claims in input order, each up to its limit. */
export function shareOut<T>(tasks: T[], members: number[], claims: ResolvedClaim[], answers: T[][]): void {
  let next = 0;
  for (const index of members) {
    answers[index] = tasks.slice(next, next + claims[index].limit);
    next += claims[index].limit;
  }
}

/**
 * How many times one claim cut short by concurrency keys may run, in all: once more for each key with
 * several tasks at the head of the queue (each store's claim says how). A claim still short after
 * them returns what it has.
 */
export const KEY_ROUNDS = 4;

/**
 * How many waiting tasks come due (scheduled for later, and due now) one claim reads, oldest due first,
 * beside the claim index's ready tasks: it takes the best of both in the claim's order and moves the
 * rest into the claim index. Past this many come due at once, the rest wait for the next claims, so
 * among them the claim order holds only by due time. Moving a task costs a row version: with 100,000
 * come due at once, a claim on PostgreSQL took 4–5 ms moving 100 of them, 10 ms moving 250, 25 ms
 * moving 1,000.
 */
export const WAITING_DUE_PER_CLAIM = 100;

/**
 * How long claims of one shape do not run again past concurrency keys after running again found
 * nothing. Behind long queues of a few keys, each key that frees cuts short the claim that takes its
 * next task, and running again walks past every held key's queue to find nothing: measured on
 * PostgreSQL, it took a drain of 10 keys × 1,000 tasks of 1 ms from 465–483 to 324–353 tasks/s.
 */
export const FRUITLESS_ROUND_MS = 1000;

/** A claim's shape, as ClaimMemory keys it: its task types (in any order) and its order. */
export function claimShape(c: Pick<ResolvedClaim, "taskTypes" | "sortBy" | "sortOrder">): string {
  return JSON.stringify([c.taskTypes === null ? null : [...c.taskTypes].sort(), c.sortBy, c.sortOrder]);
}

/**
 * Claims a store remembers for a while, each by its shape (claimShape, or one of its own): those that
 * met a capped type, those whose running again found nothing. At most MAX, since the task types in a
 * shape are the caller's.
 */
export class ClaimMemory {
  private static readonly MAX = 1000;
  private readonly until = new Map<string, number>();

  constructor(private readonly forMs: number) {}

  holds(shape: string): boolean {
    return (this.until.get(shape) ?? 0) > performance.now();
  }

  remember(shape: string): void {
    if (this.until.size >= ClaimMemory.MAX) this.until.clear();
    this.until.set(shape, performance.now() + this.forMs);
  }
}
