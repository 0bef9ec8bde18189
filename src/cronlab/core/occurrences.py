"""A schedule's occurrences as tasks: their keys, one-off runs, backfills, pause notes (pure).

A schedule's next occurrence waits as a PENDING task keyed ``schedule:NAME:FIRE_MS``
(``policy.occurrence_key``): the store's unique index on the key makes a second write of it a
no-op. A dispatch plans each claimed occurrence (``core/planning.py``). One-off runs
(``trigger:NAME:MS``) are never planned; a backfilled occurrence (``backfill:NAME:FIRE_MS``)
is planned by the schedule's overlap policy alone.
"""

from __future__ import annotations

import dataclasses
import itertools
import json

from cronlab.core import policy
from cronlab.core.policy import Schedule
from cronlab.exceptions import ConfigError
from cronlab.ports import NewTask

OCCURRENCE_PREFIX = "schedule:"
TRIGGER_PREFIX = "trigger:"
BACKFILL_PREFIX = "backfill:"
PLANNED = (OCCURRENCE_PREFIX, BACKFILL_PREFIX)  # the keys a dispatch plans
RESERVED = (OCCURRENCE_PREFIX, BACKFILL_PREFIX, TRIGGER_PREFIX)
MAX_BACKFILL = 1_000  # occurrences one backfill may add
# The first instant a backfill may start at: 1000-01-01T00:00Z (what the console's document
# allows); near year 1 the calendar arithmetic leaves datetime's range.
EARLIEST_MS = -30_610_224_000_000
MAX_NOTE = 500  # characters of a pause note


def occurrence(schedule: Schedule, fire_ms: int) -> NewTask:
    """The PENDING task of ``schedule``'s occurrence at ``fire_ms``."""
    return _task(schedule, policy.occurrence_key(schedule.name, fire_ms), fire_ms)


def triggered(schedule: Schedule, now_ms: int) -> NewTask:
    """A one-off run of ``schedule`` due now (``schedule trigger``): never planned or skipped."""
    return _task(schedule, f"{TRIGGER_PREFIX}{schedule.name}:{now_ms}", now_ms)


def backfilled(schedule: Schedule, fire_ms: int) -> NewTask:
    """The task that runs ``schedule``'s occurrence at ``fire_ms`` late, by an operator's
    backfill: due at its occurrence time (``ctx.scheduled_for`` is that time)."""
    return _task(schedule, backfill_key(schedule.name, fire_ms), fire_ms)


def _task(schedule: Schedule, key: str, due_ms: int) -> NewTask:
    return NewTask(
        idempotency_key=key,
        task=schedule.task,
        trigger_ms=due_ms,
        payload=json.dumps(schedule.payload, sort_keys=True),
        schedule=schedule.name,
    )


def backfill_key(name: str, fire_ms: int) -> str:
    """The key of a backfill of schedule ``name``'s occurrence at ``fire_ms``."""
    return f"{BACKFILL_PREFIX}{name}:{fire_ms}"


def parse_backfill_key(key: str) -> tuple[str, int]:
    """The (schedule name, fire ms) of a ``backfill:NAME:FIRE_MS`` key."""
    return policy.parse_occurrence_key(OCCURRENCE_PREFIX + key.removeprefix(BACKFILL_PREFIX))


def planned_target(key: str) -> tuple[str, int] | None:
    """The (schedule name, fire ms) a dispatch plans the task keyed ``key`` as; None for any
    other task — a follow-up (``schedule:bill:…/then/…``), a trigger, a key the engine does
    not recognise — which runs as it is. Never raises: no stored row can stop a dispatch."""
    if key.startswith(BACKFILL_PREFIX):
        key = OCCURRENCE_PREFIX + key.removeprefix(BACKFILL_PREFIX)
    elif not key.startswith(OCCURRENCE_PREFIX):
        return None
    try:
        return policy.parse_occurrence_key(key)
    except ConfigError:
        return None


def is_reserved(key: str) -> bool:
    """Keys in the engine's own namespaces (occurrences, backfills, one-off triggers): a key
    a user gives may not start so, or a defer could pose as a schedule's occurrence."""
    return key.startswith(RESERVED)


def same_definition(stored: Schedule, wanted: Schedule) -> bool:
    """Equal definitions; the pause state is the operator's and not part of a deploy."""
    return dataclasses.replace(stored, paused=wanted.paused) == wanted


def backfill_fires(schedule: Schedule, from_ms: int, to_ms: int, now_ms: int) -> list[int]:
    """The schedule's fire times in [from_ms, to_ms); ConfigError, before anything is written,
    for a range that starts before ``EARLIEST_MS``, is backwards, reaches past now, or holds
    more than ``MAX_BACKFILL``."""
    if from_ms < EARLIEST_MS:
        raise ConfigError("backfill: --from must be 1000-01-01T00:00Z or later")
    if from_ms >= to_ms:
        raise ConfigError("backfill: --from must be before --to")
    if to_ms > now_ms:
        raise ConfigError("backfill: --to is in the future (a backfill runs occurrences past)")
    fires = list(itertools.islice(policy.fires(schedule, from_ms - 1), MAX_BACKFILL + 1))
    inside = [f for f in fires if f < to_ms]
    if len(inside) > MAX_BACKFILL:
        raise ConfigError(
            f"backfill of {schedule.name!r}: the range holds more than {MAX_BACKFILL:,} "
            "occurrences; backfill a shorter one"
        )
    return inside


def check_note(note: str | None) -> str | None:
    """A pause note as stored: stripped, None when empty; ConfigError when too long."""
    text = (note or "").strip()
    if len(text) > MAX_NOTE:
        raise ConfigError(f"a pause note is at most {MAX_NOTE} characters, got {len(text):,}")
    return text or None


def unrun_outcome(status: str, reason: str | None) -> str:
    """The run-history outcome of an occurrence with no run record: ``skipped`` or ``missed``
    (a catch-up policy's skip is a missed run), ``due`` (PENDING) or ``queued``."""
    if status == "SKIPPED":
        return "missed" if (reason or "").startswith("catchup=") else "skipped"
    return {"MISSED": "missed", "PENDING": "due"}.get(status, "queued")
