-- Named queries of the SQLite dialect (`-- name: NAME` blocks, run by stores/sql/store.py):
-- parameters bound by name, never formatted in; id lists and row sets arrive as JSON arrays.

-- name: tables
-- Every table of the file ('here'); cronlab's are those with its prefix (stores/sql/namespace).
SELECT 'here', name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%';

-- name: indexes
-- The file's indexes and their statements (moving a store of cronlab before 0.3 renames them).
SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL;

-- name: migrate_lock
-- The write lock every transaction takes already orders migrating processes.
SELECT 1;

-- name: add_task
-- The parameters are a NewTask's fields (its _asdict()).
INSERT INTO tasks (idempotency_key, task, payload, trigger_ms, schedule)
VALUES (:idempotency_key, :task, :payload, :trigger_ms, :schedule)
ON CONFLICT (idempotency_key) DO NOTHING;

-- name: add_tasks_many
-- The bulk form (executemany over tuples): the same statement, positional.
INSERT INTO tasks (idempotency_key, task, payload, trigger_ms, schedule)
VALUES (?, ?, ?, ?, ?) ON CONFLICT (idempotency_key) DO NOTHING;

-- name: lease_read_locked
-- Inside a write transaction, which holds the database's only write lock.
SELECT holder, epoch, expires_ms FROM lease WHERE name = 'scheduler';

-- name: lease_cas
-- Acquire a free or expired lease (epoch + 1), or renew our own unexpired one (epoch kept).
UPDATE lease
SET epoch = CASE WHEN holder = :owner AND expires_ms > :now THEN epoch ELSE epoch + 1 END,
    holder = :owner,
    expires_ms = :now + :ttl
WHERE name = 'scheduler' AND (holder IS NULL OR expires_ms <= :now OR holder = :owner)
RETURNING holder, epoch, expires_ms;

-- name: lease_release
UPDATE lease SET holder = NULL, expires_ms = 0 WHERE name = 'scheduler' AND holder = :owner;

