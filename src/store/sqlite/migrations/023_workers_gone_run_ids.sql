-- Every run replaced under the worker's id, newest first, up to GONE_RUNS_KEPT (src/core/worker.ts),
-- as a JSON array, where gone_run_id kept the last one alone: a process frozen while its replacement
-- crashed and a third run started beat again as a restart, and its beat listing all its leases took
-- the third's back.
ALTER TABLE workers ADD COLUMN gone_run_ids TEXT NOT NULL DEFAULT '[]';
UPDATE workers SET gone_run_ids = json_array(gone_run_id) WHERE gone_run_id IS NOT NULL;
ALTER TABLE workers DROP COLUMN gone_run_id;
