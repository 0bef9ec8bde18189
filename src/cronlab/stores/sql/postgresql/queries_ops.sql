-- Named queries of issue 16 in PostgreSQL's placeholders (run history, retention, alerts,
-- heartbeats, operator notes, the console); sqlite/queries_ops.sql has the same names
-- (and comments).

-- name: runs
-- The run history, newest occurrence first: a row per run (execution record) of a task, and a
-- row for a task without one (e.id NULL: history.record words its outcome from the task's
-- status). Future PENDING tasks are not runs. %(task)s (NULL: any) is a task's name.
SELECT t.id, t.idempotency_key, t.task, t.schedule, t.trigger_ms, t.dispatched_ms,
  e.start_ms, e.end_ms, coalesce(e.attempt, t.attempts), e.worker,
  e.id, e.outcome, e.error, t.status, t.last_error
FROM tasks t LEFT JOIN executions e ON e.task_id = t.id
WHERE t.trigger_ms >= %(since)s AND (t.status != 'PENDING' OR t.trigger_ms <= %(now)s)
  AND (%(task)s::text IS NULL OR t.task = %(task)s)
  AND (%(failed)s = 0 OR e.outcome IN ('error', 'failed'))
ORDER BY t.trigger_ms DESC, t.id DESC, e.attempt DESC, e.id DESC
LIMIT %(limit)s;

-- name: runs_of_schedule
-- As `runs`, for one schedule: a query of its own, since the partial index (schedule,
-- trigger_ms) serves only a WHERE that names the schedule.
SELECT t.id, t.idempotency_key, t.task, t.schedule, t.trigger_ms, t.dispatched_ms,
  e.start_ms, e.end_ms, coalesce(e.attempt, t.attempts), e.worker,
  e.id, e.outcome, e.error, t.status, t.last_error
FROM tasks t LEFT JOIN executions e ON e.task_id = t.id
WHERE t.schedule = %(schedule)s AND t.trigger_ms >= %(since)s
  AND (t.status != 'PENDING' OR t.trigger_ms <= %(now)s)
  AND (%(task)s::text IS NULL OR t.task = %(task)s)
  AND (%(failed)s = 0 OR e.outcome IN ('error', 'failed'))
ORDER BY t.trigger_ms DESC, t.id DESC, e.attempt DESC, e.id DESC
LIMIT %(limit)s;

-- name: recent_runs
SELECT t.schedule, t.id, t.trigger_ms, t.status, t.last_error, e.start_ms, e.end_ms,
  e.attempt, e.worker, e.outcome, e.error
FROM schedules s
CROSS JOIN LATERAL (
  SELECT id, schedule, trigger_ms, status, last_error FROM tasks
  WHERE schedule = s.name ORDER BY trigger_ms DESC LIMIT %(n)s
) t
LEFT JOIN LATERAL (
  SELECT start_ms, end_ms, attempt, worker, outcome, error FROM executions
  WHERE task_id = t.id ORDER BY id DESC LIMIT 1
) e ON true
WHERE s.name IN (SELECT json_array_elements_text(%(names)s::json))
ORDER BY t.schedule, t.trigger_ms DESC, t.id DESC;

-- name: lateness_by_minute
-- The console's chart: first runs' lateness (start - occurrence) by minute of occurrence;
-- backfilled occurrences (late on purpose) are left out, as the metric leaves them out.
SELECT (t.trigger_ms / 60000) * 60000 AS minute, count(*),
  avg(e.start_ms - t.trigger_ms), max(e.start_ms - t.trigger_ms)
FROM tasks t JOIN executions e ON e.task_id = t.id AND e.attempt = 1
WHERE t.trigger_ms >= %(since)s AND t.trigger_ms <= %(now)s
  AND t.idempotency_key NOT LIKE 'backfill:%%'
GROUP BY minute ORDER BY minute;

