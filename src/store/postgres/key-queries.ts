/** Statements of the API keys (PostgreSQL). Conventions as in queries.ts: "now" is a parameter. */

/** $1 name, $2 scope, $3 key hash, $4 prefix, $5 rate limit per minute, $6 now. */
export const INSERT_API_KEY = `
  INSERT INTO api_keys (name, scope, key_hash, prefix, rate_limit_per_minute, created_at)
  VALUES ($1, $2, $3, $4, $5::int, $6::timestamptz)
  RETURNING *`;

export const LIST_API_KEYS = `SELECT * FROM api_keys ORDER BY id`;

/** $1 key hash. Runs on every authenticated request: one probe of the unique index. */
export const FIND_API_KEY = `SELECT * FROM api_keys WHERE key_hash = $1`;

/** $1 id, $2 now. A revoked key keeps its first revocation time. */
export const REVOKE_API_KEY = `
  UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2::timestamptz) WHERE id = $1 RETURNING *`;
