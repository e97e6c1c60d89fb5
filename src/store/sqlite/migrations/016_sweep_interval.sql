-- The interval the recording coordinator sweeps at: whether its last sweep is overdue is read against
-- it. Readers assumed the default (60 s), so a coordinator sweeping every 200 s was reported as not
-- sweeping at all. NULL for a sweep recorded before this column: the default is assumed.
ALTER TABLE last_sweeps ADD COLUMN interval_seconds REAL;
