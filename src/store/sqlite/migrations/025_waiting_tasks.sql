-- Tasks not yet due (a delay, a retry's backoff) leave the claim indexes, as on PostgreSQL (migration
-- 028, which says why). waiting: a pending task whose scheduled_for was ahead of the time it was
-- written at. A claim first moves the waiting tasks come due back into the claim indexes (claim.ts),
-- inside its write transaction, so the claim order holds (by due time alone among more than
-- WAITING_DUE_PER_CLAIM come due at once, src/store/claim-options.ts). The claims of earlier builds
-- name these indexes, which their statements no longer fit ("no query solution"): stop those
-- processes before migrating (docs/upgrading.md).
ALTER TABLE tasks ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET waiting = 1 WHERE status = 'pending' AND scheduled_for > strftime('%Y-%m-%dT%H:%M:%fZ', 'now');

-- Set by triggers, not by each statement, so no write that makes a task pending can miss it: each sets
-- updated_at to its own time. They write only when the flag must change, and claims do not fire them
-- (their rows are not pending). SQLite's triggers cannot change the row being written, so each writes
-- it again.
CREATE TRIGGER tasks_waiting_on_insert
AFTER INSERT ON tasks
WHEN NEW.status = 'pending' AND NEW.scheduled_for > NEW.updated_at
BEGIN
  UPDATE tasks SET waiting = 1 WHERE id = NEW.id;
END;

CREATE TRIGGER tasks_waiting_on_update
AFTER UPDATE OF status, scheduled_for ON tasks
WHEN NEW.status = 'pending' AND NEW.waiting IS NOT (NEW.scheduled_for > NEW.updated_at)
BEGIN
  UPDATE tasks SET waiting = (NEW.scheduled_for > NEW.updated_at) WHERE id = NEW.id;
END;

-- The claim indexes hold the pending tasks not waiting, and no longer need scheduled_for (migration
-- 024): what they hold is due. The waiting tasks are read by due time, up to now.
DROP INDEX tasks_claim_by_priority;
DROP INDEX tasks_claim_by_type_priority;
DROP INDEX tasks_claim_by_type_created;
CREATE INDEX tasks_claim_by_priority ON tasks (priority DESC, created_at, id) WHERE status = 'pending' AND waiting = 0;
CREATE INDEX tasks_claim_by_type_priority ON tasks (task_type, priority DESC, created_at, id) WHERE status = 'pending' AND waiting = 0;
CREATE INDEX tasks_claim_by_type_created ON tasks (task_type, created_at, id) WHERE status = 'pending' AND waiting = 0;
CREATE INDEX tasks_waiting_by_due ON tasks (scheduled_for) WHERE status = 'pending' AND waiting = 1;

-- The backlog's counts and v_worker_capacity read every pending task, waiting or not, from the index
-- alone, as they did from the claim indexes. Claims add no entry to it: a claimed task is no longer pending.
CREATE INDEX tasks_pending_by_type ON tasks (task_type, scheduled_for) WHERE status = 'pending';
