-- The claim indexes end with scheduled_for, so a claim's scan tells a task not yet due from the index
-- entry, without reading its row. Tasks scheduled for later (a delay, a retry's backoff) sit in the
-- claim order among the ready ones, and every claim walks past those ahead of the first ready task:
-- with 500,000 of them ahead, a claim read each one's row, 400-570 ms; reading the entries alone, 60 ms.
-- They are partial indexes of the pending tasks: rebuilding them reads those only.
DROP INDEX tasks_claim_by_priority;
DROP INDEX tasks_claim_by_type_priority;
DROP INDEX tasks_claim_by_type_created;
DROP INDEX tasks_claim_by_created;
CREATE INDEX tasks_claim_by_priority ON tasks (priority DESC, created_at, id, scheduled_for) WHERE status = 'pending';
CREATE INDEX tasks_claim_by_type_priority ON tasks (task_type, priority DESC, created_at, id, scheduled_for) WHERE status = 'pending';
CREATE INDEX tasks_claim_by_type_created ON tasks (task_type, created_at, id, scheduled_for) WHERE status = 'pending';
CREATE INDEX tasks_claim_by_created ON tasks (created_at, id, scheduled_for) WHERE status = 'pending';
