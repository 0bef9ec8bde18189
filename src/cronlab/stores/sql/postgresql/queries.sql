-- Named queries of the PostgreSQL dialect: the SQLite file's names and parameters (and its
-- comments), bound as %(name)s; id lists arrive as array literals, row sets as JSON arrays.

-- name: tables
-- The tables of cronlab's schema ('ours'), and of the connection's current schema ('here'),
-- where a store of cronlab before 0.3 kept them.
SELECT 'ours', tablename FROM pg_tables WHERE schemaname = %(schema)s
UNION ALL
SELECT 'here', tablename FROM pg_tables
WHERE schemaname = current_schema() AND schemaname != %(schema)s;

-- name: schema_exists
SELECT 1 FROM pg_namespace WHERE nspname = %(schema)s;

-- name: migrate_lock
-- Replicas starting together migrate one at a time.
SELECT pg_advisory_xact_lock(7243001);

-- name: server_ms
SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint;

-- name: add_tasks_tmp
CREATE TEMP TABLE IF NOT EXISTS add_tasks_tmp (
  idempotency_key TEXT, task TEXT, payload TEXT, trigger_ms BIGINT, schedule TEXT
) ON COMMIT DELETE ROWS;

-- name: add_tasks_copy
COPY add_tasks_tmp (idempotency_key, task, payload, trigger_ms, schedule) FROM STDIN;

-- name: add_tasks_from_tmp
INSERT INTO tasks (idempotency_key, task, payload, trigger_ms, schedule)
SELECT idempotency_key, task, payload, trigger_ms, schedule FROM add_tasks_tmp
ON CONFLICT (idempotency_key) DO NOTHING;

-- name: add_tasks_truncate
TRUNCATE add_tasks_tmp;

-- name: add_tasks_unnest
-- A few tasks in one statement (one round trip; the COPY path takes four, and its TRUNCATE of
-- the temporary table costs the server more than the insert): rows in the arrays' order.
INSERT INTO tasks (idempotency_key, task, payload, trigger_ms, schedule)
SELECT * FROM unnest(%(keys)s::text[], %(tasks)s::text[], %(payloads)s::text[],
  %(triggers)s::bigint[], %(schedules)s::text[])
ON CONFLICT (idempotency_key) DO NOTHING;

-- name: add_one_at_once
-- add_task, the holder's read (task_by_key) and the due channel's NOTIFY as one statement, in
-- autocommit (one round trip a defer instead of five): (true, the row) when it went in;
-- (false, the holder) when the key was taken by a task this statement's snapshot sees; no
-- row when it was taken by one it does not (committed since, or deleted by the retention).
WITH added AS (
  INSERT INTO tasks (idempotency_key, task, payload, trigger_ms, schedule)
  VALUES (%(key)s, %(task)s, %(payload)s, %(trigger)s, %(schedule)s)
  ON CONFLICT (idempotency_key) DO NOTHING
  RETURNING id, idempotency_key, task, payload, trigger_ms, attempts, status, epoch, last_error
), woken AS (
  SELECT pg_notify('cronlab_due', '') FROM added
)
SELECT true, a.*, (SELECT count(*) FROM woken) FROM added a
UNION ALL
SELECT false, t.id, t.idempotency_key, t.task, t.payload, t.trigger_ms, t.attempts, t.status,
  t.epoch, t.last_error, 0
FROM tasks t WHERE t.idempotency_key = %(key)s AND NOT EXISTS (SELECT 1 FROM added);

-- name: add_task
INSERT INTO tasks (idempotency_key, task, payload, trigger_ms, schedule)
VALUES (%(idempotency_key)s, %(task)s, %(payload)s, %(trigger_ms)s, %(schedule)s)
ON CONFLICT (idempotency_key) DO NOTHING;

-- name: lease_read_locked
-- A dispatch's fencing check: the row stays as read until the dispatch commits.
SELECT holder, epoch, expires_ms FROM lease WHERE name = 'scheduler' FOR SHARE;

-- name: lease_cas
UPDATE lease
SET epoch = CASE WHEN holder = %(owner)s AND expires_ms > %(now)s THEN epoch ELSE epoch + 1 END,
    holder = %(owner)s,
    expires_ms = %(now)s + %(ttl)s
