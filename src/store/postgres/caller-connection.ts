/**
 * Running the enqueue's statements on a connection that is not the store's: the caller's, inside a
 * transaction the caller has open (PostgresStore.enqueueWithin).
 */
import type { Task } from "../../core/task.js";
import type { SqlConnection } from "../store.js";
import type { enqueueStatements } from "./queries.js";
import { taskRowFromJson, toTask } from "./rows.js";

/** enqueueStatements(schema) for the store's schema: built once per store, not per call. */
export type CallerStatements = ReturnType<typeof enqueueStatements>;

/** Where an enqueue's statements run: the store's pool, or a caller's connection. */
export interface InsertTarget {
  /** $1 tasks (JSON), $2 now, $3 channel. The inserted tasks; null when `checked` and a type has a newer version (nothing written). */
  insert(values: unknown[], checked: boolean): Promise<Task[] | null>;
  /** The pending tasks holding these unique keys. */
  holders(keys: string[]): Promise<Task[]>;
}

interface Answer {
  types_current?: boolean;
  task: Record<string, unknown> | null;
}

/**
 * The caller's connection: its search_path and type parsers are the caller's, so the statements name
 * the schema and answer JSON text (see enqueueStatements), and are sent unnamed (a prepared name
 * could clash with the caller's own).
 */
export function callerConnection(connection: SqlConnection, statements: CallerStatements): InsertTarget {
  const answers = async (text: string, values: unknown[]) => {
    const { rows } = await connection.query(text, values);
    return rows.map((row) => JSON.parse((row as { answer: string }).answer) as Answer);
  };
  const tasksOf = (found: Answer[]) => found.flatMap((a) => (a.task === null ? [] : [toTask(taskRowFromJson(a.task))]));
  return {
    async insert(values, checked) {
      if (!checked) return tasksOf(await answers(statements.enqueue, values));
      const found = await answers(statements.enqueueIfCurrent, values);
      return found[0].types_current ? tasksOf(found) : null;
    },
    holders: async (keys) => tasksOf(await answers(statements.pendingByUniqueKeys, [keys])),
  };
}
