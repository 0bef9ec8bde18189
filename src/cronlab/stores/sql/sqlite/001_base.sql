-- SQLite's part of the engine's tables (shared/001_base.sql has the rest). The lab's invoices
-- table is not here: the lab's app creates it (cronlab/lab/invoices.py).
CREATE TABLE tasks (
  id INTEGER PRIMARY KEY, idempotency_key TEXT NOT NULL UNIQUE, handler TEXT NOT NULL,
  payload TEXT NOT NULL DEFAULT '{}', trigger_ms INTEGER NOT NULL,
  status TEXT NOT NULL DEFAULT 'PENDING', attempts INTEGER NOT NULL DEFAULT 0,
  epoch INTEGER, dispatched_ms INTEGER, last_error TEXT, schedule TEXT
);
-- The leader's scan reads only due PENDING rows: O(due), whatever the future holds.
CREATE INDEX tasks_pending_due ON tasks (trigger_ms) WHERE status = 'PENDING';
-- `--election off`: replicas scanning in the same second each enqueue a copy of what another
-- replica copied that second. Lease-mode rows carry an epoch, so they never enter this index.
CREATE INDEX tasks_copied ON tasks (dispatched_ms)
WHERE epoch IS NULL AND dispatched_ms IS NOT NULL;
CREATE INDEX tasks_schedule ON tasks (schedule, trigger_ms) WHERE schedule IS NOT NULL;

-- Messages travel in envelopes: a row carries the ids (a JSON array) of tasks enqueued together
-- with the same attempt number, so a claim, an ack or a retry writes one row per envelope. A
-- claim takes whole envelopes and splits the last to fit its limit; an ack removes its messages
-- from their envelope; a retry moves to an envelope of its own. With a Redis queue this table
-- is the transactional outbox.
CREATE TABLE queue (
  id INTEGER PRIMARY KEY, task_ids TEXT NOT NULL, size INTEGER NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 1, enqueued_ms INTEGER NOT NULL,
  invisible_until_ms INTEGER NOT NULL DEFAULT 0, receives INTEGER NOT NULL DEFAULT 0, worker TEXT
);
CREATE INDEX queue_visible ON queue (invisible_until_ms, id);
