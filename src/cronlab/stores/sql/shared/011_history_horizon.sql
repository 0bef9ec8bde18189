-- How far back a schedule's history is gone: the latest occurrence time of its tasks that the
-- retention deleted (NULL: none yet). A backfill never reaches it, since which of those
-- occurrences ran is no longer known (it would run again one that ran on time).
ALTER TABLE schedules ADD COLUMN pruned_through_ms BIGINT;
