-- Named queries of issue 16 in SQLite's placeholders (run history, retention, alerts,
-- heartbeats, operator notes, the console); postgresql/queries_ops.sql has the same names.

-- name: runs
-- The run history, newest occurrence first: a row per run (execution record) of a task, and a
-- row for a task without one (e.id NULL: history.record words its outcome from the task's
-- status). Future PENDING tasks are not runs. :task (NULL: any) is a task's name.
SELECT t.id, t.idempotency_key, t.task, t.schedule, t.trigger_ms, t.dispatched_ms,
  e.start_ms, e.end_ms, coalesce(e.attempt, t.attempts), e.worker,
  e.id, e.outcome, e.error, t.status, t.last_error
FROM tasks t LEFT JOIN executions e ON e.task_id = t.id
WHERE t.trigger_ms >= :since AND (t.status != 'PENDING' OR t.trigger_ms <= :now)
  AND (:task IS NULL OR t.task = :task)
  AND (:failed = 0 OR e.outcome IN ('error', 'failed'))
ORDER BY t.trigger_ms DESC, t.id DESC, e.attempt DESC, e.id DESC
LIMIT :limit;

-- name: runs_of_schedule
-- As `runs`, for one schedule: a query of its own, since the partial index (schedule,
-- trigger_ms) serves only a WHERE that names the schedule.
SELECT t.id, t.idempotency_key, t.task, t.schedule, t.trigger_ms, t.dispatched_ms,
  e.start_ms, e.end_ms, coalesce(e.attempt, t.attempts), e.worker,
  e.id, e.outcome, e.error, t.status, t.last_error
FROM tasks t LEFT JOIN executions e ON e.task_id = t.id
WHERE t.schedule = :schedule AND t.trigger_ms >= :since
  AND (t.status != 'PENDING' OR t.trigger_ms <= :now)
  AND (:task IS NULL OR t.task = :task)
  AND (:failed = 0 OR e.outcome IN ('error', 'failed'))
ORDER BY t.trigger_ms DESC, t.id DESC, e.attempt DESC, e.id DESC
LIMIT :limit;

-- name: recent_runs
-- The console: each schedule's :n newest tasks, each with its newest run (a task's outcome is
-- its last attempt's), of the schedules named in :names (a JSON array); the caller drops
-- the one still to come (the index alone picks them).
SELECT t.schedule, t.id, t.trigger_ms, t.status, t.last_error, e.start_ms, e.end_ms,
  e.attempt, e.worker, e.outcome, e.error
FROM schedules s
JOIN tasks t ON t.id IN (
  SELECT id FROM tasks WHERE schedule = s.name ORDER BY trigger_ms DESC LIMIT :n
)
LEFT JOIN executions e ON e.id = (
  SELECT max(id) FROM executions WHERE task_id = t.id
)
WHERE s.name IN (SELECT value FROM json_each(:names))
ORDER BY t.schedule, t.trigger_ms DESC, t.id DESC;

-- name: lateness_by_minute
-- The console's chart: first runs' lateness (start - occurrence) by minute of occurrence;
-- backfilled occurrences (late on purpose) are left out, as the metric leaves them out.
SELECT (t.trigger_ms / 60000) * 60000 AS minute, count(*),
  avg(e.start_ms - t.trigger_ms), max(e.start_ms - t.trigger_ms)
FROM tasks t JOIN executions e ON e.task_id = t.id AND e.attempt = 1
WHERE t.trigger_ms >= :since AND t.trigger_ms <= :now
  AND t.idempotency_key NOT LIKE 'backfill:%'
GROUP BY minute ORDER BY minute;

