-- The leader's reconcile reads the DISPATCHED tasks of a lost message oldest first: a partial
-- index keeps that read O(dispatched), not a scan of every task the store has kept.
CREATE INDEX tasks_dispatched ON tasks (dispatched_ms)
WHERE status = 'DISPATCHED' AND epoch IS NOT NULL;
