-- A schedule's unique key template ("resync:{key}"): a run makes no task of a key whose task from an
-- earlier run is still pending, so workers that fall behind do not gather a pile of duplicates.
-- NULL: none, as before.
ALTER TABLE schedules ADD COLUMN unique_key TEXT;
