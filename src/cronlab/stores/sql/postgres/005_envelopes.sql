-- Messages travel in envelopes (as in the SQLite store's migration 006): a queue row carries
-- the ids of tasks enqueued together with the same attempt number; a claim reads the tasks'
-- columns from `tasks`. A claim, an ack or a retry writes one row per envelope, not per task.
CREATE TABLE queue_envelopes (
  id BIGSERIAL PRIMARY KEY,
  task_ids BIGINT[] NOT NULL,
  size INTEGER NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 1,
  enqueued_ms BIGINT NOT NULL,
  invisible_until_ms BIGINT NOT NULL DEFAULT 0,
  receives INTEGER NOT NULL DEFAULT 0,
  worker TEXT
);
INSERT INTO queue_envelopes
  (task_ids, size, attempt, enqueued_ms, invisible_until_ms, receives, worker)
SELECT ARRAY[task_id], 1, attempt, enqueued_ms, invisible_until_ms, receives, worker
FROM queue ORDER BY id;
DROP TABLE queue;
ALTER TABLE queue_envelopes RENAME TO queue;
CREATE INDEX queue_visible ON queue (invisible_until_ms, id);
