-- replaces: 001_init.sql 002_invoices.sql 003_copies.sql 004_schedules.sql 005_envelopes.sql 006_pending_keyset.sql 007_pending_table.sql
-- The SQLite store's tables in PostgreSQL types; times are integer epoch milliseconds (BIGINT).
-- (The lab's invoices table is not here: the lab's app creates it, cronlab/lab/invoices.py.)
--
-- PENDING tasks are listed in a narrow table of their own (`pending`), and `--election off`
-- copies in another (`copied`): `tasks` then has no index on a column that a dispatch (status,
-- epoch, dispatched_ms) or a run (status, attempts) changes, and room on its pages
-- (fillfactor), so both updates are HOT: a new row version on the same page, no new index
-- entries. Measured in one process on 300,000 rows: dispatch 22 → 13 µs per task, DONE 16 → 5 µs.
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
) WITH (fillfactor = 40);
CREATE INDEX tasks_schedule ON tasks (schedule, trigger_ms) WHERE schedule IS NOT NULL;

-- The leader's scan reads only due PENDING rows: O(due), whatever the future holds. It resumes
-- after the last (trigger_ms, task_id) its previous full batch claimed, past the index entries
-- of rows already claimed that MVCC keeps until VACUUM.
CREATE TABLE pending (
  trigger_ms BIGINT NOT NULL,
  task_id BIGINT NOT NULL,
  PRIMARY KEY (trigger_ms, task_id)
);
CREATE TABLE copied (
  dispatched_ms BIGINT NOT NULL,
  task_id BIGINT NOT NULL,
  PRIMARY KEY (dispatched_ms, task_id)
);

-- Every way a task is inserted (seed, schedules, follow-ups) lists it as pending.
CREATE FUNCTION cronlab_list_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pending (trigger_ms, task_id)
  SELECT trigger_ms, id FROM new_tasks WHERE status = 'PENDING';
  RETURN NULL;
END
$$;
CREATE TRIGGER tasks_list_pending AFTER INSERT ON tasks REFERENCING NEW TABLE AS new_tasks
FOR EACH STATEMENT EXECUTE FUNCTION cronlab_list_pending();

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

-- Envelopes of task ids (see the SQLite baseline); with a Redis queue, the outbox.
CREATE TABLE queue (
  id BIGSERIAL PRIMARY KEY,
  task_ids BIGINT[] NOT NULL,
  size INTEGER NOT NULL,
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

CREATE TABLE schedules (
  name TEXT PRIMARY KEY,
  cron TEXT NOT NULL,
  tz TEXT NOT NULL,
  handler TEXT NOT NULL,
  payload TEXT NOT NULL DEFAULT '{}',
  catchup TEXT NOT NULL,
  catchup_window_ms BIGINT NOT NULL,
  overlap TEXT NOT NULL,
  paused INTEGER NOT NULL DEFAULT 0,
  last_fire_ms BIGINT,
  next_fire_ms BIGINT,
  last_reason TEXT
);
