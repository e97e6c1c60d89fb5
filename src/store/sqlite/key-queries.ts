/** Statements of the API keys (SQLite). Times are ISO-8601 text, as everywhere in this store. */

export const INSERT_API_KEY = `
  INSERT INTO api_keys (name, scope, key_hash, prefix, rate_limit_per_minute, created_at)
  VALUES (@name, @scope, @keyHash, @prefix, @rateLimitPerMinute, @now)
  RETURNING *`;

export const LIST_API_KEYS = `SELECT * FROM api_keys ORDER BY id`;

export const FIND_API_KEY = `SELECT * FROM api_keys WHERE key_hash = ?`;

/** A revoked key keeps its first revocation time. */
export const REVOKE_API_KEY = `UPDATE api_keys SET revoked_at = coalesce(revoked_at, @now) WHERE id = @id RETURNING *`;
