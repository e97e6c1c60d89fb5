-- counts() reached the failed and cancelled tasks through these two indexes (migration 007), then
-- read each task's row for its type. Failed tasks are kept until retried and lie scattered through
-- the history, so that was a row lookup per failed task, on every /metrics scrape and every
-- Overview and Tasks page refresh of the dashboard, in the server's one thread. Measured on 300,000
-- tasks (5,682 failed, 1,421 cancelled): 32-79 ms a call before, 4-15 ms with the type in the
-- indexes (SQLite then reads them as covering indexes). Retention still finds them by completed_at.
DROP INDEX tasks_failed_by_time;
DROP INDEX tasks_cancelled_by_time;
CREATE INDEX tasks_failed_by_time ON tasks (completed_at, task_type) WHERE status = 'failed';
CREATE INDEX tasks_cancelled_by_time ON tasks (completed_at, task_type) WHERE status = 'cancelled';
