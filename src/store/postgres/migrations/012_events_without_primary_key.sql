-- Every claim and every completion writes an audit event, and each event took an entry in two
-- indexes: the primary key on id, and task_events_by_task on (task_id, id). Nothing looks events up
-- by id alone: a task's timeline and retention go by task_id, and the pruning of worker-level events
-- by (task_id IS NULL, id), all through task_events_by_task. So the primary key goes: measured with
-- bench:peers (30,000 tasks, 14 alternated pairs on a noisy machine, medians of the pairs' ratios),
-- the database's CPU per task fell 4.5 % and the drain rose 4 %. id stays an identity column, so ids
-- stay unique and in order. Without a primary key, logical replication needs a replica identity to
-- publish retention's deletes: the whole row.
ALTER TABLE task_events DROP CONSTRAINT task_events_pkey;
ALTER TABLE task_events REPLICA IDENTITY FULL;
