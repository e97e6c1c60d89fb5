-- counts() grouped the whole table, and completed tasks are most of it: 0.3 s at a million tasks,
-- paid on every /metrics scrape and dashboard refresh, and growing with the history. The other
-- statuses are counted through their partial indexes (queries.ts, COUNTS); completed tasks are
-- counted here instead. Each statement that completes tasks, or deletes completed ones, appends one
-- row per task type to completed_tallies (+n or -n), in its own transaction, so no two writers ever
-- wait on one counter row; the coordinator's sweep folds the tallies into completed_totals, in one
-- statement, so a reader sees each tally exactly once, in the one table or the other.
CREATE TABLE completed_totals (
  task_type text PRIMARY KEY,
  n         bigint NOT NULL
);
CREATE TABLE completed_tallies (
  task_type text   NOT NULL,
  n         bigint NOT NULL
);
INSERT INTO completed_totals (task_type, n) SELECT task_type, count(*) FROM tasks WHERE status = 'completed' GROUP BY task_type;