-- name: prune_candidates
-- Finished tasks whose occurrence, dispatch and end are older than :before, oldest first;
-- never a schedule's newest occurrence (last_fire_ms), nor one its catch-up window still
-- covers (a run that ended within the keep still judges the next occurrence's overlap).
SELECT t.id FROM tasks t
WHERE t.trigger_ms < :before AND t.status IN ('DONE', 'FAILED', 'SKIPPED', 'MISSED')
  AND coalesce(t.dispatched_ms, t.trigger_ms) < :before
  AND coalesce(t.finished_ms, t.trigger_ms) < :before
  AND NOT EXISTS (
    SELECT 1 FROM schedules s WHERE s.name = t.schedule
      AND (s.last_fire_ms = t.trigger_ms OR t.trigger_ms >= :now - s.catchup_window_ms)
  )
ORDER BY t.trigger_ms LIMIT :limit;

-- name: prune_executions
DELETE FROM executions WHERE task_id IN (SELECT value FROM json_each(:ids));

-- name: prune_tasks
DELETE FROM tasks WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('DONE', 'FAILED', 'SKIPPED', 'MISSED')
RETURNING id, schedule, trigger_ms;

-- name: schedule_pruned_through
-- The schedule's history is gone up to :through (the retention deleted a task of it then).
UPDATE schedules SET pruned_through_ms = max(coalesce(pruned_through_ms, :through), :through)
WHERE name = :name;

-- name: schedule_history_gone
SELECT pruned_through_ms FROM schedules WHERE name = :name;

-- name: prune_events
DELETE FROM events WHERE id IN (
  SELECT id FROM events WHERE at_ms < :before ORDER BY id LIMIT :limit
);

-- name: prune_samples
DELETE FROM samples WHERE rowid IN (
  SELECT rowid FROM samples WHERE at_ms < :before LIMIT :limit
);

-- name: prune_alerts
-- Never the newest alert of a schedule's kind while the schedule exists: it is what says a
-- condition that still holds was alerted already.
DELETE FROM alerts WHERE id IN (
  SELECT a.id FROM alerts a WHERE a.raised_ms < :before AND a.delivery != 'pending'
    AND NOT (
      EXISTS (SELECT 1 FROM schedules s WHERE s.name = a.schedule)
      AND a.id = (SELECT max(b.id) FROM alerts b WHERE b.schedule = a.schedule AND b.kind = a.kind)
    )
  ORDER BY a.id LIMIT :limit
);

-- name: heartbeat
UPDATE processes SET heartbeat_ms = :now WHERE owner = :owner;

-- name: schedule_note
UPDATE schedules SET paused_note = :note WHERE name = :name;

-- name: alert_started_since
-- A run of the schedule at or after :fire has started (its record exists), or its occurrence
-- was skipped by the operator (paused, removed, cancelled: nothing was expected to start). An
-- overlap skip is not a start: the run it waited for may never have started either.
SELECT 1 FROM tasks t
WHERE t.schedule = :name AND t.trigger_ms >= :fire AND (
  EXISTS (SELECT 1 FROM executions e WHERE e.task_id = t.id)
  OR (t.status = 'SKIPPED' AND t.last_error IN ('paused', 'removed', 'cancelled'))
) LIMIT 1;

-- name: alert_unstarted
-- The schedule's dispatched tasks without a run record yet: one is running if a worker holds
-- its message now (held_ids).
SELECT id FROM tasks WHERE schedule = :name AND status = 'DISPATCHED' LIMIT 1000;

-- name: held_ids
-- The task ids of envelopes a worker holds now: received, and invisible to the others.
SELECT task_ids FROM queue WHERE receives > 0 AND invisible_until_ms > :now;

-- name: alert_last_done
SELECT max(trigger_ms) FROM tasks WHERE schedule = :name AND status = 'DONE';

-- name: alert_failures_after
-- The schedule's failed runs after its newest successful one, oldest first.
SELECT idempotency_key, trigger_ms, last_error FROM tasks
WHERE schedule = :name AND status = 'FAILED' AND trigger_ms > :after
ORDER BY trigger_ms LIMIT :n;

-- name: alert_insert
-- Only about a schedule still in the store (the retention keeps a gone one's newest alert no
-- longer, so a leader's cached list raising it again would say it twice).
INSERT INTO alerts (schedule, kind, subject, raised_ms, detail, delivery)
SELECT :schedule, :kind, :subject, :raised, :detail, :delivery
WHERE EXISTS (SELECT 1 FROM schedules WHERE name = :schedule)
ON CONFLICT (schedule, kind, subject) DO NOTHING
RETURNING id;

-- name: alerts_to_send
-- (the columns of alerts_recent: alerting.as_alert reads both)
SELECT id, schedule, kind, subject, raised_ms, detail, delivery, attempts, delivered_ms
FROM alerts WHERE delivery = 'pending' AND next_try_ms <= :now ORDER BY id LIMIT :limit;

-- name: alert_sent
UPDATE alerts SET delivery = :delivery, attempts = attempts + 1, next_try_ms = :next,
  delivered_ms = :delivered
WHERE id = :id AND delivery = 'pending';

-- name: alerts_recent
SELECT id, schedule, kind, subject, raised_ms, detail, delivery, attempts, delivered_ms
FROM alerts ORDER BY id DESC LIMIT :limit;

-- name: alert_newest
SELECT subject FROM alerts WHERE schedule = :name AND kind = :kind ORDER BY id DESC LIMIT 1;

-- An operator's actions on one task (stores/sql/operations.py: cronlab task, the console).

-- name: task_show
-- ports.TaskInfo's fields, in order.
SELECT id, idempotency_key, task, schedule, trigger_ms, status, attempts, dispatched_ms,
  last_error
FROM tasks WHERE id = :id;

-- name: task_lock
-- task_show inside the action's write transaction, which holds the database's only write lock:
-- no run, dispatch or other action changes the task until it commits.
SELECT id, idempotency_key, task, schedule, trigger_ms, status, attempts, dispatched_ms,
  last_error
FROM tasks WHERE id = :id;

-- name: task_retry
-- A FAILED task runs once more: DISPATCHED again, its message enqueued in the same transaction.
UPDATE tasks SET status = 'DISPATCHED' WHERE id = :id AND status = 'FAILED';

-- name: queue_unqueue_whole
-- A cancelled task's envelopes that hold it alone and that no worker holds (never received, or
-- their visibility expired): deleted. One a worker holds is left to it (its live check runs
-- nothing of a task no longer DISPATCHED, and acks it).
DELETE FROM queue WHERE (receives = 0 OR invisible_until_ms <= :now)
  AND :id IN (SELECT value FROM json_each(queue.task_ids))
  AND NOT EXISTS (SELECT 1 FROM json_each(queue.task_ids) WHERE value != :id);

-- name: queue_unqueue_part
-- The cancelled task taken out of the other envelopes no worker holds (they keep their place).
UPDATE queue
SET task_ids = (SELECT json_group_array(value) FROM json_each(queue.task_ids) WHERE value != :id),
    size = (SELECT count(*) FROM json_each(queue.task_ids) WHERE value != :id)
WHERE (receives = 0 OR invisible_until_ms <= :now)
  AND :id IN (SELECT value FROM json_each(queue.task_ids));
