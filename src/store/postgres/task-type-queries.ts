/**
 * Statements of the task type registry (PostgreSQL). Conventions as in queries.ts. Rows are never
 * updated or deleted: a changed definition is a new version.
 */

/** $1 names. The latest version of each named type: one probe of the primary key per name (enqueue runs it on every call). */
export const LATEST_TASK_TYPES = `
  SELECT DISTINCT ON (name) * FROM task_types WHERE name = ANY($1::text[]) ORDER BY name, version DESC`;

export const LIST_TASK_TYPES = `SELECT DISTINCT ON (name) * FROM task_types ORDER BY name, version DESC`;

/** $1 name. */
export const TASK_TYPE_VERSIONS = `SELECT * FROM task_types WHERE name = $1 ORDER BY version`;

/**
 * $1 name, $2 version, $3 description, $4 params schema (JSON), $5 priority, $6 max attempts,
 * $7 backoff (JSON), $8 timeout seconds, $9 recovery policy, $10 max running, $11 now.
 * The caller passes latest + 1; when a concurrent registration took that number first nothing is
 * inserted or returned, and the caller looks again.
 */
export const INSERT_TASK_TYPE = `
  INSERT INTO task_types (name, version, description, params_schema, priority, max_attempts, backoff,
                          timeout_seconds, recovery_policy, max_running, created_at)
  VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7::jsonb, $8, $9, $10, $11::timestamptz)
  ON CONFLICT (name, version) DO NOTHING
  RETURNING *`;
