-- One name for a task's name: the column that holds it is `task` (was `handler`, which also
-- named the callable), in the tasks and the schedules, as `NewTask.task` and `Schedule.task`
-- call it. A rename: no row is rewritten, an index or trigger on the column follows it.
ALTER TABLE tasks RENAME COLUMN handler TO task;
ALTER TABLE schedules RENAME COLUMN handler TO task;
