"""Stored rows as port values, and port values as stored rows."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from cronlab.core.policy import Schedule
from cronlab.ports import Message, ScheduleInfo, StoredTask

TaskColumns = Sequence[Any]  # (id, idempotency_key, task, payload, trigger_ms, attempts, …)
SCHEDULE = ("name", "cron", "tz", "task", "payload", "catchup", "catchup_window_ms",
            "overlap", "paused", "alert_after_ms", "alert_on_failures")  # fmt: skip
# schedule_get's columns after SCHEDULE's: where the schedule stands
STANDING = ("next_fire_ms", "last_fire_ms", "last_reason", "app", "paused_note", "missed",
            "skipped")  # fmt: skip
# schedules_all's and alert_schedules' columns: a schedule, where it stands, and since when a
# run is expected (an alert's clock)
LISTED = (*SCHEDULE, *STANDING, "expected_from_ms")


class TaskRead(NamedTuple):
    """A ``task_get`` / ``task_by_key`` row."""

    id: int
    idempotency_key: str
    task: str
    payload: str
    trigger_ms: int
    attempts: int
    status: str
    epoch: int | None
    last_error: str | None

    def value(self) -> StoredTask:
        """The row as the port's ``StoredTask``."""
        return task(self, self.status, self.epoch)


class Claimed(NamedTuple):
    """A row a dispatch claimed (``claim_due``, ``claim_held``): what it enqueues and plans."""

    id: int
    idempotency_key: str
    attempts: int
    trigger_ms: int


def claimed_in_order(found: Sequence[Sequence[Any]]) -> list[Claimed]:
    """Claimed rows as ``Claimed``, oldest trigger first (ties by id)."""
    return sorted(map(Claimed._make, found), key=lambda r: (r.trigger_ms, r.id))


def by_column(columns: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
    """``row``'s values by name: ``columns`` names them, in the query's order (a value's
    fields where the names are its fields)."""
    return dict(zip(columns, row, strict=True))


def task(r: TaskColumns, status: str, epoch: int | None) -> StoredTask:
    """One ``(id, key, task, payload, trigger_ms, attempts)`` row as a ``StoredTask``."""
    return StoredTask(
        id=r[0],
        idempotency_key=r[1],
        task=r[2],
        payload=r[3],
        trigger_ms=r[4],
        attempts=r[5],
        status=status,
        epoch=epoch,
    )


def schedule_row(schedule: Schedule, app: str | None = None) -> dict[str, Any]:
    """The schedule's stored columns (payload as JSON text, paused as 0/1), declared by
    ``app`` (None: added by hand)."""
    payload = json.dumps(schedule.payload, sort_keys=True)
    row = {**dataclasses.asdict(schedule), "payload": payload, "paused": int(schedule.paused)}
    return {**row, "app": app}


def schedule(row: Sequence[Any]) -> Schedule:
    """A stored row in ``SCHEDULE`` order → a validated Schedule (JSON only, no eval)."""
    values = by_column(SCHEDULE, row)
    values["payload"] = json.loads(values["payload"])
    values["catchup_window_ms"] = int(values["catchup_window_ms"])
    values["paused"] = bool(values["paused"])
    for name in ("alert_after_ms", "alert_on_failures"):
        values[name] = None if values[name] is None else int(values[name])
    return Schedule(**values)


def schedule_info(row: Sequence[Any]) -> ScheduleInfo:
    """A ``schedule_get`` row (``SCHEDULE``'s columns, then ``STANDING``'s) as a value."""
    standing = by_column(STANDING, row[len(SCHEDULE) :])
    standing["missed"], standing["skipped"] = int(standing["missed"]), int(standing["skipped"])
    return ScheduleInfo(schedule=schedule(row[: len(SCHEDULE)]), **standing)


# Tasks per queue envelope: a claim, an ack or a retry writes one row per envelope.
ENVELOPE = 500
# An envelope as an outbox hands it to a queue elsewhere: (id, task ids, attempt).
Envelope = tuple[int, Sequence[int], int]


class Delivered(NamedTuple):
    """A claimed envelope (``queue_claim``): its id, task ids, ``receives`` and attempt."""

    id: int
    task_ids: Sequence[int]
    receives: int
    attempt: int


class MessageTask(NamedTuple):
    """What a message carries of its task (``message_tasks``; those columns never change)."""

    id: int
    idempotency_key: str
    task: str
    payload: str
    trigger_ms: int

    def message(self, envelope: Delivered) -> Message:
        """This task's message in ``envelope``."""
        return Message(
            envelope.id,
            self.id,
            self.idempotency_key,
            self.task,
            self.payload,
            self.trigger_ms,
            envelope.receives,
            envelope.attempt,
        )


class RecentRun(NamedTuple):
    """A ``recent_runs`` row: one of a schedule's newest occurrences, with its newest run
    (the run's columns None when it has none)."""

    schedule: str
    task_id: int
    trigger_ms: int
    status: str
    last_error: str | None
    start_ms: int | None
    end_ms: int | None
    attempt: int | None
    worker: str | None
    outcome: str | None
    error: str | None


class LateMinute(NamedTuple):
    """A ``lateness_by_minute`` row: first runs' lateness in one minute of occurrence."""

    minute: int
    runs: int
    mean_ms: float
    max_ms: int
