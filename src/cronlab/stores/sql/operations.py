"""What operators do to a running store: a schedule backfilled (``SqlSchedules`` runs it), a
task cancelled or retried (``ports.TaskControl``). Every write is one transaction."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cronlab.core import occurrences, policy
from cronlab.exceptions import ConfigError, ConflictError, NotFoundError
from cronlab.ports import MAX_TASK_ID, Backfill, TaskInfo
from cronlab.stores import rows
from cronlab.stores.sql.dialect import Conn, Dialect
from cronlab.stores.sql.part import Part

if TYPE_CHECKING:
    from cronlab.stores.sql.schedules import SqlSchedules

NOT_RUN = ("SKIPPED", "MISSED")  # an occurrence in these states is backfilled
CANCELLED = "cancelled"  # a cancelled task's reason (its last_error), as "paused" is a pause's
NOT_RUN_YET = ("PENDING", "DISPATCHED")  # what a cancel takes: not run yet, or its retry waits
TASK_INFO = tuple(f.name for f in dataclasses.fields(TaskInfo))  # task_show's columns
PASSED_OVER = 1_000  # occurrences a cancel passes over that exist already (as a redeploy)


def backfill(
    store: SqlSchedules, c: Conn, name: str, from_ms: int, to_ms: int, now_ms: int
) -> Backfill:
    """In ``c``'s transaction: a task per fire time in [from_ms, to_ms) that never ran and
    never will: before the schedule's pending occurrence (from that one on, its catch-up
    policy plans them), with no occurrence in the store (never written) or one
    that was skipped or missed, and no backfill of it. Each is planned as it is dispatched
    by the schedule's overlap policy alone (``plan_batch.plan``). A range that reaches what
    the retention deleted of the schedule's history is a ConfigError: an occurrence whose
    row is gone may have run."""
    info = store.must_exist(c, name)
    planned_from = info.next_fire_ms  # None: paused, nothing pending
    fires = occurrences.backfill_fires(info.schedule, from_ms, to_ms, now_ms)
    gone = c.execute(store.queries["schedule_history_gone"], {"name": name}).fetchone()
    if fires and gone is not None and gone[0] is not None and fires[0] <= int(gone[0]):
        raise ConfigError(
            f"backfill of {name!r}: its runs up to {_iso(int(gone[0]))} were deleted by the "
            "retention (--keep), so which of those occurrences ran is not known; "
            "backfill a range after it"
        )
    added = existing = 0
    for fire in fires:
        key = policy.occurrence_key(name, fire)
        row = c.execute(store.queries["task_by_key"], {"key": key}).fetchone()
        if (row is not None and rows.TaskRead._make(row).status not in NOT_RUN) or (
            planned_from is not None and fire >= planned_from
        ):
            existing += 1
        elif store.tasks.add(c, occurrences.backfilled(info.schedule, fire)):
            added += 1
        else:
            existing += 1
    return Backfill(added=added, existing=existing)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


class SqlTaskControl(Part):
    """``ports.TaskControl``: one task as an operator sees it, cancelled or retried; a change
    to a schedule's occurrence serialised with the leader by ``schedules``."""

    def __init__(self, db: Dialect, schedules: SqlSchedules) -> None:
        super().__init__(db)
        self.schedules = schedules

    def task_info(self, task_id: int) -> TaskInfo:
        """``TaskControl.task_info``: one task as an operator sees it."""
        args = {"id": _checked(task_id)}
        return _info(
            task_id, self.db.read(lambda c: c.execute(self.queries["task_show"], args).fetchone())
        )

    def cancel_task(self, task_id: int, now_ms: int, *, by: str) -> TaskInfo:
        """``TaskControl.cancel_task``: in one transaction, a task not run yet (or waiting for its
        retry) SKIPPED as ``cancelled``, its messages no worker holds out of the queue, and a
        schedule's next occurrence followed by the one after it."""

        def cancel(c: Conn, now: int) -> TaskInfo:
            was = _must_be(self._lock(c, task_id), NOT_RUN_YET, "cancelled")
            c.execute(self.queries["task_skip"], {"id": task_id, "reason": CANCELLED})
            for name in ("queue_unqueue_whole", "queue_unqueue_part"):
                c.execute(self.queries[name], {"id": task_id, "now": now})
            if was.status == "PENDING":
                self._go_on(c, was)
            self._record(c, "cancelled", was, now, by)
            return dataclasses.replace(was, status="SKIPPED", last_error=CANCELLED)

        # (a schedule's occurrence: serialised with the leader)
        return self.schedules.changing(now_ms, cancel)

    def retry_task(self, task_id: int, now_ms: int, *, by: str) -> TaskInfo:
        """``TaskControl.retry_task``: a FAILED task DISPATCHED again with a message at its next
        attempt — enqueued as a worker's retry is (``SqlQueue.settle``: not counted as a
        dispatch), but visible at once, whatever the workers' clocks say of the operator's."""

        def retry(c: Conn, now: int) -> TaskInfo:
            was = _must_be(self._lock(c, task_id), ("FAILED",), "retried")
            c.execute(self.queries["task_retry"], {"id": task_id})
            self.db.enqueue(c, [(task_id, was.attempts)], now, 0)
            self.db.notify(c, "queued")
            self._record(c, "retried", was, now, by, attempt=was.attempts + 1)
            return dataclasses.replace(was, status="DISPATCHED")

        return self.schedules.changing(now_ms, retry)

    def _lock(self, c: Conn, task_id: int) -> TaskInfo:
        """The task, locked for the rest of ``c``'s transaction (on PostgreSQL, taken off the
        pending list first: ``task_unlist`` says why)."""
        args = {"id": _checked(task_id)}
        if unlist := self.queries.get("task_unlist"):
            c.execute(unlist, args)
        return _info(task_id, c.execute(self.queries["task_lock"], args).fetchone())

    def _go_on(self, c: Conn, task: TaskInfo) -> None:
        """A schedule's next occurrence was cancelled: plan the one after it (and note the
        cancelled one fired, as a dispatch skipping it would), or the schedule would wait on it
        for ever. Its catch-up policy judges that one when it is due, as usual. A catch-up,
        backfill or one-off run, or a paused or removed schedule's occurrence, leads to none."""
        target = occurrences.planned_target(task.key)
        if target is None or not task.key.startswith(occurrences.OCCURRENCE_PREFIX):
            return
        name, fire_ms = target
        row = c.execute(self.queries["schedule_get_locked"], {"name": name}).fetchone()
        info = None if row is None else rows.schedule_info(row)
        if info is None or info.next_fire_ms != fire_ms:
            return
        s = info.schedule
        fires = itertools.islice(policy.fires(s, fire_ms), PASSED_OVER)
        add = self.schedules.tasks.add
        planned = next((f for f in fires if add(c, occurrences.occurrence(s, f))), None)
        if planned is None:
            raise ConflictError(f"schedule {name!r}: its next {PASSED_OVER:,} occurrences exist")
        fired = {"name": name, "fire": fire_ms, "next": planned, "reason": CANCELLED}
        c.execute(self.queries["schedule_fired"], {**fired, "missed": 0, "skipped": 0})
        self.db.notify(c, "due")

    def _record(
        self, c: Conn, kind: str, task: TaskInfo, now_ms: int, by: str, **more: Any
    ) -> None:
        """The action in the event log (the audit trail): which task, its status before, who."""
        detail = {"task": task.id, "key": task.key, "was": task.status, "by": by, **more}
        event = {"kind": kind, "at_ms": now_ms, "holder": None, "epoch": None, "pid": None}
        c.execute(self.queries["record_event"], {**event, "detail": json.dumps(detail)})


def _checked(task_id: int) -> int:
    if type(task_id) is not int or not 1 <= task_id <= MAX_TASK_ID:
        raise ConfigError(f"a task id is an integer 1..{MAX_TASK_ID}, got {task_id!r}")
    return task_id


def _info(task_id: int, row: Sequence[Any] | None) -> TaskInfo:
    if row is None:
        raise NotFoundError(f"no task with id {task_id}")
    return TaskInfo(**rows.by_column(TASK_INFO, row))


def _must_be(task: TaskInfo, statuses: Sequence[str], done: str) -> TaskInfo:
    if task.status not in statuses:
        raise ConflictError(
            f"task {task.id} is {task.status}: only a task that is {' or '.join(statuses)} "
            f"can be {done}; nothing changed"
        )
    return task
