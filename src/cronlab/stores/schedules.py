"""Schedules as stored rows and tasks: occurrence and one-off tasks, row conversions.

A schedule's next occurrence waits as a PENDING task keyed ``schedule:NAME:FIRE_MS``; the SQL
store plans each claimed occurrence with the pure policy inside its fenced dispatch
(``planning.plan``). One-off runs (``trigger:NAME:MS`` keys) are never planned; a
backfilled occurrence (``backfill:NAME:FIRE_MS``) is planned by the schedule's overlap policy
alone.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from cronlab.core import policy
from cronlab.core.policy import Schedule
from cronlab.ports import NewTask, ScheduleInfo
from cronlab.stores import rows

OCCURRENCE_PREFIX = "schedule:"
TRIGGER_PREFIX = "trigger:"
BACKFILL_PREFIX = "backfill:"
PLANNED = (OCCURRENCE_PREFIX, BACKFILL_PREFIX)  # the keys a dispatch plans
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
    "alert_after_ms",
    "alert_on_failures",
)


def occurrence(schedule: Schedule, fire_ms: int) -> NewTask:
    """The PENDING task of ``schedule``'s occurrence at ``fire_ms``."""
    return _task(schedule, policy.occurrence_key(schedule.name, fire_ms), fire_ms)


def triggered(schedule: Schedule, now_ms: int) -> NewTask:
    """A one-off run of ``schedule`` due now (``schedule trigger``): never planned or skipped."""
    return _task(schedule, f"{TRIGGER_PREFIX}{schedule.name}:{now_ms}", now_ms)


def backfilled(schedule: Schedule, fire_ms: int) -> NewTask:
    """The task that runs ``schedule``'s occurrence at ``fire_ms`` late, by an operator's
    backfill: due at its occurrence time (``ctx.scheduled_for`` is that time)."""
    return _task(schedule, f"{BACKFILL_PREFIX}{schedule.name}:{fire_ms}", fire_ms)


def _task(schedule: Schedule, key: str, due_ms: int) -> NewTask:
    """A task of ``schedule`` (its handler, its payload) keyed ``key``, due at ``due_ms``."""
    return NewTask(
        idempotency_key=key,
        handler=schedule.handler,
        trigger_ms=due_ms,
        payload=json.dumps(schedule.payload, sort_keys=True),
        schedule=schedule.name,
    )


def parse_backfill_key(key: str) -> tuple[str, int]:
    """The (schedule name, fire ms) of a ``backfill:NAME:FIRE_MS`` key."""
    return policy.parse_occurrence_key(OCCURRENCE_PREFIX + key.removeprefix(BACKFILL_PREFIX))


def same_definition(stored: Schedule, wanted: Schedule) -> bool:
    """Equal definitions; the pause state is the operator's and not part of a deploy."""
    return dataclasses.replace(stored, paused=wanted.paused) == wanted


def to_row(schedule: Schedule, app: str | None = None) -> dict[str, Any]:
    """The schedule's stored columns (payload as JSON text, paused as 0/1), declared by
    ``app`` (None: added by hand)."""
    payload = json.dumps(schedule.payload, sort_keys=True)
    row = {**dataclasses.asdict(schedule), "payload": payload, "paused": int(schedule.paused)}
    return {**row, "app": app}


def from_row(row: Sequence[Any]) -> Schedule:
    """A stored row in ``COLUMNS`` order → a validated Schedule (JSON only, no eval)."""
    values = rows.by_column(COLUMNS, row)
    values["payload"] = json.loads(values["payload"])
    values["catchup_window_ms"] = int(values["catchup_window_ms"])
    values["paused"] = bool(values["paused"])
    for name in ("alert_after_ms", "alert_on_failures"):
        values[name] = None if values[name] is None else int(values[name])
    return Schedule(**values)


def info_from_row(row: Sequence[Any]) -> ScheduleInfo:
    """A ``schedule_get`` row (the schedule's columns, then where it stands) as a value."""
    return ScheduleInfo(
        schedule=from_row(row[:11]),
        next_fire_ms=row[11],
        last_fire_ms=row[12],
        last_reason=row[13],
        app=row[14],
        paused_note=row[15],
        missed=int(row[16]),
        skipped=int(row[17]),
    )
