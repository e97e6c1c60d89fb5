-- Idempotency keys of enqueue calls (src/store/idempotency.ts): a keyed call looks its key up and
-- records it in the write transaction that inserts its tasks, so it is remembered if and only if they
-- are. Its own table: an enqueue without a key writes nothing here, and a record outlives its tasks'
-- retention. Retention deletes records by age, through created_at's index.
CREATE TABLE idempotency_keys (
  key         TEXT NOT NULL PRIMARY KEY,
  fingerprint TEXT NOT NULL,
  task_ids    TEXT NOT NULL, -- JSON array of the call's task ids, in input order
  created_at  TEXT NOT NULL
);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
