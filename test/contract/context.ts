import { afterAll, afterEach, beforeEach } from "vitest";
import { CheckedStore } from "../../src/api/checked-store.js";
import { ManualClock } from "../../src/core/clock.js";
import type { TaskCounts } from "../../src/core/task.js";
import type { Store } from "../../src/store/store.js";
import { SpareSchemas, type StoreKind, type TestStore } from "../helpers/stores.js";

/** What each contract test gets: a fresh checked store on a manual clock with a fixed jitter draw. */
export interface ContractContext {
  store: Store;
  clock: ManualClock;
  /** The jitter draw every retry uses (settable per test). */
  jitter: { value: number };
  another(): Promise<Store>;
  /** SQL run on the database around the store (see TestStore.execute). */
  execute(statement: string): Promise<void>;
}

export function useStore(kind: StoreKind): ContractContext {
  const ctx = { jitter: { value: 0.5 } } as ContractContext;
  let handle: TestStore;
  // The contract's tests change rows only: each PostgreSQL test takes the schema the last one emptied.
  const spares = new SpareSchemas();
  afterAll(() => spares.dropAll());
  beforeEach(async () => {
    ctx.clock = new ManualClock();
    handle = await kind.create({ clock: ctx.clock, random: () => ctx.jitter.value, spares });
    // The contract is what users get: the checked API layer in front of each store.
    ctx.store = new CheckedStore(handle.store);
    ctx.another = async () => new CheckedStore(await handle.another());
    ctx.execute = (statement) => handle.execute(statement);
    ctx.jitter.value = 0.5;
  });
  afterEach(async () => {
    await handle.cleanup();
  });
  return ctx;
}

/** Claims exactly one task or fails the test. */
export async function claimOne(store: Store, workerId = "w1", extra: Record<string, unknown> = {}) {
  const tasks = await store.claim({ workerId, ...extra });
  if (tasks.length !== 1) throw new Error(`expected one claimed task, got ${tasks.length}`);
  return tasks[0];
}

/**
 * The counts as a full read of the tasks gives them (at most 1,000): what counts() must answer. Written
 * out rather than through the stores' tallyCounts, so the oracle shares no code with what it checks.
 */
export async function countsByReading(store: Store): Promise<TaskCounts> {
  const { tasks } = await store.list({}, { limit: 1000 });
  const byStatus: TaskCounts["byStatus"] = { pending: 0, claimed: 0, running: 0, completed: 0, failed: 0, cancelled: 0 };
  const byType: TaskCounts["byType"] = {};
  for (const t of tasks) {
    byStatus[t.status]++;
    const ofType = (byType[t.taskType] ??= {});
    ofType[t.status] = (ofType[t.status] ?? 0) + 1;
  }
  return { byStatus, byType };
}
