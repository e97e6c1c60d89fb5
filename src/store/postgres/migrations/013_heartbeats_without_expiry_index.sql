-- A lease renewal (every heartbeat, for every task a worker holds) changed lease_expires_at, an
-- indexed column, so PostgreSQL could never update the row in place (a HOT update): each renewal
-- wrote a new entry to the primary key and to the three leased-task indexes, and with them dead
-- entries for the next scans to pass. Only the sweep's recovery read tasks_leased_by_expiry, once a
-- sweep interval; it now finds the expired leases among the leased tasks through another leased-task
-- index (a plan test checks it reads no other task). Measured with a throwaway script
-- (one worker holding 500 leases among 20,000 tasks, 200 heartbeats after 20 of warm-up, 3 alternated
-- pairs): 79-103 ms a heartbeat before, 35-46 ms after, about one renewal in nine in place.
-- A claim writes one index entry fewer too.
DROP INDEX tasks_leased_by_expiry;
