import type { Clock } from "./core/clock.js";
import type { EnqueueInput, JsonObject, Task } from "./core/task.js";
import type { TaskTypeDefinition, TaskTypeRecord } from "./core/task-type.js";
import { Coordinator, type CoordinatorOptions } from "./coordinator/coordinator.js";
import { openStore } from "./store/open-store.js";
import type { Store } from "./store/store.js";
import type { WorkerOptions } from "./worker/options.js";
import { Worker } from "./worker/worker.js";

export interface ConnectOptions {
  /** PostgreSQL schema (default "taskpool"). */
  schema?: string;
  clock?: Clock;
  /** Apply pending migrations on connect (default true). */
  migrate?: boolean;
}

/**
 * A connected pool: the producer, worker and operator API on one store. The same code runs on
 * `sqlite:./file.db` and `postgres://…`.
 */
export class Taskpool {
  constructor(
    /** The underlying store, for everything the shortcuts below do not cover. */
    readonly store: Store,
    private readonly url: string,
    private readonly schema?: string,
  ) {}

  /** Puts one task in the pool; with a unique key already pending, returns that task instead. */
  async enqueue(taskType: string, params: JsonObject = {}, options: Omit<EnqueueInput, "taskType" | "params"> = {}): Promise<Task> {
    return (await this.store.enqueue({ ...options, taskType, params })).task;
  }

  /**
   * Registers (or re-registers) a task type: its params schema, defaults and policy. An unchanged
   * definition keeps its version; a changed one becomes the next version.
   */
  async registerTaskType(definition: TaskTypeDefinition): Promise<TaskTypeRecord> {
    return (await this.store.registerTaskType(definition)).taskType;
  }

  /** A worker on this pool (call start()). Its heartbeats use their own connection to the same database. */
  worker(options: WorkerOptions): Worker {
    return new Worker(this.store, options, { url: this.url, schema: this.schema });
  }

  /** A coordinator on this pool (call start()). */
  coordinator(options?: CoordinatorOptions): Coordinator {
    return new Coordinator(this.store, options);
  }

  close(): Promise<void> {
    return this.store.close();
  }
}

/** Opens (and by default migrates) the database a URL names: `sqlite:./path.db`, `sqlite::memory:`, `postgres://…`. */
export async function connect(url: string, options: ConnectOptions = {}): Promise<Taskpool> {
  const store = await openStore(url, options);
  return new Taskpool(store, url, options.schema);
}
