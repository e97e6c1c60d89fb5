-- The run that shut down last (run_id when the shutdown came). A beat of it is refused whenever it
-- lands, also once another run has registered under the same id since: run_id then names the new
-- run, and the late beat, taken for a crash restart, took its leases for unknown to it and put them back.
ALTER TABLE workers ADD COLUMN gone_run_id text;
