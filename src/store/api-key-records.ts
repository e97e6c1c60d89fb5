import type { ApiKeyRecord, ApiKeyScope } from "../core/api-key.js";

/** An api_keys row with its times as Dates (PostgreSQL returns it so; SQLite's text times are parsed first). */
export interface ApiKeyRow {
  id: number;
  name: string | null;
  scope: ApiKeyScope;
  key_hash: string;
  prefix: string;
  rate_limit_per_minute: number | null;
  created_at: Date;
  revoked_at: Date | null;
}

/** The record callers see: everything but the hash. */
export function toApiKey(r: ApiKeyRow): ApiKeyRecord {
  return {
    id: r.id,
    name: r.name,
    scope: r.scope,
    prefix: r.prefix,
    rateLimitPerMinute: r.rate_limit_per_minute,
    createdAt: r.created_at,
    revokedAt: r.revoked_at,
  };
}