-- name: prune_candidates
-- Finished tasks whose occurrence, dispatch and end are older than %(before)s, oldest first;
-- never a schedule's newest occurrence (last_fire_ms), nor one its catch-up window still
-- covers (a run that ended within the keep still judges the next occurrence's overlap).
SELECT t.id FROM tasks t
WHERE t.trigger_ms < %(before)s AND t.status IN ('DONE', 'FAILED', 'SKIPPED', 'MISSED')
  AND coalesce(t.dispatched_ms, t.trigger_ms) < %(before)s
  AND coalesce(t.finished_ms, t.trigger_ms) < %(before)s
  AND NOT EXISTS (
    SELECT 1 FROM schedules s WHERE s.name = t.schedule
      AND (s.last_fire_ms = t.trigger_ms OR t.trigger_ms >= %(now)s - s.catchup_window_ms)
  )
ORDER BY t.trigger_ms LIMIT %(limit)s;

-- name: prune_executions
DELETE FROM executions WHERE task_id = ANY(%(ids)s::bigint[]);

-- name: prune_tasks
-- (an --election off copy is listed in `copied` too)
WITH gone AS (
  DELETE FROM tasks WHERE id = ANY(%(ids)s::bigint[])
    AND status IN ('DONE', 'FAILED', 'SKIPPED', 'MISSED')
  RETURNING id, schedule, trigger_ms
), uncopied AS (
  DELETE FROM copied WHERE task_id = ANY(ARRAY(SELECT id FROM gone))
)
SELECT id, schedule, trigger_ms FROM gone;

-- name: schedule_pruned_through
-- The schedule's history is gone up to %(through)s (the retention deleted a task of it then).
UPDATE schedules
SET pruned_through_ms = GREATEST(coalesce(pruned_through_ms, %(through)s), %(through)s)
WHERE name = %(name)s;

-- name: schedule_history_gone
SELECT pruned_through_ms FROM schedules WHERE name = %(name)s;

-- name: prune_events
DELETE FROM events WHERE id IN (
  SELECT id FROM events WHERE at_ms < %(before)s ORDER BY id LIMIT %(limit)s
);

-- name: prune_samples
DELETE FROM samples WHERE ctid = ANY(ARRAY(
  SELECT ctid FROM samples WHERE at_ms < %(before)s LIMIT %(limit)s
));

-- name: prune_alerts
-- Never the newest alert of a schedule's kind while the schedule exists: it is what says a
-- condition that still holds was alerted already.
DELETE FROM alerts WHERE id IN (
  SELECT a.id FROM alerts a WHERE a.raised_ms < %(before)s AND a.delivery != 'pending'
    AND NOT (
      EXISTS (SELECT 1 FROM schedules s WHERE s.name = a.schedule)
      AND a.id = (SELECT max(b.id) FROM alerts b WHERE b.schedule = a.schedule AND b.kind = a.kind)
    )
  ORDER BY a.id LIMIT %(limit)s
);

-- name: heartbeat
UPDATE processes SET heartbeat_ms = %(now)s WHERE owner = %(owner)s;

-- name: schedule_note
UPDATE schedules SET paused_note = %(note)s WHERE name = %(name)s;

-- name: alert_started_since
-- A run of the schedule at or after :fire has started (its record exists), or its occurrence
-- was skipped by the operator (paused, removed, cancelled: nothing was expected to start). An
-- overlap skip is not a start: the run it waited for may never have started either.
SELECT 1 FROM tasks t
WHERE t.schedule = %(name)s AND t.trigger_ms >= %(fire)s AND (
  EXISTS (SELECT 1 FROM executions e WHERE e.task_id = t.id)
  OR (t.status = 'SKIPPED' AND t.last_error IN ('paused', 'removed', 'cancelled'))
) LIMIT 1;

-- name: alert_unstarted
-- The schedule's dispatched tasks without a run record yet: one is running if a worker holds
-- its message now (held_ids).
SELECT id FROM tasks WHERE schedule = %(name)s AND status = 'DISPATCHED' LIMIT 1000;

-- name: held_ids
-- The task ids of envelopes a worker holds now: received, and invisible to the others.
SELECT task_ids FROM queue WHERE receives > 0 AND invisible_until_ms > %(now)s;

-- name: alert_last_done
SELECT max(trigger_ms) FROM tasks WHERE schedule = %(name)s AND status = 'DONE';

-- name: alert_failures_after
-- The schedule's failed runs after its newest successful one, oldest first.
SELECT idempotency_key, trigger_ms, last_error FROM tasks
WHERE schedule = %(name)s AND status = 'FAILED' AND trigger_ms > %(after)s
ORDER BY trigger_ms LIMIT %(n)s;

-- name: alert_insert
-- Only about a schedule still in the store (the retention keeps a gone one's newest alert no
-- longer, so a leader's cached list raising it again would say it twice).
INSERT INTO alerts (schedule, kind, subject, raised_ms, detail, delivery)
SELECT %(schedule)s, %(kind)s, %(subject)s, %(raised)s, %(detail)s, %(delivery)s
WHERE EXISTS (SELECT 1 FROM schedules WHERE name = %(schedule)s)
ON CONFLICT (schedule, kind, subject) DO NOTHING
RETURNING id;

-- name: alerts_to_send
-- (the columns of alerts_recent: alerting.as_alert reads both)
SELECT id, schedule, kind, subject, raised_ms, detail, delivery, attempts, delivered_ms
FROM alerts WHERE delivery = 'pending' AND next_try_ms <= %(now)s ORDER BY id LIMIT %(limit)s;

-- name: alert_sent
UPDATE alerts SET delivery = %(delivery)s, attempts = attempts + 1, next_try_ms = %(next)s,
  delivered_ms = %(delivered)s
WHERE id = %(id)s AND delivery = 'pending';

-- name: alerts_recent
SELECT id, schedule, kind, subject, raised_ms, detail, delivery, attempts, delivered_ms
FROM alerts ORDER BY id DESC LIMIT %(limit)s;

-- name: alert_newest
SELECT subject FROM alerts WHERE schedule = %(name)s AND kind = %(kind)s ORDER BY id DESC LIMIT 1;

-- An operator's actions on one task (stores/sql/operations.py: cronlab task, the console).

-- name: task_show
SELECT id, idempotency_key, task, schedule, trigger_ms, status, attempts, dispatched_ms,
  last_error
FROM tasks WHERE id = %(id)s;

-- name: task_unlist
-- (PostgreSQL only) First off the pending list, as a dispatch takes a task (its pending row,
-- then the task row): an action and a dispatch of one task wait for each other in that order,
-- never in a cycle. A no-op for a task not PENDING; undone with a refused action.
DELETE FROM pending WHERE task_id = %(id)s
  AND trigger_ms = (SELECT trigger_ms FROM tasks WHERE id = %(id)s);

-- name: task_lock
-- The task, locked until the action commits: a worker's batch running it holds the lock
-- (batch_start), so the action waits for that run to commit and then sees its DONE or FAILED.
SELECT id, idempotency_key, task, schedule, trigger_ms, status, attempts, dispatched_ms,
  last_error
FROM tasks WHERE id = %(id)s FOR UPDATE;

-- name: task_retry
UPDATE tasks SET status = 'DISPATCHED' WHERE id = %(id)s AND status = 'FAILED';

-- name: queue_unqueue_whole
-- (see SQLite's) SKIP LOCKED: an envelope a worker's batch or claim has locked is left to it.
-- Waiting for it would be a cycle: the batch locks its envelopes, then its tasks.
DELETE FROM queue WHERE id = ANY(ARRAY(
  SELECT id FROM queue
  WHERE task_ids @> ARRAY[%(id)s::bigint] AND cardinality(array_remove(task_ids, %(id)s::bigint)) = 0
    AND (receives = 0 OR invisible_until_ms <= %(now)s)
  FOR UPDATE SKIP LOCKED
));

-- name: queue_unqueue_part
UPDATE queue
SET task_ids = array_remove(task_ids, %(id)s::bigint),
    size = cardinality(array_remove(task_ids, %(id)s::bigint))
WHERE id = ANY(ARRAY(
  SELECT id FROM queue
  WHERE task_ids @> ARRAY[%(id)s::bigint] AND (receives = 0 OR invisible_until_ms <= %(now)s)
  FOR UPDATE SKIP LOCKED
));
