-- The task list's indexes held every version of every row: a claim and a completion each wrote an
-- entry to both, a third of the index writes of a task's life, for listings that other indexes
-- serve. Now they hold the rows no other index lists by status: pending ones (a backlog can be
-- large, and its oldest are listed first), failed and cancelled ones. Leased tasks are listed
-- through the leased-task indexes (there are only as many as workers hold), completed ones through
-- the primary key (they are most of the table, so a walk down it finds them at once). The listings
-- write their statuses into the statement so that generic plans can use these (queries.ts). The
-- price: a listing by type of all statuses walks the primary key too, fast for a common type and
-- 150-190 ms for one with 50 tasks among a million. Measured with bench:peers (30,000 tasks, 3
-- alternated pairs): the database's CPU per task fell 14 %, the drain rose 8 %.
DROP INDEX tasks_by_status;
DROP INDEX tasks_by_type;
--
-- `id > 0` is always true; it is there so that only the listings, which say it, can use these two. A
-- claim's scan for pending tasks could otherwise match them, and did: with a planner estimate of a
-- dozen pending tasks where there were 279,500, the generic plan of a typed claim intersected
-- tasks_by_type with a claim index and sorted every pending task, 150-200 ms a claim.
CREATE INDEX tasks_by_status ON tasks (status, id) WHERE status IN ('pending', 'failed', 'cancelled') AND id > 0;
CREATE INDEX tasks_by_type ON tasks (task_type, id) WHERE status IN ('pending', 'failed', 'cancelled') AND id > 0;
