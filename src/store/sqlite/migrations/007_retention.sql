-- Retention (core/retention.ts) finds finished tasks by age, oldest first. Completed tasks already
-- have tasks_completed_by_time; these cover the other two finished statuses. Partial, so they cost
-- nothing on claims and completions: only cancelling or failing a task for good writes to them.
CREATE INDEX tasks_cancelled_by_time ON tasks (completed_at) WHERE status = 'cancelled';
CREATE INDEX tasks_failed_by_time ON tasks (completed_at) WHERE status = 'failed';
-- Dead and shut-down workers, oldest first (the live ones have workers_live_by_last_seen).
CREATE INDEX workers_gone_by_last_seen ON workers (last_seen_at) WHERE status IN ('dead', 'inactive');
