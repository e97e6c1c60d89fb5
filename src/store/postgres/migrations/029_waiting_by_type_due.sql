-- A typed claim reads the waiting tasks come due of its types (queries.ts, DUE). Before the table's
-- first ANALYZE (a fresh deployment's first burst, a server with autovacuum off) the planner took
-- tasks_pending_by_type for that scan, (task_type, scheduled_for) as here but over every pending
-- task, and filtered out all the ready ones: 5.8 ms of a one-task claim behind 30,000 of them, and
-- growing with the backlog. This index has the same columns over the waiting tasks alone, so it is
-- the cheaper of the two whatever the statistics say, and a claim walks each of its types in due
-- order. It holds only tasks scheduled for later: the ready ones never enter it.
CREATE INDEX tasks_waiting_by_type_due ON tasks (task_type, scheduled_for) WHERE status = 'pending' AND waiting;
