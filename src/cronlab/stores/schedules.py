"""What every store does with schedules inside its dispatch transaction (backend-neutral).

A store claims due tasks, then hands the claimed occurrences (keys ``schedule:NAME:FIRE_MS``)
to :func:`plan_claimed` with a small view of its open transaction (:class:`Rows`). The planner
decides each occurrence with the pure policy (``plan_dispatch``, ``overlap_decision``), marks
the ones that must not run SKIPPED (with the reason), and inserts the caught-up and the next
occurrences — all in the caller's fenced transaction, so a stale leader writes nothing and the
unique key makes a second materialisation a no-op. One-off runs (``trigger:NAME:MS`` keys) and
ordinary tasks pass through untouched.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from cronlab.core import policy
from cronlab.core.policy import Schedule
from cronlab.ports import NewTask, ScheduleInfo

OCCURRENCE_PREFIX = "schedule:"
TRIGGER_PREFIX = "trigger:"
COLUMNS = (
    "name",
    "cron",
    "tz",
    "handler",
    "payload",
    "catchup",
    "catchup_window_ms",
    "overlap",
    "paused",
)


class Rows(Protocol):
    """A store's open dispatch transaction, as the planner needs it."""

    def schedule_info(self, name: str) -> ScheduleInfo | None:
        """The stored schedule, or None if it was removed."""
        ...

    def running_before(self, name: str, fire_ms: int) -> bool:
        """True if a task of ``name`` triggered before ``fire_ms`` is still DISPATCHED."""
        ...

    def add_task(self, task: NewTask) -> int:
        """Insert a PENDING task; 0 if its key exists."""
        ...

    def skip(self, task_id: int, reason: str) -> None:
        """Mark the claimed task SKIPPED, keeping ``reason``."""
        ...

    def fired(self, name: str, fire_ms: int, next_fire_ms: int | None, reason: str | None) -> None:
        """Record on the schedule row that ``fire_ms`` was handled (run, or skipped: reason)."""
        ...


def occurrence(schedule: Schedule, fire_ms: int) -> NewTask:
    """The PENDING task of ``schedule``'s occurrence at ``fire_ms``."""
    return NewTask(
        idempotency_key=policy.occurrence_key(schedule.name, fire_ms),
        handler=schedule.handler,
        trigger_ms=fire_ms,
        payload=json.dumps(schedule.payload, sort_keys=True),
        schedule=schedule.name,
    )


def triggered(schedule: Schedule, now_ms: int) -> NewTask:
    """A one-off run of ``schedule`` due now (``schedule trigger``): never planned or skipped."""
    return NewTask(
        idempotency_key=f"{TRIGGER_PREFIX}{schedule.name}:{now_ms}",
        handler=schedule.handler,
        trigger_ms=now_ms,
        payload=json.dumps(schedule.payload, sort_keys=True),
        schedule=schedule.name,
    )


def plan_claimed(
    rows: Rows, claimed: Sequence[tuple[int, str]], now_ms: int
) -> tuple[set[int], int]:
    """Plan the occurrences among ``claimed`` ``(task id, key)`` pairs, oldest first.

    Returns the ids that must not run (now SKIPPED) and how many already-due occurrences were
    inserted (the caller claims those in the same transaction).
    """
    skipped: set[int] = set()
    due_added = 0
    for task_id, key in claimed:
        if not key.startswith(OCCURRENCE_PREFIX):
            continue
        name, fire_ms = policy.parse_occurrence_key(key)
        reason, added = _plan_one(rows, name, fire_ms, now_ms)
        due_added += added
        if reason is not None:
            rows.skip(task_id, reason)
            skipped.add(task_id)
    return skipped, due_added


def _plan_one(rows: Rows, name: str, fire_ms: int, now_ms: int) -> tuple[str | None, int]:
    """(why the occurrence must not run or None, due occurrences inserted)."""
    info = rows.schedule_info(name)
    if info is None or info.schedule.paused:
        return ("removed" if info is None else "paused"), 0
    s = info.schedule
    plan = policy.plan_dispatch(s, fire_ms, now_ms)
    reason = None if plan.run else f"catchup={s.catchup}"
    if reason is None and policy.overlap_decision(s, rows.running_before(name, fire_ms)) == "skip":
        reason = "overlap"
    added = sum(rows.add_task(occurrence(s, f)) for f in plan.catch_up)
    rows.add_task(occurrence(s, plan.next_fire_ms))
    rows.fired(name, fire_ms, plan.next_fire_ms, reason)
    return reason, added


def same_definition(stored: Schedule, wanted: Schedule) -> bool:
    """Equal definitions; the pause state is the operator's and not part of a deploy."""
    return dataclasses.replace(stored, paused=wanted.paused) == wanted


def to_row(schedule: Schedule) -> dict[str, Any]:
    """The schedule's stored columns (payload as JSON text, paused as 0/1)."""
    return {
        "name": schedule.name,
        "cron": schedule.cron,
        "tz": schedule.tz,
        "handler": schedule.handler,
        "payload": json.dumps(schedule.payload, sort_keys=True),
        "catchup": schedule.catchup,
        "catchup_window_ms": schedule.catchup_window_ms,
        "overlap": schedule.overlap,
        "paused": int(schedule.paused),
    }


def from_row(row: Sequence[Any] | Mapping[str, Any]) -> Schedule:
    """A stored row (``COLUMNS`` order, or by name) → a validated Schedule (JSON only, no eval)."""
    values = dict(row) if isinstance(row, Mapping) else dict(zip(COLUMNS, row, strict=False))
    return Schedule(
        name=values["name"],
        cron=values["cron"],
        tz=values["tz"],
        handler=values["handler"],
        payload=json.loads(values["payload"]),
        catchup=values["catchup"],
        catchup_window_ms=int(values["catchup_window_ms"]),
        overlap=values["overlap"],
        paused=bool(values["paused"]),
    )
