-- The SQLite schema in PostgreSQL types. Times are integer epoch milliseconds (BIGINT).
CREATE TABLE tasks (
  id BIGSERIAL PRIMARY KEY,
  idempotency_key TEXT NOT NULL UNIQUE,
  handler TEXT NOT NULL,
  payload TEXT NOT NULL DEFAULT '{}',
  trigger_ms BIGINT NOT NULL,
  status TEXT NOT NULL DEFAULT 'PENDING',
  attempts INTEGER NOT NULL DEFAULT 0,
  epoch BIGINT,
  dispatched_ms BIGINT,
  last_error TEXT,
  schedule TEXT
);
-- The leader's scan reads only due PENDING rows: O(due), whatever the future holds.
CREATE INDEX tasks_pending_due ON tasks (trigger_ms) WHERE status = 'PENDING';

CREATE TABLE lease (
  name TEXT PRIMARY KEY,
  holder TEXT,
  epoch BIGINT NOT NULL DEFAULT 0,
  expires_ms BIGINT NOT NULL DEFAULT 0
);
INSERT INTO lease (name) VALUES ('scheduler');

-- The highest epoch any dispatch carried: the fencing check for a lease kept elsewhere (etcd).
CREATE TABLE fence (name TEXT PRIMARY KEY, max_epoch BIGINT NOT NULL DEFAULT 0);
INSERT INTO fence (name) VALUES ('scheduler');

-- The store-backed queue; with a Redis queue it is the transactional outbox.
CREATE TABLE queue (
  id BIGSERIAL PRIMARY KEY,
  task_id BIGINT NOT NULL,
  idempotency_key TEXT NOT NULL,
  handler TEXT NOT NULL,
  payload TEXT NOT NULL,
  trigger_ms BIGINT NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 1,
  enqueued_ms BIGINT NOT NULL,
  invisible_until_ms BIGINT NOT NULL DEFAULT 0,
  receives INTEGER NOT NULL DEFAULT 0,
  worker TEXT
);
CREATE INDEX queue_visible ON queue (invisible_until_ms, id);

CREATE TABLE executions (
  id BIGSERIAL PRIMARY KEY,
  task_id BIGINT NOT NULL,
  message_id BIGINT NOT NULL,
  receive INTEGER NOT NULL,
  worker TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  start_ms BIGINT NOT NULL,
  end_ms BIGINT,
  outcome TEXT NOT NULL DEFAULT 'running',
  error TEXT
);

CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL DEFAULT 0);
INSERT INTO counters (name) VALUES ('dispatched');

CREATE TABLE processes (
  role TEXT NOT NULL,
  idx INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  owner TEXT NOT NULL,
  started_ms BIGINT NOT NULL,
  exited_ms BIGINT,
  PRIMARY KEY (role, idx)
);

CREATE TABLE events (
  id BIGSERIAL PRIMARY KEY,
  kind TEXT NOT NULL,
  at_ms BIGINT NOT NULL,
  holder TEXT,
  epoch BIGINT,
  pid INTEGER,
  detail TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE samples (at_ms BIGINT NOT NULL, depth BIGINT NOT NULL);
