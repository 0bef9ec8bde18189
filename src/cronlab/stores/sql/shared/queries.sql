-- Named queries both dialects take as they are (no parameters); each dialect's queries.sql
-- holds the rest. A dialect's own query of the same name would win.

-- name: lease_read
SELECT holder, epoch, expires_ms FROM lease WHERE name = 'scheduler';

-- name: counts
SELECT status, count(*) FROM tasks GROUP BY status;

-- name: processes
SELECT role, idx, pid, owner, started_ms, exited_ms FROM processes
ORDER BY role, idx, started_ms, owner;

-- name: events
SELECT kind, at_ms, holder, epoch, pid, detail FROM events ORDER BY at_ms, id;

-- name: report_dispatched
SELECT value FROM counters WHERE name = 'dispatched';

-- name: report_backlog_peak
SELECT coalesce(max(depth), 0) FROM samples;

-- name: report_lateness_count
SELECT count(*) FROM tasks WHERE dispatched_ms IS NOT NULL;

-- name: schedule_names
SELECT name FROM schedules ORDER BY name;

-- name: queue_depth
SELECT coalesce(sum(size), 0) FROM queue;

-- name: queued_ids
SELECT task_ids FROM queue;
