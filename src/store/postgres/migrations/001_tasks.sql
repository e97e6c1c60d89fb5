-- The task pool and its audit trail.

CREATE TABLE tasks (
  id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  task_type         text        NOT NULL,
  params            jsonb       NOT NULL DEFAULT '{}',
  status            text        NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'claimed', 'running', 'completed', 'failed', 'cancelled')),
  priority          integer     NOT NULL DEFAULT 0,
  scheduled_for     timestamptz NOT NULL,
  concurrency_key   text,
  unique_key        text,
  attempts          integer     NOT NULL DEFAULT 0,
  max_attempts      integer     NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
  backoff           jsonb       NOT NULL,
  timeout_seconds   integer,
  worker_id         text,
  lease_token       text,
  lease_seconds     integer,
  lease_expires_at  timestamptz,
  reserved_for      text,
  reserved_until    timestamptz,
  claimed_at        timestamptz,
  started_at        timestamptz,
  completed_at      timestamptz,
  last_heartbeat_at timestamptz,
  progress          double precision,
  checkpoint        jsonb,
  result            jsonb,
  error_message     text,
  parent_id         bigint REFERENCES tasks (id) ON DELETE SET NULL,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL
);

-- Claim indexes are partial: their size follows the pending set, not the history, so claim cost
-- does not grow with the number of finished tasks.
CREATE INDEX tasks_claim_by_priority ON tasks (priority DESC, created_at, id) WHERE status = 'pending';
CREATE INDEX tasks_claim_by_type_priority ON tasks (task_type, priority DESC, created_at, id) WHERE status = 'pending';
CREATE INDEX tasks_claim_by_type_created ON tasks (task_type, created_at, id) WHERE status = 'pending';
CREATE INDEX tasks_claim_reserved ON tasks (reserved_for) WHERE status = 'pending' AND reserved_for IS NOT NULL;

-- The per-key lock: at most one claimed or running task per concurrency key. Claims also check it
-- with NOT EXISTS; this index is what makes two racing claims of the same key impossible.
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
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  task_id        bigint      REFERENCES tasks (id) ON DELETE CASCADE, -- null for worker-level events (worker_dead)
  event          text        NOT NULL,
  from_worker_id text,
  to_worker_id   text,
  message        text,
  data           jsonb,
  created_at     timestamptz NOT NULL
);
CREATE INDEX task_events_by_task ON task_events (task_id, id);
