-- Idempotency keys of enqueue calls (src/store/idempotency.ts): a keyed call inserts its key here
-- first, in the transaction that inserts its tasks, so a racing call with the same key waits on this
-- row and then finds it; task_ids (input order) are filled in before the commit. Its own table, not
-- a column of tasks: an enqueue without a key writes nothing here, and a record outlives its tasks'
-- retention. Retention deletes records by age, through created_at's index.
CREATE TABLE idempotency_keys (
  key         text        PRIMARY KEY,
  fingerprint text        NOT NULL,
  task_ids    bigint[]    NOT NULL,
  created_at  timestamptz NOT NULL
);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
