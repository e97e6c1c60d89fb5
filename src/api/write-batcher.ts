import { isRefusal } from "../core/errors.js";
import type { Completion, EnqueueCallOptions, Failure } from "../core/schemas.js";
import type { ClaimedTask, ClaimOptions, EnqueueInput } from "../core/task.js";
import type { WorkerBeat, WorkerBeatResult } from "../core/worker.js";
import type { BatchOptions, EnqueueCall, EnqueueResult, Store } from "../store/store.js";
import type { CheckedStore, Outcome } from "./checked-store.js";
import { type Chained, type NextClaimStore, type Refused, type Settled, type Written, writeWithNextClaims } from "./next-claims.js";

interface Waiting<I, O> {
  item: I;
  resolve(outcome: O): void;
  reject(error: unknown): void;
}

/**
 * Group commit for one kind of write. Calls made while a flush is in flight wait for the next flush,
 * which writes them all in one statement and one commit. At low load a call flushes at once (after
 * the current tick, so calls made together go together) and adds no delay; under load a batch holds
 * whatever arrived during the previous round trip, so the number of commits stops growing with the
 * number of tasks.
 */
class Batcher<I, O> {
  private queue: Waiting<I, O>[] = [];
  private flushing = false;

  constructor(
    private readonly write: (items: I[]) => Promise<O[]>,
    private readonly maxBatch: number,
    /** Items sharing a key never share a batch (null: any items may). */
    private readonly keysOf: ((item: I) => readonly unknown[]) | null = null,
  ) {}

  add(item: I): Promise<O> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.flushing) {
        this.flushing = true;
        queueMicrotask(() => void this.flush());
      }
    });
  }

  /**
   * Up to maxBatch waiting calls, each key at most once: a second write for the same task (a client
   * retrying, say) goes in the next batch, so it meets the first one's result as a single call would.
   */
  private nextBatch(): Waiting<I, O>[] {
    const batch: Waiting<I, O>[] = [];
    const keys = new Set<unknown>();
    const later: Waiting<I, O>[] = [];
    for (const waiting of this.queue) {
      const itemKeys = this.keysOf?.(waiting.item) ?? [];
      if (batch.length < this.maxBatch && !itemKeys.some((key) => keys.has(key))) {
        for (const key of itemKeys) keys.add(key);
        batch.push(waiting);
      } else later.push(waiting);
    }
    this.queue = later;
    return batch;
  }

  private async flush(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.nextBatch();
      try {
        const outcomes = await this.write(batch.map((w) => w.item));
        batch.forEach((w, i) => w.resolve(outcomes[i]));
      } catch (error) {
        // The batch did not commit (the database is unreachable, say): every caller learns it and may retry.
        for (const w of batch) w.reject(error);
      }
    }
    this.flushing = false;
  }
}

const byId = ({ write }: Chained<{ id: number }>) => [write.id];

/**
 * The outcomes of running tasks, batched: completions and failures from concurrent handlers (or
 * concurrent HTTP requests) share one statement each per round trip. Each item is still fenced by
 * its own lease: a refused item refuses only itself, and its caller gets the error.
 *
 * An outcome may carry its worker's next claim (HTTP's `claim_next`): the batch's claims share one
 * `claimEach` in the same flush (see writeWithNextClaims), so a request that completes a task and
 * claims the next waits for one batch, not for a batch of completions and then for one of claims.
 */
export class WriteBatcher {
  private readonly completions: Batcher<Chained<Completion>, Written | Refused>;
  private readonly failures: Batcher<Chained<Failure>, Written | Refused>;

  /**
   * `options.returnTasks`: each outcome carries the whole task (a server answering single calls needs
   * it; a worker does not). `claims`: where next claims go (required to pass one).
   */
  constructor(
    store: Pick<Store, "completeMany" | "failMany">,
    options: BatchOptions = {},
    private readonly claims: NextClaimStore | null = null,
    maxBatch = 1000,
  ) {
    this.completions = new Batcher(writeWithNextClaims<Completion>((items) => store.completeMany(items, options), claims), maxBatch, byId);
    this.failures = new Batcher(writeWithNextClaims<Failure>((items) => store.failMany(items, options), claims), maxBatch, byId);
  }

  /** Resolves with the task's outcome once its batch committed; throws the refusal of a refused item. */
  async complete(item: Completion, next?: ClaimOptions): Promise<Written> {
    return settled(await this.completions.add(this.chain(item, next)));
  }

  async fail(item: Failure, next?: ClaimOptions): Promise<Written> {
    return settled(await this.failures.add(this.chain(item, next)));
  }

  private chain<T>(write: T, next: ClaimOptions | undefined): Chained<T> {
    if (next !== undefined && this.claims === null) throw new Error("WriteBatcher: a next claim needs the store to claim from (the constructor's `claims`)");
    return { write, next };
  }
}

function settled(outcome: Written | Refused): Written {
  if (!outcome.ok) throw outcome.error;
  return outcome;
}

