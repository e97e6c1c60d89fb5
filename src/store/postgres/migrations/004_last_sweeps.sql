-- When a leader last finished a sweep, so `taskpool status` can tell when no coordinator is sweeping.
-- Apart from leader_leases because resigning deletes the lease row, and the last sweep must outlive
-- its leader. Written with the store's clock, like every other timestamp.
CREATE TABLE last_sweeps (
  name     text        PRIMARY KEY, -- the leadership, as in leader_leases
  holder   text        NOT NULL,
  swept_at timestamptz NOT NULL
);