-- name: fence_lock_all
-- Every fence row (PostgreSQL locks them: an operator's change waits for a dispatch); here
-- the writer lock serialises every write already.
SELECT name FROM fence ORDER BY name;

-- name: fence_lock
-- One fence per election kind (:kind 'lease' or 'epoch'): an etcd revision never fences
-- the SQL lease's epochs, nor the reverse.
SELECT max_epoch FROM fence WHERE name = :kind;

-- name: fence_raise
UPDATE fence SET max_epoch = :epoch WHERE name = :kind AND max_epoch < :epoch;

-- name: claim_due
-- Claimed (id, key, attempts so far, trigger_ms), oldest due PENDING rows first. A claimed row
-- leaves the partial index at once, so the scan never resumes (:after_ms and :after_id unused).
UPDATE tasks SET status = 'DISPATCHED', epoch = :epoch, dispatched_ms = :now
WHERE id IN (
  SELECT id FROM tasks WHERE status = 'PENDING' AND trigger_ms <= :now
  ORDER BY trigger_ms, id LIMIT :limit
)
RETURNING id, idempotency_key, attempts, trigger_ms;

-- name: read_due
SELECT id, idempotency_key, task, payload, trigger_ms, attempts FROM tasks
WHERE status = 'PENDING' AND trigger_ms <= :now ORDER BY trigger_ms LIMIT :limit;

-- name: read_copied
-- `--election off`: what came due after this replica's last scan (:since) and another replica
-- already copied (so it is no longer PENDING): cron on every replica sends its own copy.
SELECT id, idempotency_key, task, payload, trigger_ms, attempts FROM tasks
WHERE epoch IS NULL AND dispatched_ms > :since AND trigger_ms > :since AND trigger_ms <= :now;

-- name: mark_copied
UPDATE tasks SET status = 'DISPATCHED', dispatched_ms = coalesce(dispatched_ms, :now)
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'PENDING';

-- name: enqueue
-- One envelope (executemany): task ids (a JSON array), their number, attempt, enqueued at and
-- visible at.
INSERT INTO queue (task_ids, size, attempt, enqueued_ms, invisible_until_ms)
VALUES (?, ?, ?, ?, ?);

-- name: count_dispatched
UPDATE counters SET value = value + :n WHERE name = 'dispatched';

-- name: mark_missed
UPDATE tasks SET status = 'MISSED' WHERE status = 'PENDING' AND trigger_ms < :before;

-- name: queue_any_visible
SELECT 1 FROM queue WHERE invisible_until_ms <= :now LIMIT 1;

-- name: queue_visible
-- A page of visible envelopes; a claim takes whole ones until its limit is reached.
SELECT id, size FROM queue WHERE invisible_until_ms <= :now AND id > :after
ORDER BY id LIMIT :page;

-- name: queue_split
-- The part of a visible envelope a claim takes: a new envelope (claimed at once); the rest
-- stays in the old one, in its place in the queue.
INSERT INTO queue (task_ids, size, attempt, enqueued_ms, invisible_until_ms, receives)
SELECT (SELECT json_group_array(value) FROM json_each(q.task_ids) WHERE key < :keep),
  :keep, attempt, enqueued_ms, invisible_until_ms, receives
FROM queue q WHERE id = :id
RETURNING id;

-- name: queue_keep
UPDATE queue
SET task_ids = (SELECT json_group_array(value) FROM json_each(queue.task_ids) WHERE key >= :keep),
    size = size - :keep
WHERE id = :id;

-- name: queue_claim
UPDATE queue SET invisible_until_ms = :until, receives = receives + 1, worker = :worker
WHERE id IN (SELECT value FROM json_each(:ids))
RETURNING id, task_ids, receives, attempt;

-- name: message_tasks
-- What a message needs from its task (immutable columns: read outside the write lock).
SELECT id, idempotency_key, task, payload, trigger_ms FROM tasks
WHERE id IN (SELECT value FROM json_each(:ids));

-- name: queue_ack_whole
-- Settles envelopes whose every message is settled (the common case: one statement).
DELETE FROM queue WHERE id IN (
  SELECT q.id FROM json_each(:ids) i
  JOIN json_each(:receives) r ON r.key = i.key
  JOIN json_each(:sizes) s ON s.key = i.key
  JOIN queue q ON q.id = i.value AND q.receives = r.value AND q.size = s.value
)
RETURNING id, receives;

-- name: queue_release
-- A delivery given back unstarted: visible again, its receive uncounted (if still the latest).
UPDATE queue SET receives = receives - 1, invisible_until_ms = 0, worker = NULL
WHERE id = :id AND receives = :receives;

-- name: queue_envelope
SELECT task_ids FROM queue WHERE id = :id AND receives = :receives;

-- name: queue_delete
DELETE FROM queue WHERE id = :id;

-- name: queue_shrink
UPDATE queue SET task_ids = :ids, size = :size WHERE id = :id;

-- name: outbox_visible
-- With a Redis queue the queue table is the outbox: the visible envelopes to publish.
SELECT id, task_ids, attempt FROM queue WHERE invisible_until_ms <= :now ORDER BY id LIMIT :limit;

-- name: outbox_delete
DELETE FROM queue WHERE id IN (SELECT value FROM json_each(:ids));

-- name: execution_insert
-- :rows is a JSON array of [task, message, receive, attempt, end_ms, outcome, error, start_ms].
INSERT INTO executions
  (task_id, message_id, receive, worker, attempt, start_ms, end_ms, outcome, error)
SELECT value ->> 0, value ->> 1, value ->> 2, :worker, value ->> 3, value ->> 7, value ->> 4,
  value ->> 5, value ->> 6
FROM json_each(:rows);

-- name: batch_start
-- A worker batch marks its tasks DONE before running them, each only while still DISPATCHED
-- at the attempt its message carries (one statement per attempt number, :before = attempts
-- so far); a message whose task is not returned is stale and runs nothing. Copies (epoch
-- NULL) are not marked.
UPDATE tasks SET status = 'DONE', attempts = attempts + 1
WHERE id IN (SELECT value FROM json_each(:ids)) AND attempts = :before
  AND status = 'DISPATCHED' AND epoch IS NOT NULL
RETURNING id, attempts;

-- name: batch_copies
-- (a copy an operator cancelled runs no more: cronlab task cancel)
SELECT id FROM tasks WHERE id IN (SELECT value FROM json_each(:ids)) AND epoch IS NULL
  AND status != 'SKIPPED';

-- name: task_finished
-- When an occurrence's run finished (schedules_finished reads it).
UPDATE tasks SET finished_ms = :end WHERE id = :id;

-- name: task_done
UPDATE tasks SET status = 'DONE', attempts = attempts + 1
WHERE id IN (SELECT value FROM json_each(:ids));

-- name: task_error
-- A run that raised: its task waits for the retry (batch_start counted the attempt).
UPDATE tasks SET status = 'DISPATCHED', last_error = :error WHERE id = :id;

-- name: task_failed
UPDATE tasks SET status = 'FAILED', last_error = :error WHERE id = :id;

-- name: task_get
SELECT id, idempotency_key, task, payload, trigger_ms, attempts, status, epoch, last_error
FROM tasks WHERE id = :id;

-- name: task_by_key
SELECT id, idempotency_key, task, payload, trigger_ms, attempts, status, epoch, last_error
FROM tasks WHERE idempotency_key = :key;

-- name: forget_exited_process
DELETE FROM processes WHERE role = :role AND idx = :index AND exited_ms IS NOT NULL;

-- name: register_process
INSERT INTO processes (role, idx, pid, owner, started_ms, place)
VALUES (:role, :index, :pid, :owner, :started_ms, :place)
ON CONFLICT (owner) DO UPDATE SET started_ms = excluded.started_ms, exited_ms = NULL,
  place = excluded.place;

-- name: process_exited
UPDATE processes SET exited_ms = :now WHERE owner = :owner;

-- name: record_event
INSERT INTO events (kind, at_ms, holder, epoch, pid, detail)
VALUES (:kind, :at_ms, :holder, :epoch, :pid, :detail);

-- name: record_sample
INSERT INTO samples (at_ms, depth) VALUES (:at, :depth);

-- name: report_due
SELECT count(*), min(trigger_ms) FROM tasks WHERE trigger_ms <= :now;

-- name: report_runs
-- A run is an execution that completed (ok, noop) or gave up (failed); runs beyond the first
-- per task are duplicates. A delivery abandoned by a dead worker committed nothing (not a
-- run, nor a duplicate: its effects in ctx.tx rolled back), but its message came back received
-- once more: receive - 1 counts those (redelivered), on every record (the one that came back
-- is recorded as its lost attempt, LostRun; a retry is a new message, received from 1 again).
SELECT
  coalesce(sum(outcome IN ('ok', 'noop')), 0),
  coalesce(sum(outcome IN ('ok', 'noop', 'failed')), 0)
    - count(DISTINCT CASE WHEN outcome IN ('ok', 'noop', 'failed') THEN task_id END),
  max(CASE WHEN outcome IN ('ok', 'noop') THEN end_ms END),
  coalesce(sum(max(receive - 1, 0)), 0)
FROM executions;

-- name: report_lateness_at
SELECT dispatched_ms - trigger_ms AS late FROM tasks WHERE dispatched_ms IS NOT NULL
ORDER BY late LIMIT 1 OFFSET :k;

-- name: schedule_get
SELECT name, cron, tz, task, payload, catchup, catchup_window_ms, overlap, paused,
  alert_after_ms, alert_on_failures, next_fire_ms, last_fire_ms, last_reason, app, paused_note,
  missed, skipped
FROM schedules WHERE name = :name;

-- name: schedule_get_locked
SELECT name, cron, tz, task, payload, catchup, catchup_window_ms, overlap, paused,
  alert_after_ms, alert_on_failures, next_fire_ms, last_fire_ms, last_reason, app, paused_note,
  missed, skipped
FROM schedules WHERE name = :name;

-- name: schedule_upsert
-- (paused is the operator's: redeploying an app does not resume a paused schedule)
INSERT INTO schedules (name, cron, tz, task, payload, catchup, catchup_window_ms, overlap,
  paused, app, alert_after_ms, alert_on_failures)
VALUES (:name, :cron, :tz, :task, :payload, :catchup, :catchup_window_ms, :overlap, :paused, :app,
  :alert_after_ms, :alert_on_failures)
ON CONFLICT (name) DO UPDATE SET cron = excluded.cron, tz = excluded.tz,
  task = excluded.task, payload = excluded.payload, catchup = excluded.catchup,
  catchup_window_ms = excluded.catchup_window_ms, overlap = excluded.overlap,
  alert_after_ms = excluded.alert_after_ms, alert_on_failures = excluded.alert_on_failures,
  app = coalesce(excluded.app, schedules.app);

-- name: schedule_names_of_app
SELECT name FROM schedules WHERE app = :app ORDER BY name;

-- name: schedule_set_next
-- (expected_from_ms: the first fire time an alert may expect a run of; kept when :expect is NULL)
UPDATE schedules SET next_fire_ms = :next,
  expected_from_ms = coalesce(:expect, expected_from_ms)
WHERE name = :name;

-- name: schedule_set_paused
UPDATE schedules SET paused = :paused WHERE name = :name AND paused != :paused;

-- name: schedule_delete
DELETE FROM schedules WHERE name = :name;

-- name: schedule_drop_pending
-- Only occurrences still to come: one already due stays and is planned as it is dispatched
-- (run, or recorded SKIPPED as paused or removed); one-off `trigger` runs and history stay.
DELETE FROM tasks WHERE schedule = :name AND status = 'PENDING'
  AND idempotency_key LIKE 'schedule:%' AND trigger_ms > :now;

-- name: schedule_fired
UPDATE schedules
SET last_fire_ms = max(coalesce(last_fire_ms, :fire), :fire), next_fire_ms = :next,
    last_reason = coalesce(:reason, last_reason), missed = missed + :missed,
    skipped = skipped + :skipped
WHERE name = :name;

-- name: schedule_last_outcome
SELECT status FROM tasks WHERE schedule = :name AND status != 'PENDING'
ORDER BY trigger_ms DESC, id DESC LIMIT 1;

-- name: task_skip
UPDATE tasks SET status = 'SKIPPED', last_error = :reason WHERE id = :id;

-- name: reconcile_candidates
-- Leader-dispatched tasks (epoch set) that have been DISPATCHED since before :before.
SELECT id, attempts FROM tasks
WHERE status = 'DISPATCHED' AND epoch IS NOT NULL AND dispatched_ms < :before
ORDER BY dispatched_ms, id LIMIT :limit;

-- name: reconcile_touch
UPDATE tasks SET dispatched_ms = :now WHERE id IN (SELECT value FROM json_each(:ids));

-- name: pending_due
SELECT count(*) FROM tasks WHERE status = 'PENDING' AND trigger_ms <= :now;

-- name: claim_held
-- A batch read before it is written (the two-phase dispatch: `--fencing off`, or one a chaos
-- pause caught in between): with :guard 1 only the rows still PENDING, else every one of them.
UPDATE tasks SET status = 'DISPATCHED', epoch = :epoch, dispatched_ms = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND (status = 'PENDING' OR :guard = 0)
RETURNING id, idempotency_key, attempts, trigger_ms;

-- name: pause_request
SELECT at_ms, detail FROM events WHERE kind = 'pause_request' AND holder = :owner
  AND at_ms > :since
ORDER BY at_ms DESC LIMIT 1;

-- name: report_stuck
-- DISPATCHED with no message left anywhere in the queue: nothing will run them (but a reconcile).
SELECT count(*) FROM tasks WHERE status = 'DISPATCHED'
  AND id NOT IN (SELECT j.value FROM queue, json_each(queue.task_ids) j);

-- The checker (`cronlab check`, lab/verdict.py): each row a task key and how many it counts.
-- name: check_lost
SELECT idempotency_key, 1 FROM tasks
WHERE trigger_ms <= :now AND status IN ('MISSED', 'FAILED') ORDER BY trigger_ms, id;

-- name: check_lost_final
SELECT idempotency_key, 1 FROM tasks
WHERE trigger_ms <= :now AND status != 'DONE' AND status != 'SKIPPED' ORDER BY trigger_ms, id;

-- name: check_duplicated
SELECT t.idempotency_key, count(*) - 1 FROM executions e JOIN tasks t ON t.id = e.task_id
WHERE e.outcome IN ('ok', 'noop') AND e.start_ms <= :now
GROUP BY t.id, t.idempotency_key HAVING count(*) > 1 ORDER BY t.id;

-- name: check_unexpected
SELECT t.idempotency_key, count(*) FROM executions e JOIN tasks t ON t.id = e.task_id
WHERE e.outcome IN ('ok', 'noop') AND e.start_ms < t.trigger_ms AND e.start_ms <= :now
GROUP BY t.id, t.idempotency_key ORDER BY t.id;

-- name: check_stuck
SELECT idempotency_key, 1 FROM tasks WHERE status = 'DISPATCHED'
  AND id NOT IN (SELECT j.value FROM queue, json_each(queue.task_ids) j)
ORDER BY id;

-- name: check_first_effects
SELECT t.idempotency_key, t.trigger_ms, min(e.end_ms) AS first_end
FROM executions e JOIN tasks t ON t.id = e.task_id
WHERE e.outcome IN ('ok', 'noop') GROUP BY t.id, t.idempotency_key, t.trigger_ms
ORDER BY first_end, t.id;

-- name: next_due
SELECT min(trigger_ms) FROM tasks WHERE status = 'PENDING' AND trigger_ms > :after;

-- name: schedules_get_many
-- schedule_get's columns for every schedule named in :names (a JSON array).
SELECT name, cron, tz, task, payload, catchup, catchup_window_ms, overlap, paused,
  alert_after_ms, alert_on_failures, next_fire_ms, last_fire_ms, last_reason, app, paused_note,
  missed, skipped
FROM schedules WHERE name IN (SELECT value FROM json_each(:names));

-- name: tasks_with_keys
-- Which of the idempotency keys in the JSON array :keys have a task, with its task name and
-- arguments (a planned occurrence's backfill twin; a defer_many's keys taken by others).
SELECT idempotency_key, task, payload FROM tasks
WHERE idempotency_key IN (SELECT value FROM json_each(:keys));

-- name: schedules_finished
-- The runs of the schedules in the names list that finished after the first fire time of a
-- batch (each row's finished_ms: when its run committed), on the partial index tasks_finished.
SELECT schedule, trigger_ms, finished_ms FROM tasks
WHERE schedule IN (SELECT value FROM json_each(:names)) AND finished_ms > :after;

-- name: schedules_running
-- The DISPATCHED tasks of the schedules in :names dispatched since :since (an older one no
-- longer counts as running), for a batch of occurrences at once.
SELECT schedule, id, trigger_ms FROM tasks
WHERE schedule IN (SELECT value FROM json_each(:names)) AND status = 'DISPATCHED'
  AND dispatched_ms >= :since;