WHERE name = 'scheduler' AND (holder IS NULL OR expires_ms <= %(now)s OR holder = %(owner)s)
RETURNING holder, epoch, expires_ms;

-- name: lease_release
UPDATE lease SET holder = NULL, expires_ms = 0 WHERE name = 'scheduler' AND holder = %(owner)s;

-- name: fence_lock_all
-- Every fence row, in one order: an operator's change of schedules waits for a dispatch or
-- a retention batch under way, and they for it (schedule_methods.changing).
SELECT name FROM fence ORDER BY name FOR UPDATE;

-- name: fence_lock
-- One fence per election kind (:kind 'lease' or 'epoch'): an etcd revision never fences
-- the SQL lease's epochs, nor the reverse.
-- Serialises dispatches: a second leader's dispatch waits here and then sees the raised epoch.
SELECT max_epoch FROM fence WHERE name = %(kind)s FOR UPDATE;

-- name: fence_raise
UPDATE fence SET max_epoch = %(epoch)s WHERE name = %(kind)s AND max_epoch < %(epoch)s;

-- name: fence_at_once
-- fence_lock, lease_read_locked and fence_raise as one statement, with the store's clock read
-- once both rows are locked (one round trip instead of four): the fence row raised to
-- %(epoch)s if lower — its max_epoch after that is above %(epoch)s only if it was before, so
-- the check (SqlLease.checked) reads it, and a fenced dispatch's rollback undoes the write.
WITH raised AS (
  UPDATE fence SET max_epoch = greatest(max_epoch, %(epoch)s) WHERE name = %(kind)s
  RETURNING max_epoch
), held AS (
  SELECT holder, epoch, expires_ms FROM lease WHERE name = 'scheduler' FOR SHARE
)
SELECT r.max_epoch, h.holder, h.epoch, h.expires_ms,
  coalesce(%(now)s::bigint, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
FROM raised r, held h;

-- name: claim_due
WITH due AS (
  DELETE FROM pending WHERE (trigger_ms, task_id) IN (
    SELECT trigger_ms, task_id FROM pending WHERE trigger_ms <= %(now)s
      AND (trigger_ms, task_id) > (%(after_ms)s, %(after_id)s)
    ORDER BY trigger_ms, task_id LIMIT %(limit)s FOR UPDATE SKIP LOCKED
  ) RETURNING task_id
)
UPDATE tasks t SET status = 'DISPATCHED', epoch = %(epoch)s, dispatched_ms = %(now)s
WHERE t.id = ANY(ARRAY(SELECT task_id FROM due))  -- by key: the CTE has no estimate
  AND t.status = 'PENDING'  -- a stray pending row (an older writer's) never re-dispatches
RETURNING t.id, t.idempotency_key, t.attempts, t.trigger_ms;

-- name: enqueue
-- Tasks (ids, attempts so far) → envelopes of %(envelope)s at most, one attempt number each.
WITH given AS (
  SELECT id, attempts + 1 AS attempt, n
  FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) WITH ORDINALITY AS g(id, attempts, n)
), chunked AS (
  SELECT id, attempt, n,
    (row_number() OVER (PARTITION BY attempt ORDER BY n) - 1) / %(envelope)s AS chunk
  FROM given
)
INSERT INTO queue (task_ids, size, attempt, enqueued_ms, invisible_until_ms)
SELECT array_agg(id ORDER BY n), count(*), attempt, %(now)s, %(visible)s
FROM chunked GROUP BY attempt, chunk ORDER BY attempt, chunk;

-- name: count_dispatched
UPDATE counters SET value = value + %(n)s WHERE name = 'dispatched';

-- name: enqueue_dispatched
-- enqueue (visible at once), count_dispatched and the queued channel's NOTIFY as one statement:
-- one round trip a dispatch instead of three.
WITH given AS (
  SELECT id, attempts + 1 AS attempt, n
  FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) WITH ORDINALITY AS g(id, attempts, n)
), chunked AS (
  SELECT id, attempt, n,
    (row_number() OVER (PARTITION BY attempt ORDER BY n) - 1) / %(envelope)s AS chunk
  FROM given
), queued AS (
  INSERT INTO queue (task_ids, size, attempt, enqueued_ms, invisible_until_ms)
  SELECT array_agg(id ORDER BY n), count(*), attempt, %(now)s, 0
  FROM chunked GROUP BY attempt, chunk ORDER BY attempt, chunk
), counted AS (
  UPDATE counters SET value = value + %(n)s WHERE name = 'dispatched'
)
SELECT pg_notify('cronlab_queued', '');

