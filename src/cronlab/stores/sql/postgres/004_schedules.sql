-- Recurring schedules (SQLite's 005_schedules.sql). The next occurrence waits as a PENDING task
-- keyed `schedule:NAME:FIRE_MS` (tasks.schedule = name); last_reason: why the newest skip happened.
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
CREATE INDEX tasks_schedule ON tasks (schedule, trigger_ms) WHERE schedule IS NOT NULL;
