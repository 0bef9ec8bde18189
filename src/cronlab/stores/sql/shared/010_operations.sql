-- Issue 16: what operators see and steer. Both dialects take this as it is.
-- A schedule's alert settings (NULL: none) and operator state: the note its pause was given,
-- the first fire time an alert may expect (set when it is deployed, changed or resumed), and
-- how many of its occurrences were missed (no scheduler dispatched them in time: the catch-up
-- policy dropped them) or skipped (the overlap policy: the previous run was still running).
ALTER TABLE schedules ADD COLUMN alert_after_ms BIGINT;
ALTER TABLE schedules ADD COLUMN alert_on_failures INTEGER;
ALTER TABLE schedules ADD COLUMN paused_note TEXT;
ALTER TABLE schedules ADD COLUMN expected_from_ms BIGINT;
ALTER TABLE schedules ADD COLUMN missed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE schedules ADD COLUMN skipped BIGINT NOT NULL DEFAULT 0;

-- Every scheduler and worker process writes its heartbeat every few seconds.
ALTER TABLE processes ADD COLUMN heartbeat_ms BIGINT;

-- The run history: a run's records by task, and tasks by occurrence time (newest first for
-- `cronlab runs`, oldest first for the retention). trigger_ms never changes once written, so
-- on PostgreSQL a dispatch or a run still updates the row in place (HOT).
CREATE INDEX executions_task ON executions (task_id);
CREATE INDEX tasks_trigger ON tasks (trigger_ms);

-- One row per alert condition (a schedule's late occurrence, or a streak of failed runs): the
-- unique key makes raising it a second time a no-op. The leader delivers it to the webhook,
-- retrying with backoff: delivery 'pending' (attempts so far, next_try_ms), 'delivered'
-- (delivered_ms) or 'undeliverable' (it gave up), or 'none' when no webhook was configured.
CREATE TABLE alerts (
  id INTEGER PRIMARY KEY, schedule TEXT NOT NULL, kind TEXT NOT NULL, subject TEXT NOT NULL,
  raised_ms BIGINT NOT NULL, detail TEXT NOT NULL DEFAULT '{}',
  delivery TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
  next_try_ms BIGINT NOT NULL DEFAULT 0, delivered_ms BIGINT,
  UNIQUE (schedule, kind, subject)
);
CREATE INDEX alerts_pending ON alerts (next_try_ms) WHERE delivery = 'pending';
