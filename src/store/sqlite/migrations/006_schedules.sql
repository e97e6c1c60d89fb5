-- Recurring schedules and the ticks they fired, as on PostgreSQL (see its 006): a tick's row is
-- written in the same transaction as its tasks, and its primary key lets each tick fire once.
-- Times are ISO-8601 UTC text, JSON is text.
CREATE TABLE schedules (
  name            TEXT    PRIMARY KEY,
  task_type       TEXT    NOT NULL,
  params          TEXT    NOT NULL DEFAULT '{}',
  cron            TEXT    NOT NULL,
  timezone        TEXT    NOT NULL DEFAULT 'UTC',
  enabled         INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
  fan_out         TEXT,
  concurrency_key TEXT,
  priority        INTEGER,
  missed_ticks    TEXT    NOT NULL DEFAULT 'skip' CHECK (missed_ticks IN ('skip', 'run_once')),
  next_run_at     TEXT,
  last_run_at     TEXT,
  last_result     TEXT,
  created_at      TEXT    NOT NULL,
  updated_at      TEXT    NOT NULL
);

CREATE INDEX schedules_due ON schedules (next_run_at) WHERE enabled = 1;

CREATE TABLE schedule_ticks (
  schedule_name TEXT NOT NULL REFERENCES schedules (name) ON DELETE CASCADE,
  tick_at       TEXT NOT NULL,
  fired_at      TEXT NOT NULL,
  task_ids      TEXT NOT NULL DEFAULT '[]', -- JSON array of the run's task ids
  PRIMARY KEY (schedule_name, tick_at)
);
