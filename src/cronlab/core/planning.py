"""Judging a claimed batch of schedule occurrences (pure: ``stores/sql/plan_batch.py`` reads
what this needs and writes what it decides, in the dispatch's fenced transaction).

A claimed batch may hold thousands of occurrences (10,000 schedules of ``* * * * *`` fall
due in the same second): they are judged here in the order and by the rules one at a time
would follow. A row sees the next occurrence its predecessors planned for its schedule, and
a skipped predecessor no longer counts as running. Plans of schedules with the same
expression, zone and catch-up policy for the same fire time are computed once (they are the
same plan), and an occurrence carries its schedule's payload text as it was stored
(validated when written).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from cronlab.core import occurrences, policy

OVERLAP_MAX_AGE_MS = 3_600_000  # a run DISPATCHED longer than this no longer blocks the next
PlanKey = tuple[Any, ...]
TaskRow = tuple[str, str, str, int, "str | None"]  # (key, task, payload, trigger ms, schedule)


class Stored(NamedTuple):
    """What planning reads of a stored schedule (``schedules_get_many``'s columns)."""

    name: str
    cron: str
    tz: str
    task: str
    payload: str  # JSON text as stored (written sorted: an occurrence carries it as it is)
    catchup: str
    catchup_window_ms: int
    overlap: str
    paused: int
    next_fire_ms: int | None


@dataclass
class Writes:
    """What planning a batch writes, in the order one at a time would have written it."""

    skips: list[dict[str, Any]] = field(default_factory=list)
    fired: list[dict[str, Any]] = field(default_factory=list)
    added: list[TaskRow] = field(default_factory=list)
    catch_ups: int = 0


@dataclass
class Planning:
    """One claimed batch being planned: the schedules and runs it read, what it writes."""

    now_ms: int
    stored: dict[str, Stored | None]
    running: dict[str, dict[int, int]]  # schedule → {task id: trigger ms} still DISPATCHED
    # schedule → (trigger ms, finished ms) of its runs that finished after the batch's first
    # fire time: still running at a fire time before they finished (overlap is judged then)
    finished: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    backfilled: set[str] = field(default_factory=set)  # occurrence keys a backfill ran or will
    next_fire: dict[str, int | None] = field(default_factory=dict)  # as this batch set them
    writes: Writes = field(default_factory=Writes)
    plans: dict[PlanKey, tuple[policy.DispatchPlan, int]] = field(default_factory=dict)
    rules: dict[PlanKey, policy.Schedule] = field(default_factory=dict)


def judge(
    batch: Planning, rows: Sequence[Sequence[Any]], targets: Sequence[tuple[str, int] | None]
) -> list[Sequence[Any]]:
    """The claimed ``(id, key, …)`` rows that run (``targets``: each one's
    ``occurrences.planned_target``); the writes of the rest, and of the plans, in ``batch``."""
    return [
        r for r, t in zip(rows, targets, strict=True) if t is None or _judge(batch, r, t) is None
    ]


def backfill_twins(keys: Iterable[str]) -> dict[str, str]:
    """The backfill key of each occurrence key among ``keys`` → that occurrence key: an
    occurrence whose backfill exists must not run (planned again later by a resume or a
    redeploy on a clock behind the operator's)."""
    return {
        occurrences.BACKFILL_PREFIX + k.removeprefix(occurrences.OCCURRENCE_PREFIX): k
        for k in keys
        if k.startswith(occurrences.OCCURRENCE_PREFIX)
    }


def _judge(batch: Planning, row: Sequence[Any], target: tuple[str, int]) -> str | None:
    """Why the claimed occurrence must not run (None: it runs); its writes noted in ``batch``."""
    task_id, key = int(row[0]), str(row[1])
    name, fire_ms = target
    s = batch.stored.get(name)
    if s is None:
        reason: str | None = "removed"
    elif key.startswith(occurrences.BACKFILL_PREFIX):
        reason = "overlap" if _overlaps(batch, s, fire_ms) else None
    else:
        reason = _occurrence(batch, s, fire_ms, key in batch.backfilled)
    if reason is not None:
        batch.writes.skips.append({"id": task_id, "reason": reason})
        batch.running.get(name, {}).pop(task_id, None)
    return reason


def _overlaps(batch: Planning, s: Stored, fire_ms: int) -> bool:
    """An earlier run of a schedule that forbids overlap was going at ``fire_ms``: it is still
    DISPATCHED, or it finished after that instant (a dispatch that waited — for SQLite's
    write lock, which a run holds — judges as one on time would have)."""
    if s.overlap != "skip":
        return False
    running = batch.running.get(s.name, {})
    if any(trigger < fire_ms for trigger in running.values()):
        return True
    ended = batch.finished.get(s.name, ())
    return any(trigger < fire_ms < finished for trigger, finished in ended)


def _occurrence(batch: Planning, s: Stored, fire_ms: int, backfilled: bool) -> str | None:
    """An occurrence's plan (as ``SqlStore`` made it one at a time): run, skip, catch up;
    one that a backfill runs is skipped ("backfilled") and plans the next as a run would."""
    w = batch.writes
    if s.paused:
        w.fired.append(_fired(s.name, fire_ms, None, "paused", 0, 0))
        batch.next_fire[s.name] = None
        return "paused"
    found, missed = _planned(batch, s, fire_ms)
    upcoming = batch.next_fire.get(s.name, s.next_fire_ms)
    if upcoming is not None and fire_ms < upcoming:
        # Planned before the one to come: a catch-up, or due under a definition since
        # replaced. It runs as it is; what follows it is planned already (a redeploy's
        # definition never fills in the time before it was deployed).
        found = policy.DispatchPlan(run=True, catch_up=(), next_fire_ms=upcoming)
        missed = 0
    reason = None if found.run else f"catchup={s.catchup}"
    if reason is None and backfilled:
        reason = "backfilled"
    elif reason is None and _overlaps(batch, s, fire_ms):
        reason = "overlap"
    w.added += [_row(s, f) for f in (*found.catch_up, found.next_fire_ms)]
    w.catch_ups += len(found.catch_up)
    skipped = int(reason == "overlap")
    w.fired.append(_fired(s.name, fire_ms, found.next_fire_ms, reason, missed, skipped))
    batch.next_fire[s.name] = found.next_fire_ms
    return reason


def _planned(batch: Planning, s: Stored, fire_ms: int) -> tuple[policy.DispatchPlan, int]:
    """``policy.plan_dispatch`` and ``missed_fires``, once per rule and fire time: only the
    expression, zone and catch-up policy enter them (checked once per rule, as a Schedule)."""
    rule = (s.cron, s.tz, s.catchup, int(s.catchup_window_ms))
    key = (*rule, fire_ms)
    if key not in batch.plans:
        if rule not in batch.rules:
            batch.rules[rule] = policy.Schedule(
                name="plan",
                cron=s.cron,
                task="plan",
                tz=s.tz,
                catchup=cast(policy.Catchup, s.catchup),
                catchup_window_ms=int(s.catchup_window_ms),
            )
        sched = batch.rules[rule]
        found = policy.plan_dispatch(sched, fire_ms, batch.now_ms)
        batch.plans[key] = (found, policy.missed_fires(sched, fire_ms, batch.now_ms, found))
    return batch.plans[key]


def _row(s: Stored, fire_ms: int) -> TaskRow:
    """The PENDING task of ``s``'s occurrence at ``fire_ms`` (``occurrences.occurrence``)."""
    return (policy.occurrence_key(s.name, fire_ms), s.task, s.payload, fire_ms, s.name)


def _fired(
    name: str, fire: int, next_ms: int | None, reason: str | None, missed: int, skipped: int
) -> dict[str, Any]:
    return {
        "name": name,
        "fire": fire,
        "next": next_ms,
        "reason": reason,
        "missed": missed,
        "skipped": skipped,
    }
