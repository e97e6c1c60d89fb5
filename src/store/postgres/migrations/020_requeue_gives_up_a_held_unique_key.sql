-- A unique key dedupes pending tasks only: once its task is claimed, the same key may be enqueued again.
-- So a task going back to pending from a lease (a retryable failure, a release, a worker's shutdown, the
-- sweep's recovery) can meet another pending task holding its key. tasks_pending_unique_key then
-- refused the write: the failure, the release or the shutdown failed, the task stayed leased to a
-- worker that had let it go, and the sweep, which recovers every dead worker's tasks in one
-- transaction, failed as a whole and recovered nothing in the pool while that task stayed pending.
-- Now the returning task gives the key up and both tasks run: nothing a user submitted is dropped.
-- A trigger, not each statement: row triggers see the rows their statement changed before them, so two
-- tasks of one key requeued together (a dead worker held both) leave one holding it. The WHEN clause
-- is checked without calling the function, so claims and completions pay nearly nothing for it: three
-- alternated pairs of 30,000-task drains (bench:peers), with the trigger 26,259 / 27,440 / 26,875
-- tasks/s and 29.7 / 29.0 / 28.7 ms of database CPU per 1,000, without 27,268 / 26,885 / 27,062 and
-- 28.0 / 29.0 / 29.3.
-- An operator's retry (from failed) is left out: it refuses the task with unique_key_taken instead.
CREATE FUNCTION taskpool_give_up_held_unique_key() RETURNS trigger
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM tasks WHERE unique_key = NEW.unique_key AND status = 'pending' AND id <> NEW.id) THEN
    NEW.unique_key := NULL;
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER tasks_requeue_gives_up_held_unique_key
  BEFORE UPDATE OF status ON tasks
  FOR EACH ROW
  WHEN (NEW.status = 'pending' AND OLD.status IN ('claimed', 'running') AND NEW.unique_key IS NOT NULL)
  EXECUTE FUNCTION taskpool_give_up_held_unique_key();
