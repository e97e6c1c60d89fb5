-- A claim of any type in created_at order (sort_by created_at without task_types) walks this index and
-- stops after its limit; without it, it read and sorted every pending task. Partial, like the other
-- claim indexes: a task leaves it when claimed.
CREATE INDEX tasks_claim_by_created ON tasks (created_at, id) WHERE status = 'pending';
