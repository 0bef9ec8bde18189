-- A task's id, and an envelope's, names one row for the store's whole life (AUTOINCREMENT).
-- Without it SQLite gives the next insert max(id) + 1 of the rows left, so once the retention
-- (or an ack) deleted the newest rows their ids came back: a worker that had paused holding
-- a delivery then ran its old task's handler as the new task that took the id, and its stale
-- ack could delete an envelope another worker held (cronlab verify --seed 22794). SQLite
-- cannot add AUTOINCREMENT to a table: each is made again, its rows and indexes copied.
-- (PostgreSQL's ids come from sequences, never reused: its 016 is empty.)
ALTER TABLE tasks RENAME TO cronlab_tasks_before_016;
CREATE TABLE tasks (
  id INTEGER PRIMARY KEY AUTOINCREMENT, idempotency_key TEXT NOT NULL UNIQUE,
  task TEXT NOT NULL, payload TEXT NOT NULL DEFAULT '{}', trigger_ms INTEGER NOT NULL,
  status TEXT NOT NULL DEFAULT 'PENDING', attempts INTEGER NOT NULL DEFAULT 0,
  epoch INTEGER, dispatched_ms INTEGER, last_error TEXT, schedule TEXT, finished_ms INTEGER
);
INSERT INTO tasks (id, idempotency_key, task, payload, trigger_ms, status, attempts, epoch,
  dispatched_ms, last_error, schedule, finished_ms)
SELECT id, idempotency_key, task, payload, trigger_ms, status, attempts, epoch,
  dispatched_ms, last_error, schedule, finished_ms
FROM cronlab_tasks_before_016;
DROP TABLE cronlab_tasks_before_016;
CREATE INDEX tasks_pending_due ON tasks (trigger_ms) WHERE status = 'PENDING';
CREATE INDEX tasks_copied ON tasks (dispatched_ms)
WHERE epoch IS NULL AND dispatched_ms IS NOT NULL;
CREATE INDEX tasks_schedule ON tasks (schedule, trigger_ms) WHERE schedule IS NOT NULL;
CREATE INDEX tasks_dispatched ON tasks (dispatched_ms)
WHERE status = 'DISPATCHED' AND epoch IS NOT NULL;
CREATE INDEX tasks_trigger ON tasks (trigger_ms);
CREATE INDEX tasks_finished ON tasks (schedule, finished_ms) WHERE finished_ms IS NOT NULL;

ALTER TABLE queue RENAME TO cronlab_queue_before_016;
CREATE TABLE queue (
  id INTEGER PRIMARY KEY AUTOINCREMENT, task_ids TEXT NOT NULL, size INTEGER NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 1, enqueued_ms INTEGER NOT NULL,
  invisible_until_ms INTEGER NOT NULL DEFAULT 0, receives INTEGER NOT NULL DEFAULT 0, worker TEXT
);
INSERT INTO queue (id, task_ids, size, attempt, enqueued_ms, invisible_until_ms, receives, worker)
SELECT id, task_ids, size, attempt, enqueued_ms, invisible_until_ms, receives, worker
FROM cronlab_queue_before_016;
DROP TABLE cronlab_queue_before_016;
CREATE INDEX queue_visible ON queue (invisible_until_ms, id);
