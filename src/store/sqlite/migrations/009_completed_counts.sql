-- counts() grouped the whole table, and completed tasks are most of it: 1 s at a million tasks,
-- on every /metrics scrape and dashboard refresh, growing with the history. The other statuses are
-- counted through their partial indexes (queries.ts, COUNTS); completed tasks are counted here,
-- by triggers, so every statement that completes a task or deletes a completed one keeps the count
-- in its own transaction. SQLite has one writer at a time, so one row per type costs no waiting.
CREATE TABLE completed_totals (
  task_type TEXT PRIMARY KEY,
  n         INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO completed_totals (task_type, n) SELECT task_type, count(*) FROM tasks WHERE status = 'completed' GROUP BY task_type;
CREATE TRIGGER tasks_completed_count AFTER UPDATE OF status ON tasks
WHEN NEW.status = 'completed' AND OLD.status <> 'completed'
BEGIN
  INSERT INTO completed_totals (task_type, n) VALUES (NEW.task_type, 1)
  ON CONFLICT (task_type) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER tasks_completed_uncount AFTER DELETE ON tasks
WHEN OLD.status = 'completed'
BEGIN
  UPDATE completed_totals SET n = n - 1 WHERE task_type = OLD.task_type;
END;
