"""Planning a dispatch's schedule occurrences in bulk (``SqlDispatch.plan_claimed``): the reads
and writes around the pure judgement of ``core/planning.py``.

A batch costs four statements in all, however many occurrences it holds: the schedules read
at once, the earlier runs still going read at once, then the skips, the schedules' new state
and the next occurrences written at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cronlab.core import occurrences
from cronlab.core.planning import (
    OVERLAP_MAX_AGE_MS,
    Planning,
    Stored,
    Writes,
    backfill_twins,
    judge,
)
from cronlab.stores.rows import SCHEDULE, STANDING, by_column
from cronlab.stores.sql.dialect import Conn
from cronlab.stores.sql.part import Part

COLUMNS = (*SCHEDULE, *STANDING)  # schedules_get_many's


def plan(part: Part, c: Conn, rows: Sequence[Any], now_ms: int) -> tuple[list[Any], int]:
    """The claimed ``(id, key, attempts, trigger_ms)`` rows that run, and how many caught-up
    occurrences were planned (already due: the caller claims again). The rest are SKIPPED."""
    targets = [occurrences.planned_target(r[1]) for r in rows]
    stored = _schedules(part, c, {t[0] for t in targets if t is not None})
    batch = Planning(now_ms=now_ms, stored=stored, running=_running(part, c, stored, now_ms))
    first = min((t[1] for t in targets if t is not None), default=now_ms)
    batch.finished = _finished(part, c, batch.running.keys() | _skipping(stored), first)
    batch.backfilled = _backfilled(part, c, [r[1] for r in rows])
    runs = judge(batch, rows, targets)
    _write(part, c, batch.writes)
    return list(runs), batch.writes.catch_ups


def _schedules(part: Part, c: Conn, names: Iterable[str]) -> dict[str, Stored | None]:
    found: dict[str, Stored | None] = dict.fromkeys(names)
    if found:
        rows = c.execute(part.queries["schedules_get_many"], {"names": part.db.texts(found)})
        for row in rows.fetchall():
            values = by_column(COLUMNS, row)
            found[values["name"]] = Stored(**{f: values[f] for f in Stored._fields})
    return found


def _skipping(stored: Mapping[str, Stored | None]) -> set[str]:
    """The schedules that skip an overlap."""
    return {n for n, s in stored.items() if s is not None and s.overlap == "skip"}


def _finished(
    part: Part, c: Conn, names: Iterable[str], after_ms: int
) -> dict[str, list[tuple[int, int]]]:
    """``(trigger ms, finished ms)`` of the named schedules' runs that finished after
    ``after_ms`` (the batch's first fire time): they were running at any later fire time
    before they finished."""
    found: dict[str, list[tuple[int, int]]] = {}
    names = sorted(names)
    if names:
        args = {"names": part.db.texts(names), "after": after_ms}
        for name, trigger_ms, finished_ms in c.execute(part.queries["schedules_finished"], args):
            found.setdefault(name, []).append((int(trigger_ms), int(finished_ms)))
    return found


def _running(
    part: Part, c: Conn, stored: Mapping[str, Stored | None], now_ms: int
) -> dict[str, dict[int, int]]:
    """The DISPATCHED tasks of the schedules that skip an overlap, this batch's included."""
    names = sorted(_skipping(stored))
    running: dict[str, dict[int, int]] = {}
    if names:
        args = {"names": part.db.texts(names), "since": now_ms - OVERLAP_MAX_AGE_MS}
        for name, task_id, trigger_ms in c.execute(part.queries["schedules_running"], args):
            running.setdefault(name, {})[int(task_id)] = int(trigger_ms)
    return running


def _backfilled(part: Part, c: Conn, keys: Sequence[str]) -> set[str]:
    """The occurrence keys among ``keys`` whose occurrence a backfill added already."""
    twins = backfill_twins(keys)
    if not twins:
        return set()
    found = c.execute(part.queries["tasks_with_keys"], {"keys": part.db.texts(twins)})
    return {twins[str(row[0])] for row in found.fetchall()}


def _write(part: Part, c: Conn, w: Writes) -> None:
    if w.skips:
        part.db.executemany(c, part.queries["task_skip"], w.skips)
    if w.fired:
        part.db.schedules_fired(c, w.fired)
    if w.added:
        part.db.insert_tasks(c, w.added)
