-- PENDING tasks are listed in a narrow table of their own, and `--election off` copies in
-- another: `tasks` then has no index on a column that a dispatch (status, epoch,
-- dispatched_ms) or a run (status, attempts) changes, and room on its pages (fillfactor), so
-- both updates are HOT: a new row version on the same page, no new index entries. Measured in
-- one process on 300,000 rows: dispatch 22 → 13 µs per task, DONE 16 → 5 µs.
CREATE TABLE pending (
  trigger_ms BIGINT NOT NULL,
  task_id BIGINT NOT NULL,
  PRIMARY KEY (trigger_ms, task_id)
);
INSERT INTO pending (trigger_ms, task_id) SELECT trigger_ms, id FROM tasks WHERE status = 'PENDING';
DROP INDEX tasks_pending_due;

CREATE TABLE copied (
  dispatched_ms BIGINT NOT NULL,
  task_id BIGINT NOT NULL,
  PRIMARY KEY (dispatched_ms, task_id)
);
INSERT INTO copied (dispatched_ms, task_id)
SELECT dispatched_ms, id FROM tasks WHERE epoch IS NULL AND dispatched_ms IS NOT NULL;
DROP INDEX tasks_copied;

ALTER TABLE tasks SET (fillfactor = 40);

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
