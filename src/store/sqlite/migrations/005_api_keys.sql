-- API keys of the HTTP server; see PostgreSQL's 005.
CREATE TABLE api_keys (
  id                    INTEGER PRIMARY KEY AUTOINCREMENT,
  name                  TEXT,
  scope                 TEXT    NOT NULL CHECK (scope IN ('admin', 'producer', 'worker')),
  key_hash              TEXT    NOT NULL UNIQUE,
  prefix                TEXT    NOT NULL,
  rate_limit_per_minute INTEGER CHECK (rate_limit_per_minute > 0),
  created_at            TEXT    NOT NULL,
  revoked_at            TEXT
);
