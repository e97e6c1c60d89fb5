-- When a leader last finished a sweep; see PostgreSQL's 004.
CREATE TABLE last_sweeps (
  name     TEXT PRIMARY KEY,
  holder   TEXT NOT NULL,
  swept_at TEXT NOT NULL
);
