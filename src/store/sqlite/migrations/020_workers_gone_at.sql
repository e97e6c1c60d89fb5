-- When the worker was declared dead or shut down; NULL while it is live. A beat stamped before then
-- (sent before, held up on the write lock, landing after) is from the life that ended and does not
-- bring the worker back: it showed a dead worker active until the next sweep, and the sweep could
-- reserve a dead worker's tasks for it.
ALTER TABLE workers ADD COLUMN gone_at TEXT;