-- name: read_due
SELECT t.id, t.idempotency_key, t.task, t.payload, t.trigger_ms, t.attempts
FROM pending p JOIN tasks t ON t.id = p.task_id
WHERE p.trigger_ms <= %(now)s ORDER BY p.trigger_ms, p.task_id LIMIT %(limit)s;

-- name: read_copied
SELECT t.id, t.idempotency_key, t.task, t.payload, t.trigger_ms, t.attempts
FROM copied c JOIN tasks t ON t.id = c.task_id
WHERE c.dispatched_ms > %(since)s AND t.trigger_ms > %(since)s AND t.trigger_ms <= %(now)s;

-- name: mark_copied
-- The first copy takes a task off the pending list and notes when it was copied.
WITH gone AS (
  DELETE FROM pending p USING tasks t
  WHERE t.id = ANY(%(ids)s::bigint[]) AND p.trigger_ms = t.trigger_ms AND p.task_id = t.id
  RETURNING p.task_id
), marked AS (
  UPDATE tasks SET status = 'DISPATCHED', dispatched_ms = coalesce(dispatched_ms, %(now)s)
  WHERE id = ANY(ARRAY(SELECT task_id FROM gone)) RETURNING id
)
INSERT INTO copied (dispatched_ms, task_id) SELECT %(now)s, id FROM marked
ON CONFLICT DO NOTHING;

-- name: mark_missed
WITH gone AS (DELETE FROM pending WHERE trigger_ms < %(before)s RETURNING task_id)
UPDATE tasks SET status = 'MISSED' WHERE id = ANY(ARRAY(SELECT task_id FROM gone));

