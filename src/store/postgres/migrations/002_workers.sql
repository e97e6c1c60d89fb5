-- The worker registry, the reassignment history (seed 003) and coordinator leadership.

CREATE TABLE workers (
  worker_id       text        PRIMARY KEY,
  roles           text[]      NOT NULL,
  hostname        text,
  pid             integer,
  version         text,
  capacity        integer     NOT NULL CHECK (capacity >= 1),
  current_load    integer     NOT NULL DEFAULT 0,
  tasks_processed bigint      NOT NULL DEFAULT 0,
  metadata        jsonb       NOT NULL DEFAULT '{}',
  status          text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'stale', 'dead', 'inactive')),
  last_seen_at    timestamptz NOT NULL,
  started_at      timestamptz NOT NULL
);
-- The sweep only looks at workers that could go stale or dead.
CREATE INDEX workers_live_by_last_seen ON workers (last_seen_at) WHERE status IN ('active', 'stale');

CREATE TABLE reassignment_events (
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  task_id        bigint      NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  from_worker_id text,
  to_worker_id   text,
  reason         text        NOT NULL,
  checkpoint     jsonb,
  success        boolean     NOT NULL,
  error_message  text,
  created_at     timestamptz NOT NULL
);
CREATE INDEX reassignment_events_by_time ON reassignment_events (created_at);
CREATE INDEX reassignment_events_by_task ON reassignment_events (task_id);
CREATE INDEX reassignment_events_by_from_worker ON reassignment_events (from_worker_id, created_at);

-- One row per leadership role; whoever holds an unexpired row leads.
CREATE TABLE leader_leases (
  name       text        PRIMARY KEY,
  holder     text        NOT NULL,
  expires_at timestamptz NOT NULL
);
