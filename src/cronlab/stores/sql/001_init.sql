-- Tasks, the lease row, fencing, the queue, executions, processes, events, samples.
-- Times are integer epoch milliseconds.
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

CREATE TABLE queue (
  id INTEGER PRIMARY KEY,
  task_id INTEGER NOT NULL,
  idempotency_key TEXT NOT NULL,
  handler TEXT NOT NULL,
  payload TEXT NOT NULL,
  trigger_ms INTEGER NOT NULL,
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
