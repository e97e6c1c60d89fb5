-- Recurring schedules (cron in a time zone, optional fan-out) and the ticks they fired. A tick's row
-- is written in the same transaction as its tasks, and its primary key (schedule, tick time) lets a
-- tick fire once: a second coordinator, or one restarted, that tries the same tick inserts nothing
-- and rolls its tasks back. Times are written with the store's clock, like every other timestamp.
CREATE TABLE schedules (
  name            text        PRIMARY KEY,
  task_type       text        NOT NULL,
  params          jsonb       NOT NULL DEFAULT '{}',
  cron            text        NOT NULL,
  timezone        text        NOT NULL DEFAULT 'UTC',
  enabled         boolean     NOT NULL DEFAULT true,
  fan_out         jsonb,                 -- { keys | fromResults, batches, batchIntervalSeconds }, as the library spells it
  concurrency_key text,                  -- a template: {key} becomes each fan-out key
  priority        integer,
  missed_ticks    text        NOT NULL DEFAULT 'skip' CHECK (missed_ticks IN ('skip', 'run_once')),
  next_run_at     timestamptz,           -- null while paused
  last_run_at     timestamptz,
  last_result     jsonb,
  created_at      timestamptz NOT NULL,
  updated_at      timestamptz NOT NULL
);

-- The coordinator's pass: enabled schedules whose next tick has come.
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE enabled;

CREATE TABLE schedule_ticks (
  schedule_name text        NOT NULL REFERENCES schedules (name) ON DELETE CASCADE,
  tick_at       timestamptz NOT NULL,
  fired_at      timestamptz NOT NULL,
  task_ids      bigint[]    NOT NULL DEFAULT '{}', -- the run's tasks: a later fan-out reads their results
  PRIMARY KEY (schedule_name, tick_at)
);
