/**
 * Statements of the task type registry (SQLite). Each runs inside the caller's BEGIN IMMEDIATE
 * transaction, so the latest version read is the one the write uses. The max_running cap is counted
 * by the claim (claim.ts).
 */

/** True for the latest version of the task type row `t`. */
export const IS_LATEST = `t.version = (SELECT max(n.version) FROM task_types n WHERE n.name = t.name)`;

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
