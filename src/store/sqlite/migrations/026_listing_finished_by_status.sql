-- Listings of failed or cancelled tasks walked the table in id order (migration 008 dropped the
-- listing indexes, which held every version of every row): with a million tasks, 160 ms for a page
-- of failed ones, on the thread that serves every request. Failed tasks are kept until retried, so
-- they can be many, scattered through the history. This index holds those two statuses only: a
-- task's claim and completion write nothing to it. Only a statement that states its condition reads
-- it (SQLite does not infer it from `status = 'failed'`): the listings do (queries.ts, listStatement).
CREATE INDEX tasks_finished_by_status ON tasks (status, id) WHERE status IN ('failed', 'cancelled');
