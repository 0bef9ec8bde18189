-- The engine's tables whose SQL both dialects take as it is (run before the dialect's part of
-- the same migration). Times are integer epoch milliseconds.
CREATE TABLE lease (
  name TEXT PRIMARY KEY, holder TEXT,
  epoch BIGINT NOT NULL DEFAULT 0, expires_ms BIGINT NOT NULL DEFAULT 0
);
INSERT INTO lease (name) VALUES ('scheduler');

-- The highest epoch any dispatch carried: the fencing check for a lease kept elsewhere (etcd).
CREATE TABLE fence (name TEXT PRIMARY KEY, max_epoch BIGINT NOT NULL DEFAULT 0);
INSERT INTO fence (name) VALUES ('scheduler');

CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL DEFAULT 0);
INSERT INTO counters (name) VALUES ('dispatched');

CREATE TABLE processes (
  role TEXT NOT NULL, idx INTEGER NOT NULL, pid INTEGER NOT NULL, owner TEXT NOT NULL,
  started_ms BIGINT NOT NULL, exited_ms BIGINT,
  PRIMARY KEY (role, idx)
);

CREATE TABLE samples (at_ms BIGINT NOT NULL, depth BIGINT NOT NULL);

-- Recurring schedules. The next occurrence waits as a PENDING task keyed
-- `schedule:NAME:FIRE_MS` (tasks.schedule = name); last_reason says why the newest skip happened.
CREATE TABLE schedules (
  name TEXT PRIMARY KEY, cron TEXT NOT NULL, tz TEXT NOT NULL, handler TEXT NOT NULL,
  payload TEXT NOT NULL DEFAULT '{}',
  catchup TEXT NOT NULL, catchup_window_ms BIGINT NOT NULL, overlap TEXT NOT NULL,
  paused INTEGER NOT NULL DEFAULT 0,
  last_fire_ms BIGINT, next_fire_ms BIGINT, last_reason TEXT
);
-- The overlap check and `schedule list` read one schedule's tasks (created with `tasks`).

-- A row per run of a handler (the report's and the run history's source).
CREATE TABLE executions (
  id INTEGER PRIMARY KEY, task_id BIGINT NOT NULL, message_id BIGINT NOT NULL,
  receive INTEGER NOT NULL, worker TEXT NOT NULL, attempt INTEGER NOT NULL,
  start_ms BIGINT NOT NULL, end_ms BIGINT, outcome TEXT NOT NULL DEFAULT 'running', error TEXT
);

CREATE TABLE events (
  id INTEGER PRIMARY KEY, kind TEXT NOT NULL, at_ms BIGINT NOT NULL, holder TEXT,
  epoch BIGINT, pid INTEGER, detail TEXT NOT NULL DEFAULT '{}'
);
