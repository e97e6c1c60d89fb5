-- Tasks not yet due (a delay, a retry's backoff) leave the claim indexes. They kept their place in the
-- claim order among the ready tasks, so every claim walked past those ahead of the first ready one:
-- behind 200,000 of them, 4.5-6.8 ms a claim even with scheduled_for in the index entries (027).
--
-- waiting: a pending task whose scheduled_for was ahead of the time it was written at. It is a hint,
-- never a rule: a claim takes the waiting tasks come due along with the ready ones, in one order, and
-- clears the flag of those it leaves (see claimStatement), so a wrong flag costs a walk, never a claim.
-- A column, not `scheduled_for > updated_at` in the predicates: heartbeats, progress and checkpoints
-- write updated_at, and a write that changes a column an index's predicate reads cannot update the row
-- in place (HOT), so each would have written an entry to every index.
--
-- A new column changes what `SELECT *` returns: a statement that a process of an earlier build
-- prepared before this migration fails from then on ("cached plan must not change result type").
-- Stop those processes before migrating (docs/upgrading.md).
ALTER TABLE tasks ADD COLUMN waiting boolean NOT NULL DEFAULT false;
UPDATE tasks SET waiting = true WHERE status = 'pending' AND scheduled_for > now();

-- Set by a trigger, not by each statement, so no write that makes a task pending can miss it: each sets
-- updated_at to its own time. It fires only when the flag must change, and not for claims (their rows
-- are not pending).
CREATE FUNCTION taskpool_task_waiting() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.waiting := NEW.scheduled_for > NEW.updated_at;
  RETURN NEW;
END $$;

CREATE TRIGGER tasks_waiting
  BEFORE INSERT OR UPDATE OF status, scheduled_for ON tasks
  FOR EACH ROW
  WHEN (NEW.status = 'pending' AND NEW.waiting IS DISTINCT FROM (NEW.scheduled_for > NEW.updated_at))
  EXECUTE FUNCTION taskpool_task_waiting();

-- The claim indexes hold the pending tasks not waiting, and no longer need scheduled_for (migration
-- 027): what they hold is due. The waiting tasks are read by due time, up to now.
DROP INDEX tasks_claim_by_priority;
DROP INDEX tasks_claim_by_type_priority;
DROP INDEX tasks_claim_by_type_created;
DROP INDEX tasks_claim_by_created;
CREATE INDEX tasks_claim_by_priority ON tasks (priority DESC, created_at, id) WHERE status = 'pending' AND NOT waiting;
CREATE INDEX tasks_claim_by_type_priority ON tasks (task_type, priority DESC, created_at, id) WHERE status = 'pending' AND NOT waiting;
CREATE INDEX tasks_claim_by_type_created ON tasks (task_type, created_at, id) WHERE status = 'pending' AND NOT waiting;
CREATE INDEX tasks_claim_by_created ON tasks (created_at, id) WHERE status = 'pending' AND NOT waiting;
CREATE INDEX tasks_waiting_by_due ON tasks (scheduled_for) WHERE status = 'pending' AND waiting;

-- The backlog's counts and v_worker_capacity read every pending task, waiting or not, from the index
-- alone, as they did from the claim indexes (task_type leads, scheduled_for tells ready from waiting).
-- Claims add no entry to it: a claimed task is no longer pending.
CREATE INDEX tasks_pending_by_type ON tasks (task_type, scheduled_for) WHERE status = 'pending';
