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
-- The overlap check and `schedule list` read one schedule's tasks; invoices (schedule NULL)
-- never enter this index, so the bulk insert path pays nothing for it.
CREATE INDEX tasks_schedule ON tasks (schedule, trigger_ms) WHERE schedule IS NOT NULL;
