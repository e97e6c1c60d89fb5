/**
 * Statements of the task type registry and the max_running cap (SQLite). Each runs inside the caller's
 * BEGIN IMMEDIATE transaction, so the latest version read is the one the write uses, and a cap count
 * cannot race with another claim: SQLite has one writer at a time.
 */
import { LEASED_STATUSES } from "../../core/state-machine.js";

const LEASED = LEASED_STATUSES.map((s) => `'${s}'`).join(", ");

const IS_LATEST = `t.version = (SELECT max(n.version) FROM task_types n WHERE n.name = t.name)`;

/** @names: JSON array. The latest version of each named type. */
export const LATEST_TASK_TYPES = `SELECT * FROM task_types t WHERE t.name IN (SELECT value FROM json_each(@names)) AND ${IS_LATEST}`;

export const LIST_TASK_TYPES = `SELECT * FROM task_types t WHERE ${IS_LATEST} ORDER BY t.name`;

export const TASK_TYPE_VERSIONS = `SELECT * FROM task_types WHERE name = ? ORDER BY version`;

export const INSERT_TASK_TYPE = `
  INSERT INTO task_types (name, version, description, params_schema, priority, max_attempts, backoff,
                          timeout_seconds, recovery_policy, max_running, created_at)
  VALUES (@name, @version, @description, @paramsSchema, @priority, @maxAttempts, @backoff,
          @timeoutSeconds, @recoveryPolicy, @maxRunning, @now)
  RETURNING *`;

/**
 * The types a claim may take whose latest version sets max_running, with how many more of each may be
 * claimed now (the cap less the claimed and running ones). @type0.. as in the claim's type filter.
 */
export function capRoomStatement(typeCount: number): string {
  return `
  SELECT t.name, t.max_running - (SELECT count(*) FROM tasks a WHERE a.task_type = t.name AND a.status IN (${LEASED})) AS room
  FROM task_types t
  WHERE t.max_running IS NOT NULL AND ${IS_LATEST}
  ${typeCount > 0 ? `AND t.name IN (${Array.from({ length: typeCount }, (_, i) => `@type${i}`).join(", ")})` : ""}`;
}
