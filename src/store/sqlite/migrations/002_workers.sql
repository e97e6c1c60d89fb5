-- The worker registry, the reassignment history (seed 003) and coordinator leadership.

CREATE TABLE workers (
  worker_id       TEXT    PRIMARY KEY,
  roles           TEXT    NOT NULL, -- JSON array of task types
  hostname        TEXT,
  pid             INTEGER,
  version         TEXT,
  capacity        INTEGER NOT NULL CHECK (capacity >= 1),
  current_load    INTEGER NOT NULL DEFAULT 0,
  tasks_processed INTEGER NOT NULL DEFAULT 0,
  metadata        TEXT    NOT NULL DEFAULT '{}',
  status          TEXT    NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'stale', 'dead', 'inactive')),
  last_seen_at    TEXT    NOT NULL,
  started_at      TEXT    NOT NULL
);
CREATE INDEX workers_live_by_last_seen ON workers (last_seen_at) WHERE status IN ('active', 'stale');

CREATE TABLE reassignment_events (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id        INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  from_worker_id TEXT,
  to_worker_id   TEXT,
  reason         TEXT    NOT NULL,
  checkpoint     TEXT,
  success        INTEGER NOT NULL CHECK (success IN (0, 1)),
  error_message  TEXT,
  created_at     TEXT    NOT NULL
);
CREATE INDEX reassignment_events_by_time ON reassignment_events (created_at);
CREATE INDEX reassignment_events_by_task ON reassignment_events (task_id);
CREATE INDEX reassignment_events_by_from_worker ON reassignment_events (from_worker_id, created_at);

CREATE TABLE leader_leases (
  name       TEXT PRIMARY KEY,
  holder     TEXT NOT NULL,
  expires_at TEXT NOT NULL
);
