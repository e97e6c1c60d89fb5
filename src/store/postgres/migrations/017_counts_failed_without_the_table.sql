-- counts() reached the failed and cancelled tasks through these two indexes (migration 007), then
-- read each task's row for its type. Failed tasks are kept until retried and lie scattered through
-- the history, so that was a heap page per failed task, on every /metrics scrape and every
-- Overview and Tasks page refresh of the dashboard. Measured on a million tasks (18,982 failed,
-- 4,746 cancelled, 128 MB shared_buffers, a loaded 2-core machine): counts() read 24,500 buffers
-- and took 0.8-1.25 s; with the type in the indexes it reads 826 and takes 114-134 ms, most of it
-- the walk of the 50,000 pending tasks' index. Retention still finds them by completed_at; the
-- indexes only get wider, and only failing or cancelling a task for good writes to them.
DROP INDEX tasks_failed_by_time;
DROP INDEX tasks_cancelled_by_time;
CREATE INDEX tasks_failed_by_time ON tasks (completed_at) INCLUDE (task_type) WHERE status = 'failed';
CREATE INDEX tasks_cancelled_by_time ON tasks (completed_at) INCLUDE (task_type) WHERE status = 'cancelled';
