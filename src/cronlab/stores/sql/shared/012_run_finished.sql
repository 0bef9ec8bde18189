-- When an occurrence's run finished (committed its end: DONE, or FAILED for good). An
-- occurrence of a schedule that skips overlaps is skipped if an earlier run was still going at
-- its fire time: still DISPATCHED, or finished after it (a dispatch that waited for SQLite's
-- write lock, which a run holds, judges as one on time would have). Set for occurrences only.
ALTER TABLE tasks ADD COLUMN finished_ms BIGINT;
CREATE INDEX tasks_finished ON tasks (schedule, finished_ms) WHERE finished_ms IS NOT NULL;