-- name: queue_any_visible
-- (by the server's clock when %(now)s is NULL)
SELECT 1 FROM queue WHERE invisible_until_ms
  <= coalesce(%(now)s::bigint, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
LIMIT 1;

-- name: claim_at_once
-- A claim as one statement in a transaction of its own (one round trip; SQLite's claim takes
-- a transaction of several): the visible envelopes in queue order while they fit
-- %(limit)s whole, and the head of the next one to fill it, split off into an envelope of
-- its own (the rest keeps its place), each marked received for %(visibility)s ms, with its tasks'
-- columns (message_tasks; NULL: the task is gone). Visibility is judged by %(now)s, or by
-- the server's clock when it is NULL. Its commit does not wait for the disk: a claim that a
-- crash of the server loses had no batch committed after it (a batch's commit flushes the log
-- through the claim first), and its envelopes come back as they were.
-- What it splits comes from the rows it locked, never from a second read of the table: a read
-- sees the statement's snapshot, taken before a concurrent claim that split the same envelope
-- committed, while the lock (and the UPDATEs) see the envelope as that claim left it — a
-- second read handed out the messages the other claim had just taken (the contract test
-- test_concurrent_claims_that_split_envelopes_never_deliver_a_message_twice).
WITH clock AS (
  SELECT coalesce(%(now)s::bigint, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
      AS now,
    set_config('synchronous_commit', 'off', true) AS unflushed
), visible AS (
  SELECT q.id, q.size, q.task_ids, q.attempt, q.enqueued_ms, q.receives FROM queue q
  WHERE q.invisible_until_ms <= (SELECT now FROM clock)
  ORDER BY q.id LIMIT %(page)s FOR UPDATE SKIP LOCKED
), sums AS (
  SELECT v.*, sum(size) OVER (ORDER BY id) AS upto FROM visible v
), fitting AS (
  SELECT id FROM sums WHERE upto <= %(limit)s
), head AS (
  SELECT s.*, %(limit)s - (upto - size) AS take FROM sums s
  WHERE upto > %(limit)s AND upto - size < %(limit)s
), split AS (
  INSERT INTO queue (task_ids, size, attempt, enqueued_ms, invisible_until_ms, receives, worker)
  SELECT h.task_ids[:h.take], h.take, h.attempt, h.enqueued_ms,
    (SELECT now FROM clock) + %(visibility)s, h.receives + 1, %(worker)s
  FROM head h
  RETURNING id, task_ids, receives, attempt
), kept AS (
  UPDATE queue q SET task_ids = h.task_ids[h.take + 1:], size = h.size - h.take
  FROM head h WHERE q.id = h.id
), whole AS (
  UPDATE queue SET invisible_until_ms = (SELECT now FROM clock) + %(visibility)s,
    receives = receives + 1, worker = %(worker)s
  WHERE id IN (SELECT id FROM fitting)
  RETURNING id, task_ids, receives, attempt
), claimed AS (SELECT * FROM split UNION ALL SELECT * FROM whole)
SELECT c.id, c.receives, c.attempt, u.task_id, t.idempotency_key, t.task, t.payload,
  t.trigger_ms
FROM claimed c CROSS JOIN LATERAL unnest(c.task_ids) WITH ORDINALITY AS u(task_id, n)
LEFT JOIN tasks t ON t.id = u.task_id
ORDER BY c.id, u.n;

-- name: message_tasks
SELECT id, idempotency_key, task, payload, trigger_ms FROM tasks
WHERE id = ANY(%(ids)s::bigint[]);

-- name: queue_ack_whole_recording
-- execution_insert and queue_ack_whole as one statement (one round trip): the batch's
-- execution records, then the deliveries acked whole.
WITH recorded AS (
  INSERT INTO executions
    (task_id, message_id, receive, worker, attempt, start_ms, end_ms, outcome, error)
  SELECT (r ->> 0)::bigint, (r ->> 1)::bigint, (r ->> 2)::int, %(worker)s, (r ->> 3)::int,
    (r ->> 7)::bigint, (r ->> 4)::bigint, r ->> 5, r ->> 6
  FROM json_array_elements(%(rows)s::json) AS r
)
DELETE FROM queue q
USING unnest(%(ids)s::bigint[], %(receives)s::int[], %(sizes)s::int[]) AS a(id, receives, size)
WHERE q.id = a.id AND q.receives = a.receives AND q.size = a.size
RETURNING q.id, q.receives;

-- name: queue_ack_whole
DELETE FROM queue q
USING unnest(%(ids)s::bigint[], %(receives)s::int[], %(sizes)s::int[]) AS a(id, receives, size)
WHERE q.id = a.id AND q.receives = a.receives AND q.size = a.size
RETURNING q.id, q.receives;

-- name: queue_release
-- A delivery given back unstarted: visible again, its receive uncounted (if still the latest).
UPDATE queue SET receives = receives - 1, invisible_until_ms = 0, worker = NULL
WHERE id = %(id)s AND receives = %(receives)s;

-- name: queue_envelope
SELECT task_ids FROM queue WHERE id = %(id)s AND receives = %(receives)s FOR UPDATE;

-- name: queue_delete
DELETE FROM queue WHERE id = %(id)s;

-- name: queue_shrink
UPDATE queue SET task_ids = %(ids)s::bigint[], size = %(size)s WHERE id = %(id)s;

-- name: outbox_visible
SELECT id, task_ids, attempt FROM queue WHERE invisible_until_ms <= %(now)s
ORDER BY id LIMIT %(limit)s;

-- name: outbox_delete
DELETE FROM queue WHERE id = ANY(%(ids)s::bigint[]);

-- name: execution_insert
INSERT INTO executions
  (task_id, message_id, receive, worker, attempt, start_ms, end_ms, outcome, error)
SELECT (r ->> 0)::bigint, (r ->> 1)::bigint, (r ->> 2)::int, %(worker)s, (r ->> 3)::int,
  (r ->> 7)::bigint, (r ->> 4)::bigint, r ->> 5, r ->> 6
FROM json_array_elements(%(rows)s::json) AS r;

-- name: queue_hold
-- A batch's envelopes, locked while it runs: claims skip them (the visibility heartbeat).
SELECT id FROM queue WHERE id = ANY(%(ids)s::bigint[]) FOR UPDATE SKIP LOCKED;

-- name: batch_hold_start
-- queue_hold and batch_start as one statement (one round trip), for a batch whose messages all
-- carry one attempt: the tasks of the envelopes it holds are marked as batch_start marks them.
-- Rows: ('held', envelope id, 0) and ('started', task id, attempts).
WITH held AS (
  SELECT id FROM queue WHERE id = ANY(%(envelopes)s::bigint[]) FOR UPDATE SKIP LOCKED
), started AS (
  UPDATE tasks SET status = 'DONE', attempts = attempts + 1
  WHERE id = ANY(ARRAY(
      SELECT m.task_id FROM unnest(%(envelope_of)s::bigint[], %(ids)s::bigint[])
        AS m(envelope, task_id)
      WHERE m.envelope IN (SELECT id FROM held)))
    AND attempts = %(before)s AND status = 'DISPATCHED' AND epoch IS NOT NULL
  RETURNING id, attempts
)
SELECT 'held', id, 0 FROM held UNION ALL SELECT 'started', id, attempts FROM started;

-- name: batch_start
UPDATE tasks SET status = 'DONE', attempts = attempts + 1
WHERE id = ANY(%(ids)s::bigint[]) AND attempts = %(before)s
  AND status = 'DISPATCHED' AND epoch IS NOT NULL
RETURNING id, attempts;

-- name: batch_copies
SELECT id FROM tasks WHERE id = ANY(%(ids)s::bigint[]) AND epoch IS NULL
  AND status != 'SKIPPED';

-- name: task_finished
-- When an occurrence's run finished (schedules_finished reads it).
UPDATE tasks SET finished_ms = %(end)s WHERE id = %(id)s;

-- name: task_done
UPDATE tasks SET status = 'DONE', attempts = attempts + 1 WHERE id = ANY(%(ids)s::bigint[]);

-- name: task_error
UPDATE tasks SET status = 'DISPATCHED', last_error = %(error)s WHERE id = %(id)s;

-- name: task_failed
UPDATE tasks SET status = 'FAILED', last_error = %(error)s WHERE id = %(id)s;

-- name: task_get
SELECT id, idempotency_key, task, payload, trigger_ms, attempts, status, epoch, last_error
FROM tasks WHERE id = %(id)s;

-- name: task_by_key
SELECT id, idempotency_key, task, payload, trigger_ms, attempts, status, epoch, last_error
FROM tasks WHERE idempotency_key = %(key)s;

-- name: forget_exited_process
DELETE FROM processes WHERE role = %(role)s AND idx = %(index)s AND exited_ms IS NOT NULL;

-- name: register_process
INSERT INTO processes (role, idx, pid, owner, started_ms, place)
VALUES (%(role)s, %(index)s, %(pid)s, %(owner)s, %(started_ms)s, %(place)s)
ON CONFLICT (owner) DO UPDATE SET started_ms = excluded.started_ms, exited_ms = NULL,
  place = excluded.place;

-- name: process_exited
UPDATE processes SET exited_ms = %(now)s WHERE owner = %(owner)s;

-- name: record_event
INSERT INTO events (kind, at_ms, holder, epoch, pid, detail)
VALUES (%(kind)s, %(at_ms)s, %(holder)s, %(epoch)s, %(pid)s, %(detail)s);

-- name: record_sample
INSERT INTO samples (at_ms, depth) VALUES (%(at)s, %(depth)s);

-- name: report_due
SELECT count(*), min(trigger_ms) FROM tasks WHERE trigger_ms <= %(now)s;

-- name: report_runs
SELECT
  count(*) FILTER (WHERE outcome IN ('ok', 'noop')),
  count(*) FILTER (WHERE outcome IN ('ok', 'noop', 'failed'))
    - count(DISTINCT task_id) FILTER (WHERE outcome IN ('ok', 'noop', 'failed')),
  max(end_ms) FILTER (WHERE outcome IN ('ok', 'noop')),
  coalesce(sum(greatest(receive - 1, 0)), 0)
FROM executions;

-- name: report_lateness_at
SELECT dispatched_ms - trigger_ms AS late FROM tasks WHERE dispatched_ms IS NOT NULL
ORDER BY late LIMIT 1 OFFSET %(k)s;

-- name: schedule_get
SELECT name, cron, tz, task, payload, catchup, catchup_window_ms, overlap, paused,
  alert_after_ms, alert_on_failures, next_fire_ms, last_fire_ms, last_reason, app, paused_note,
  missed, skipped
FROM schedules WHERE name = %(name)s;

-- name: schedule_get_locked
SELECT name, cron, tz, task, payload, catchup, catchup_window_ms, overlap, paused,
  alert_after_ms, alert_on_failures, next_fire_ms, last_fire_ms, last_reason, app, paused_note,
  missed, skipped
FROM schedules WHERE name = %(name)s FOR UPDATE;

-- name: schedule_upsert
INSERT INTO schedules (name, cron, tz, task, payload, catchup, catchup_window_ms, overlap,
  paused, app, alert_after_ms, alert_on_failures)
VALUES (%(name)s, %(cron)s, %(tz)s, %(task)s, %(payload)s, %(catchup)s,
  %(catchup_window_ms)s, %(overlap)s, %(paused)s, %(app)s, %(alert_after_ms)s,
  %(alert_on_failures)s)
ON CONFLICT (name) DO UPDATE SET cron = excluded.cron, tz = excluded.tz,
  task = excluded.task, payload = excluded.payload, catchup = excluded.catchup,
  catchup_window_ms = excluded.catchup_window_ms, overlap = excluded.overlap,
  alert_after_ms = excluded.alert_after_ms, alert_on_failures = excluded.alert_on_failures,
  app = coalesce(excluded.app, schedules.app);

-- name: schedule_names_of_app
SELECT name FROM schedules WHERE app = %(app)s ORDER BY name;

-- name: schedule_set_next
-- (expected_from_ms: the first fire time an alert may expect a run of; kept when :expect is NULL)
UPDATE schedules SET next_fire_ms = %(next)s,
  expected_from_ms = coalesce(%(expect)s, expected_from_ms)
WHERE name = %(name)s;

-- name: schedule_set_paused
UPDATE schedules SET paused = %(paused)s WHERE name = %(name)s AND paused != %(paused)s;

-- name: schedule_delete
DELETE FROM schedules WHERE name = %(name)s;

-- name: schedule_drop_pending
WITH dropped AS (
  DELETE FROM tasks WHERE schedule = %(name)s AND status = 'PENDING'
    AND idempotency_key LIKE 'schedule:%%' AND trigger_ms > %(now)s
  RETURNING id, trigger_ms
)
DELETE FROM pending p USING dropped d WHERE p.trigger_ms = d.trigger_ms AND p.task_id = d.id;

-- name: schedule_fired
UPDATE schedules
SET last_fire_ms = GREATEST(coalesce(last_fire_ms, %(fire)s), %(fire)s),
    next_fire_ms = %(next)s, last_reason = coalesce(%(reason)s, last_reason),
    missed = missed + %(missed)s, skipped = skipped + %(skipped)s
WHERE name = %(name)s;

-- name: schedules_fired
-- schedule_fired for every schedule in the JSON array %(rows)s at once (one row a schedule).
UPDATE schedules s
SET last_fire_ms = GREATEST(coalesce(s.last_fire_ms, r.fire), r.fire),
    next_fire_ms = r.next, last_reason = coalesce(r.reason, s.last_reason),
    missed = s.missed + r.missed, skipped = s.skipped + r.skipped
FROM json_to_recordset(%(rows)s::json)
  AS r(name text, fire bigint, next bigint, reason text, missed bigint, skipped bigint)
WHERE s.name = r.name;

-- name: schedule_last_outcome
SELECT status FROM tasks WHERE schedule = %(name)s AND status != 'PENDING'
ORDER BY trigger_ms DESC, id DESC LIMIT 1;

-- name: task_skip
UPDATE tasks SET status = 'SKIPPED', last_error = %(reason)s WHERE id = %(id)s;

-- name: reconcile_candidates
-- Leader-dispatched tasks (epoch set) that have been DISPATCHED since before %(before)s.
SELECT id, attempts FROM tasks
WHERE status = 'DISPATCHED' AND epoch IS NOT NULL AND dispatched_ms < %(before)s
ORDER BY dispatched_ms, id LIMIT %(limit)s;

-- name: reconcile_touch
UPDATE tasks SET dispatched_ms = %(now)s WHERE id = ANY(%(ids)s::bigint[]);

-- name: pending_due
SELECT count(*) FROM pending WHERE trigger_ms <= %(now)s;

-- name: claim_held
-- A batch read before it is written (see SQLite's): off the pending list, and marked.
WITH gone AS (
  DELETE FROM pending p USING tasks t
  WHERE t.id = ANY(%(ids)s::bigint[]) AND p.trigger_ms = t.trigger_ms AND p.task_id = t.id
)
UPDATE tasks SET status = 'DISPATCHED', epoch = %(epoch)s, dispatched_ms = %(now)s
WHERE id = ANY(%(ids)s::bigint[]) AND (status = 'PENDING' OR %(guard)s = 0)
RETURNING id, idempotency_key, attempts, trigger_ms;

-- name: pause_request
SELECT at_ms, detail FROM events WHERE kind = 'pause_request' AND holder = %(owner)s
  AND at_ms > %(since)s
ORDER BY at_ms DESC LIMIT 1;

-- name: report_stuck
SELECT count(*) FROM tasks WHERE status = 'DISPATCHED'
  AND id NOT IN (SELECT unnest(task_ids) FROM queue);

-- The checker (`cronlab check`, lab/verdict.py): each row a task key and how many it counts.
-- name: check_lost
SELECT idempotency_key, 1 FROM tasks
WHERE trigger_ms <= %(now)s AND status IN ('MISSED', 'FAILED') ORDER BY trigger_ms, id;

-- name: check_lost_final
SELECT idempotency_key, 1 FROM tasks
WHERE trigger_ms <= %(now)s AND status != 'DONE' AND status != 'SKIPPED' ORDER BY trigger_ms, id;

-- name: check_duplicated
SELECT t.idempotency_key, count(*) - 1 FROM executions e JOIN tasks t ON t.id = e.task_id
WHERE e.outcome IN ('ok', 'noop') AND e.start_ms <= %(now)s
GROUP BY t.id, t.idempotency_key HAVING count(*) > 1 ORDER BY t.id;

-- name: check_unexpected
SELECT t.idempotency_key, count(*) FROM executions e JOIN tasks t ON t.id = e.task_id
WHERE e.outcome IN ('ok', 'noop') AND e.start_ms < t.trigger_ms AND e.start_ms <= %(now)s
GROUP BY t.id, t.idempotency_key ORDER BY t.id;

-- name: check_stuck
SELECT idempotency_key, 1 FROM tasks WHERE status = 'DISPATCHED'
  AND id NOT IN (SELECT unnest(task_ids) FROM queue)
ORDER BY id;

-- name: check_first_effects
SELECT t.idempotency_key, t.trigger_ms, min(e.end_ms) AS first_end
FROM executions e JOIN tasks t ON t.id = e.task_id
WHERE e.outcome IN ('ok', 'noop') GROUP BY t.id, t.idempotency_key, t.trigger_ms
ORDER BY first_end, t.id;

-- name: next_due
-- (from the range after :after: past the dead entries of rows claimed since the last VACUUM)
SELECT min(trigger_ms) FROM pending WHERE trigger_ms > %(after)s;

-- name: schedules_get_many
-- schedule_get's columns for every schedule named in %(names)s (a text array).
SELECT name, cron, tz, task, payload, catchup, catchup_window_ms, overlap, paused,
  alert_after_ms, alert_on_failures, next_fire_ms, last_fire_ms, last_reason, app, paused_note,
  missed, skipped
FROM schedules WHERE name = ANY(%(names)s::text[]);

-- name: tasks_with_keys
-- Which of the idempotency keys in %(keys)s have a task, with its task name and arguments
-- (a planned occurrence's backfill twin; a defer_many's keys taken by other arguments).
SELECT idempotency_key, task, payload FROM tasks
WHERE idempotency_key = ANY(%(keys)s::text[]);

-- name: schedules_finished
-- The runs of the schedules in the names list that finished after the first fire time of a
-- batch (each row's finished_ms: when its run committed), on the partial index tasks_finished.
SELECT schedule, trigger_ms, finished_ms FROM tasks
WHERE schedule = ANY(%(names)s::text[]) AND finished_ms > %(after)s;

-- name: schedules_running
-- The DISPATCHED tasks of the schedules in %(names)s dispatched since %(since)s (an older one
-- no longer counts as running), for a batch of occurrences at once.
SELECT schedule, id, trigger_ms FROM tasks
WHERE schedule = ANY(%(names)s::text[]) AND status = 'DISPATCHED'
  AND dispatched_ms >= %(since)s;
