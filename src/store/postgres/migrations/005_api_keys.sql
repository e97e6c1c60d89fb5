-- API keys of the HTTP server. Only the SHA-256 of a key is stored (see core/api-key.ts for why a
-- fast hash is enough for 256-bit random keys); the server finds a key by its hash on every request,
-- hence the unique index. Revoked keys are kept (revoked_at set) so `taskpool keys list` shows them.
CREATE TABLE api_keys (
  id                    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name                  text,
  scope                 text        NOT NULL CHECK (scope IN ('admin', 'producer', 'worker')),
  key_hash              text        NOT NULL UNIQUE,
  prefix                text        NOT NULL,
  rate_limit_per_minute integer     CHECK (rate_limit_per_minute > 0), -- null = the server's default
  created_at            timestamptz NOT NULL,
  revoked_at            timestamptz
);
