-- The claim indexes end with scheduled_for, so a claim's scan tells a task not yet due from the index
-- entry, without reading its row (see PostgreSQL migration 027). Partial indexes of the pending
-- tasks: rebuilding them reads those only.
DROP INDEX tasks_claim_by_priority;
DROP INDEX tasks_claim_by_type_priority;
DROP INDEX tasks_claim_by_type_created;
CREATE INDEX tasks_claim_by_priority ON tasks (priority DESC, created_at, id, scheduled_for) WHERE status = 'pending';
CREATE INDEX tasks_claim_by_type_priority ON tasks (task_type, priority DESC, created_at, id, scheduled_for) WHERE status = 'pending';
CREATE INDEX tasks_claim_by_type_created ON tasks (task_type, created_at, id, scheduled_for) WHERE status = 'pending';
