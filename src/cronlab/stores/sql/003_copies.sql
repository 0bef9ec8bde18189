-- `--election off`: replicas scanning in the same second each enqueue a copy of what another
-- replica copied that second. Lease-mode rows carry an epoch, so they never enter this index.
CREATE INDEX tasks_copied ON tasks (dispatched_ms) WHERE epoch IS NULL AND dispatched_ms IS NOT NULL;
