-- The audit trail's foreign key checked, for every event, that its task exists: a lookup and a row
-- lock per event, three events per task, about 4 µs each, in the hot path of every claim and
-- completion. Events are only ever written by the statement that changes their task, for the rows
-- it changed, so the task exists by construction; retention deletes a task's events itself (see
-- retention-queries.ts). reassignment_events keeps its key: those rows are rare.
ALTER TABLE task_events DROP CONSTRAINT IF EXISTS task_events_task_id_fkey;
