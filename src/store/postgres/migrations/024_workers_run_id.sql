-- The run of the worker its last beat came from (WorkerBeat.runId; NULL when the worker sends none).
-- Once the worker has shut down, a beat of that run is from the life that ended, whenever it arrives:
-- over HTTP the server stamps a beat when it writes it, so gone_at alone let a beat sent before the
-- shutdown but landing after it (delayed, or sent again by the client's retries) mark it active again.
ALTER TABLE workers ADD COLUMN run_id text;
