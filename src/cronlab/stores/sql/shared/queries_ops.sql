-- Named queries of issue 16 (run history, retention, alerts, heartbeats, the console) that
-- both dialects take as they are; each dialect's queries_ops.sql holds the rest.

-- name: processes_beat
SELECT role, idx, pid, owner, started_ms, exited_ms, heartbeat_ms, place FROM processes
ORDER BY role, idx;

-- name: schedules_all
SELECT name, cron, tz, task, payload, catchup, catchup_window_ms, overlap, paused,
  alert_after_ms, alert_on_failures, next_fire_ms, last_fire_ms, last_reason, app, paused_note,
  missed, skipped, expected_from_ms
FROM schedules ORDER BY name;

-- name: alert_schedules
SELECT name, cron, tz, task, payload, catchup, catchup_window_ms, overlap, paused,
  alert_after_ms, alert_on_failures, next_fire_ms, last_fire_ms, last_reason, app, paused_note,
  missed, skipped, expected_from_ms
FROM schedules
WHERE paused = 0 AND (alert_after_ms IS NOT NULL OR alert_on_failures IS NOT NULL)
ORDER BY name;

-- name: schedule_missed
SELECT name, missed FROM schedules ORDER BY name;
