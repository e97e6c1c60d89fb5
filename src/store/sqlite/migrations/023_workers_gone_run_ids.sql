-- Every run replaced under the worker's id, newest first, up to GONE_RUNS_KEPT (16, src/core/worker.ts),
-- as a JSON array, where gone_run_id kept the last one alone: a process frozen while its replacement
-- crashed and a third run started beat again as a restart, and its beat listing all its leases took
-- the third's back.
ALTER TABLE workers ADD COLUMN gone_run_ids TEXT NOT NULL DEFAULT '[]';
UPDATE workers SET gone_run_ids = json_array(gone_run_id) WHERE gone_run_id IS NOT NULL;

-- gone_run_id stays, for workers of the version before still running during a rolling upgrade
-- (docs/upgrading.md): their statements name it. A run they record there as gone joins gone_run_ids,
-- so this version refuses its late beats too. Only their statements set gone_run_id.
CREATE TRIGGER workers_gone_run_id_joins_gone_run_ids
AFTER UPDATE OF gone_run_id ON workers
WHEN NEW.gone_run_id IS NOT NULL AND NEW.gone_run_id IS NOT OLD.gone_run_id
BEGIN
  UPDATE workers SET gone_run_ids = (
    SELECT json_group_array(value) FROM (
      SELECT NEW.gone_run_id AS value, -1 AS at
      UNION ALL SELECT value, key FROM json_each(NEW.gone_run_ids) WHERE value <> NEW.gone_run_id
      ORDER BY at LIMIT 16))
  WHERE worker_id = NEW.worker_id;
END;
