-- replaces: 001_init.sql 002_invoices.sql 003_copies.sql 004_slim_queue.sql 005_schedules.sql 006_envelopes.sql
-- The engine's tables. Times are integer epoch milliseconds. (The lab's invoices table is not
-- here: the lab's app creates it, cronlab/lab/invoices.py.)
CREATE TABLE tasks (
  id INTEGER PRIMARY KEY,
  idempotency_key TEXT NOT NULL UNIQUE,
  handler TEXT NOT NULL,
  payload TEXT NOT NULL DEFAULT '{}',
  trigger_ms INTEGER NOT NULL,
  status TEXT NOT NULL DEFAULT 'PENDING',
  attempts INTEGER NOT NULL DEFAULT 0,
  epoch INTEGER,
  dispatched_ms INTEGER,
  last_error TEXT,
  schedule TEXT
);
-- The leader's scan reads only due PENDING rows: O(due), whatever the future holds.
CREATE INDEX tasks_pending_due ON tasks (trigger_ms) WHERE status = 'PENDING';
-- `--election off`: replicas scanning in the same second each enqueue a copy of what another
-- replica copied that second. Lease-mode rows carry an epoch, so they never enter this index.
CREATE INDEX tasks_copied ON tasks (dispatched_ms)
WHERE epoch IS NULL AND dispatched_ms IS NOT NULL;
-- The overlap check and `schedule list` read one schedule's tasks; ordinary tasks
-- (schedule NULL) never enter this index, so the bulk insert path pays nothing for it.
CREATE INDEX tasks_schedule ON tasks (schedule, trigger_ms) WHERE schedule IS NOT NULL;

CREATE TABLE lease (
  name TEXT PRIMARY KEY,
  holder TEXT,
  epoch INTEGER NOT NULL DEFAULT 0,
  expires_ms INTEGER NOT NULL DEFAULT 0
);
INSERT INTO lease (name) VALUES ('scheduler');

-- The highest epoch any dispatch carried: the fencing check for a lease kept elsewhere.
CREATE TABLE fence (name TEXT PRIMARY KEY, max_epoch INTEGER NOT NULL DEFAULT 0);
INSERT INTO fence (name) VALUES ('scheduler');

-- Messages travel in envelopes: a queue row carries the ids (a JSON array) of tasks enqueued
-- together with the same attempt number, so a claim, an ack or a retry writes one row per
-- envelope. A claim takes whole envelopes and splits the last to fit its limit; an ack removes
-- its messages from their envelope; a retry moves to an envelope of its own. With a Redis
-- queue this table is the transactional outbox.
CREATE TABLE queue (
  id INTEGER PRIMARY KEY,
  task_ids TEXT NOT NULL,
  size INTEGER NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 1,
  enqueued_ms INTEGER NOT NULL,
  invisible_until_ms INTEGER NOT NULL DEFAULT 0,
  receives INTEGER NOT NULL DEFAULT 0,
  worker TEXT
);
CREATE INDEX queue_visible ON queue (invisible_until_ms, id);

CREATE TABLE executions (
  id INTEGER PRIMARY KEY,
  task_id INTEGER NOT NULL,
  message_id INTEGER NOT NULL,
  receive INTEGER NOT NULL,
  worker TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  start_ms INTEGER NOT NULL,
  end_ms INTEGER,
  outcome TEXT NOT NULL DEFAULT 'running',
  error TEXT
);

CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL DEFAULT 0);
INSERT INTO counters (name) VALUES ('dispatched');

CREATE TABLE processes (
  role TEXT NOT NULL,
  idx INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  owner TEXT NOT NULL,
  started_ms INTEGER NOT NULL,
  exited_ms INTEGER,
  PRIMARY KEY (role, idx)
);

CREATE TABLE events (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  at_ms INTEGER NOT NULL,
  holder TEXT,
  epoch INTEGER,
  pid INTEGER,
  detail TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE samples (at_ms INTEGER NOT NULL, depth INTEGER NOT NULL);

-- Recurring schedules. The next occurrence waits as a PENDING task keyed
-- `schedule:NAME:FIRE_MS` (tasks.schedule = name); last_reason says why the newest skip happened.
CREATE TABLE schedules (
  name TEXT PRIMARY KEY,
  cron TEXT NOT NULL,
  tz TEXT NOT NULL,
  handler TEXT NOT NULL,
  payload TEXT NOT NULL DEFAULT '{}',
  catchup TEXT NOT NULL,
  catchup_window_ms INTEGER NOT NULL,
  overlap TEXT NOT NULL,
  paused INTEGER NOT NULL DEFAULT 0,
  last_fire_ms INTEGER,
  next_fire_ms INTEGER,
  last_reason TEXT
);
