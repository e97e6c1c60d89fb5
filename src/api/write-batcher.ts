import type { Completion, Failure } from "../core/schemas.js";
import type { BatchOptions, BatchOutcome, Store } from "../store/store.js";

interface Waiting<I> {
  item: I;
  resolve(outcome: BatchOutcome): void;
  reject(error: unknown): void;
}

/**
 * Group commit for one kind of write. Calls made while a flush is in flight wait for the next flush,
 * which writes them all in one statement and one commit. At low load a call flushes at once (after
 * the current tick, so calls made together go together) and adds no delay; under load a batch holds
 * whatever arrived during the previous round trip, so the number of commits stops growing with the
 * number of tasks.
 */
class Batcher<I extends { id: number }> {
  private queue: Waiting<I>[] = [];
  private flushing = false;

  constructor(
    private readonly write: (items: I[]) => Promise<BatchOutcome[]>,
    private readonly maxBatch: number,
  ) {}

  add(item: I): Promise<BatchOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.flushing) {
        this.flushing = true;
        queueMicrotask(() => void this.flush());
      }
    });
  }

  /**
   * Up to maxBatch waiting calls, each task at most once: a second write for the same task (a client
   * retrying, say) goes in the next batch, so it meets the first one's result as a single call would.
   */
  private nextBatch(): Waiting<I>[] {
    const batch: Waiting<I>[] = [];
    const ids = new Set<number>();
    const later: Waiting<I>[] = [];
    for (const waiting of this.queue) {
      if (batch.length < this.maxBatch && !ids.has(waiting.item.id)) {
        ids.add(waiting.item.id);
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

/**
 * The outcomes of running tasks, batched: completions and failures from concurrent handlers (or
 * concurrent HTTP requests) share one statement each per round trip. Each item is still fenced by
 * its own lease: a refused item refuses only itself, and its caller gets the error.
 */
export class WriteBatcher {
  private readonly completions: Batcher<Completion>;
  private readonly failures: Batcher<Failure>;

  /** `options.returnTasks`: each outcome carries the whole task (a server answering single calls needs it; a worker does not). */
  constructor(store: Pick<Store, "completeMany" | "failMany">, options: BatchOptions = {}, maxBatch = 1000) {
    this.completions = new Batcher((items) => store.completeMany(items, options), maxBatch);
    this.failures = new Batcher((items) => store.failMany(items, options), maxBatch);
  }

  /** Resolves with the task's outcome once its batch committed; throws the refusal of a refused item. */
  async complete(item: Completion): Promise<BatchOutcome & { ok: true }> {
    return settled(await this.completions.add(item));
  }

  async fail(item: Failure): Promise<BatchOutcome & { ok: true }> {
    return settled(await this.failures.add(item));
  }
}

function settled(outcome: BatchOutcome): BatchOutcome & { ok: true } {
  if (!outcome.ok) throw outcome.error;
  return outcome;
}
