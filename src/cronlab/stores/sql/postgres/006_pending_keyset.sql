-- The due scan resumes after the last row its previous full batch claimed: keyed on
-- (trigger_ms, id), it starts past the index entries of rows already claimed, which MVCC keeps
-- until VACUUM (a million rows due at once would otherwise be walked again by every batch).
CREATE INDEX tasks_pending_due_keyset ON tasks (trigger_ms, id) WHERE status = 'PENDING';
DROP INDEX tasks_pending_due;
ALTER INDEX tasks_pending_due_keyset RENAME TO tasks_pending_due;