/**
 * Claims batched the same way: concurrent claims (HTTP workers each claiming one task, say) wait for
 * the claim in flight and then share one `claimMany`, one statement and one commit for the lot, each
 * still getting only what its own filters and limit allow. The checked layer checks each claim on its
 * own, so a bad one is refused alone rather than failing its batch.
 */
export class ClaimBatcher {
  private readonly claims: Batcher<ClaimOptions, Outcome<ClaimedTask[]>>;

  constructor(store: Pick<CheckedStore, "claimEach">, maxBatch = 100) {
    this.claims = new Batcher((items) => store.claimEach(items), maxBatch);
  }

  async claim(options: ClaimOptions): Promise<ClaimedTask[]> {
    return unwrap(await this.claims.add(options));
  }
}

/**
 * Worker heartbeats batched the same way: the beats of concurrent requests register their workers and
 * renew their leases in one statement. A worker beating twice at once waits for its first beat's batch.
 */
export class BeatBatcher {
  private readonly beats: Batcher<WorkerBeat, Outcome<WorkerBeatResult>>;

  constructor(store: Pick<CheckedStore, "workerHeartbeatEach">, maxBatch = 100) {
    this.beats = new Batcher((items) => store.workerHeartbeatEach(items), maxBatch, (beat) => [beat.workerId]);
  }

  async beat(beat: WorkerBeat): Promise<WorkerBeatResult> {
    return unwrap(await this.beats.add(beat));
  }
}

function unwrap<T>(outcome: Settled<T>): T {
  if (!outcome.ok) throw outcome.error;
  return outcome.value;
}

/**
 * Single enqueues batched the same way: calls made while an insert is in flight (a producer sending
 * tasks one by one, faster than a durable commit per task allows) share the next insert and commit; a
 * call made alone is the single enqueue it always was. Unkeyed calls share an `enqueueMany`; a batch
 * with idempotency keys (every call of the HTTP clients has one) shares an `enqueueCalls` where the
 * store has it, each call still answered as its key says, and otherwise each keyed call goes alone.
 * Calls with the same idempotency key never share a batch, so the second meets the first's task as it
 * would one call later; a call with a unique key is not batched (see enqueue). The batch is all or
 * nothing; when it is refused (a bad item, an unknown task type), nothing was written and each call
 * is made on its own, so a refusal reaches only its caller, worded as for a single call. Any other
 * error (the database or the server out of reach: the insert may or may not have committed) reaches
 * every caller of the batch, as it would each single call.
 */
export class EnqueueBatcher {
  private readonly enqueues: Batcher<EnqueueCall, Settled<EnqueueResult>>;

  constructor(
    private readonly store: Pick<CheckedStore, "enqueue" | "enqueueMany" | "enqueueCalls" | "remote">,
    maxBatch = 1000,
  ) {
    const alone = ({ input, idempotencyKey }: EnqueueCall) => settle(store.enqueue(input, idempotencyKey === undefined ? {} : { idempotencyKey }));
    const together = async (calls: EnqueueCall[]): Promise<Settled<EnqueueResult>[]> => {
      const keyed = calls.some((c) => c.idempotencyKey !== undefined);
      // Over HTTP each call goes alone, with a key of its own (the server batches concurrent requests
      // itself): one batch had one key, so a call whose answer was lost, made again with the key its
      // error named, was refused as reusing it (422) and could not learn its task.
      if (calls.length > 1 && !store.remote && (!keyed || store.enqueueCalls)) {
        try {
          if (!keyed) return (await store.enqueueMany(calls.map((c) => c.input))).map((value) => ({ ok: true, value }));
          return await store.enqueueCalls!(calls);
        } catch (error) {
          // Not written (the database out of reach, say): each of these callers learns it and may retry.
          if (!isRefusal(error)) return calls.map(() => ({ ok: false, error }));
          // One by one, in the order they were made: sent at once, they could commit in any order,
          // and tasks enqueued one after the other took ids (and their FIFO place) out of order.
          const outcomes: Settled<EnqueueResult>[] = [];
          for (const call of calls) outcomes.push(await alone(call));
          return outcomes;
        }
      }
      // Alone, or keyed on a store that takes keyed calls one by one.
      return Promise.all(calls.map(alone));
    };
    this.enqueues = new Batcher(together, maxBatch, ({ idempotencyKey }) => (idempotencyKey === undefined ? [] : [idempotencyKey]));
  }

  /**
   * A task with a unique key is written on its own: its insert waits for any other transaction writing
   * the same key to end (an enqueue inside a caller's transaction, held open), and batched, every call
   * beside it and every batch after it waited with it, up to the statement timeout, and then failed.
   */
  async enqueue(input: EnqueueInput, options: EnqueueCallOptions = {}): Promise<EnqueueResult> {
    if (input.uniqueKey !== undefined) return this.store.enqueue(input, options);
    return unwrap(await this.enqueues.add({ input, idempotencyKey: options.idempotencyKey }));
  }
}

function settle<T>(promise: Promise<T>): Promise<Settled<T>> {
  return promise.then(
    (value) => ({ ok: true, value }),
    (error: unknown) => ({ ok: false, error }),
  );
}
