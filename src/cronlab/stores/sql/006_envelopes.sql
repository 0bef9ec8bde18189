-- Messages travel in envelopes: a queue row carries the ids (a JSON array) of tasks enqueued
-- together with the same attempt number, so a claim, an ack or a retry writes one row per
-- envelope, not one per task. A claim takes whole envelopes and splits the last to fit its
-- limit; an ack removes its messages from their envelope; a retry moves to an envelope of its own.
CREATE TABLE queue_envelopes (
  id INTEGER PRIMARY KEY,
  task_ids TEXT NOT NULL,
  size INTEGER NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 1,
  enqueued_ms INTEGER NOT NULL,
  invisible_until_ms INTEGER NOT NULL DEFAULT 0,
  receives INTEGER NOT NULL DEFAULT 0,
  worker TEXT
);
INSERT INTO queue_envelopes
  (id, task_ids, size, attempt, enqueued_ms, invisible_until_ms, receives, worker)
SELECT id, json_array(task_id), 1, attempt, enqueued_ms, invisible_until_ms, receives, worker
FROM queue;
DROP TABLE queue;
ALTER TABLE queue_envelopes RENAME TO queue;
CREATE INDEX queue_visible ON queue (invisible_until_ms, id);
