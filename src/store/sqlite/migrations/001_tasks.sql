-- The task pool and its audit trail. Times are ISO-8601 UTC text (toISOString): readable in plain
-- SQL, ordered correctly by string comparison, and understood by SQLite's date functions.

CREATE TABLE tasks (
  id                INTEGER PRIMARY KEY AUTOINCREMENT, -- AUTOINCREMENT: ids are never reused, cursors stay valid
  task_type         TEXT    NOT NULL,
  params            TEXT    NOT NULL DEFAULT '{}',
  status            TEXT    NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'claimed', 'running', 'completed', 'failed', 'cancelled')),
  priority          INTEGER NOT NULL DEFAULT 0,
  scheduled_for     TEXT    NOT NULL,
  concurrency_key   TEXT,
  unique_key        TEXT,
  attempts          INTEGER NOT NULL DEFAULT 0,
  max_attempts      INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
  backoff           TEXT    NOT NULL,
  timeout_seconds   INTEGER,
  worker_id         TEXT,
  lease_token       TEXT,
  lease_seconds     INTEGER,
  lease_expires_at  TEXT,
  reserved_for      TEXT,
  reserved_until    TEXT,
  claimed_at        TEXT,
  started_at        TEXT,
  completed_at      TEXT,
  last_heartbeat_at TEXT,
  progress          REAL,
  checkpoint        TEXT,
  result            TEXT,
  error_message     TEXT,
  parent_id         INTEGER REFERENCES tasks (id) ON DELETE SET NULL,
  created_at        TEXT    NOT NULL,
  updated_at        TEXT    NOT NULL
);

-- Partial indexes: claim cost follows the pending set, not the history.
CREATE INDEX tasks_claim_by_priority ON tasks (priority DESC, created_at, id) WHERE status = 'pending';
CREATE INDEX tasks_claim_by_type_priority ON tasks (task_type, priority DESC, created_at, id) WHERE status = 'pending';
CREATE INDEX tasks_claim_by_type_created ON tasks (task_type, created_at, id) WHERE status = 'pending';
CREATE INDEX tasks_claim_reserved ON tasks (reserved_for) WHERE status = 'pending' AND reserved_for IS NOT NULL;

-- The per-key lock and unique-key dedup, enforced by the database as on PostgreSQL.
CREATE UNIQUE INDEX tasks_active_concurrency_key ON tasks (concurrency_key)
  WHERE status IN ('claimed', 'running') AND concurrency_key IS NOT NULL;
CREATE UNIQUE INDEX tasks_pending_unique_key ON tasks (unique_key)
  WHERE status = 'pending' AND unique_key IS NOT NULL;

CREATE INDEX tasks_leased_by_worker ON tasks (worker_id) WHERE status IN ('claimed', 'running');
CREATE INDEX tasks_leased_by_expiry ON tasks (lease_expires_at) WHERE status IN ('claimed', 'running');
CREATE INDEX tasks_by_status ON tasks (status, id);
CREATE INDEX tasks_by_type ON tasks (task_type, id);
CREATE INDEX tasks_by_parent ON tasks (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE task_events (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id        INTEGER REFERENCES tasks (id) ON DELETE CASCADE, -- null for worker-level events (worker_dead)
  event          TEXT    NOT NULL,
  from_worker_id TEXT,
  to_worker_id   TEXT,
  message        TEXT,
  data           TEXT,
  created_at     TEXT    NOT NULL
);
CREATE INDEX task_events_by_task ON task_events (task_id, id);
