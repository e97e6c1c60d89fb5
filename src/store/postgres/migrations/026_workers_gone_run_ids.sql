-- Every run replaced under the worker's id, newest first, up to GONE_RUNS_KEPT (16, src/core/worker.ts),
-- where gone_run_id kept the last one alone: a process frozen while its replacement crashed and a
-- third run started beat again as a restart, and its beat listing all its leases took the third's back.
ALTER TABLE workers ADD COLUMN gone_run_ids text[] NOT NULL DEFAULT '{}';
UPDATE workers SET gone_run_ids = ARRAY[gone_run_id] WHERE gone_run_id IS NOT NULL;

-- gone_run_id stays, for workers of the version before still running during a rolling upgrade
-- (docs/upgrading.md): their statements name it. A run they record there as gone joins gone_run_ids,
-- so this version refuses its late beats too. Only their statements set gone_run_id.
CREATE FUNCTION taskpool_gone_run_id_joins_gone_run_ids() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.gone_run_ids := (ARRAY[NEW.gone_run_id] || array_remove(NEW.gone_run_ids, NEW.gone_run_id))[1:16];
  RETURN NEW;
END $$;

CREATE TRIGGER workers_gone_run_id_joins_gone_run_ids
  BEFORE UPDATE OF gone_run_id ON workers
  FOR EACH ROW
  WHEN (NEW.gone_run_id IS NOT NULL AND NEW.gone_run_id IS DISTINCT FROM OLD.gone_run_id)
  EXECUTE FUNCTION taskpool_gone_run_id_joins_gone_run_ids();
