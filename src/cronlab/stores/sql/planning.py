"""Planning a dispatch's schedule occurrences in bulk (``SqlStore._plan_schedules``): the reads
and writes around the pure judgement of ``core/planning.py``.

A batch costs four statements in all, however many occurrences it holds: the schedules read
at once, the earlier runs still going read at once, then the skips, the schedules' new state
and the next occurrences written at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

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

COLUMNS = (*SCHEDULE, *STANDING)  # schedules_get_many's

if TYPE_CHECKING:
    from cronlab.stores.sql.store import SqlStore


def plan(store: SqlStore, c: Conn, rows: Sequence[Any], now_ms: int) -> tuple[list[Any], int]:
    """The claimed ``(id, key, attempts, trigger_ms)`` rows that run, and how many caught-up
    occurrences were planned (already due: the caller claims again). The rest are SKIPPED."""
    targets = [occurrences.planned_target(r[1]) for r in rows]
    stored = _schedules(store, c, {t[0] for t in targets if t is not None})
    batch = Planning(now_ms=now_ms, stored=stored, running=_running(store, c, stored, now_ms))
    first = min((t[1] for t in targets if t is not None), default=now_ms)
    batch.finished = _finished(store, c, batch.running.keys() | _skipping(stored), first)
    batch.backfilled = _backfilled(store, c, [r[1] for r in rows])
    runs = judge(batch, rows, targets)
    _write(store, c, batch.writes)
    return list(runs), batch.writes.catch_ups


def _schedules(store: SqlStore, c: Conn, names: Iterable[str]) -> dict[str, Stored | None]:
    found: dict[str, Stored | None] = dict.fromkeys(names)
    if found:
        rows = c.execute(store.queries["schedules_get_many"], {"names": store.db.texts(found)})
        for row in rows.fetchall():
            values = by_column(COLUMNS, row)
            found[values["name"]] = Stored(**{f: values[f] for f in Stored._fields})
    return found


def _skipping(stored: Mapping[str, Stored | None]) -> set[str]:
    """The schedules that skip an overlap."""
    return {n for n, s in stored.items() if s is not None and s.overlap == "skip"}


def _finished(
    store: SqlStore, c: Conn, names: Iterable[str], after_ms: int
) -> dict[str, list[tuple[int, int]]]:
    """``(trigger ms, finished ms)`` of the named schedules' runs that finished after
    ``after_ms`` (the batch's first fire time): they were running at any later fire time
    before they finished."""
    found: dict[str, list[tuple[int, int]]] = {}
    names = sorted(names)
    if names:
        args = {"names": store.db.texts(names), "after": after_ms}
        for name, trigger_ms, finished_ms in c.execute(store.queries["schedules_finished"], args):
            found.setdefault(name, []).append((int(trigger_ms), int(finished_ms)))
    return found


def _running(
    store: SqlStore, c: Conn, stored: Mapping[str, Stored | None], now_ms: int
) -> dict[str, dict[int, int]]:
    """The DISPATCHED tasks of the schedules that skip an overlap, this batch's included."""
    names = sorted(_skipping(stored))
    running: dict[str, dict[int, int]] = {}
    if names:
        args = {"names": store.db.texts(names), "since": now_ms - OVERLAP_MAX_AGE_MS}
        for name, task_id, trigger_ms in c.execute(store.queries["schedules_running"], args):
            running.setdefault(name, {})[int(task_id)] = int(trigger_ms)
    return running


def _backfilled(store: SqlStore, c: Conn, keys: Sequence[str]) -> set[str]:
    """The occurrence keys among ``keys`` whose occurrence a backfill added already."""
    twins = backfill_twins(keys)
    if not twins:
        return set()
    found = c.execute(store.queries["tasks_with_keys"], {"keys": store.db.texts(twins)})
    return {twins[str(row[0])] for row in found.fetchall()}


def _write(store: SqlStore, c: Conn, w: Writes) -> None:
    if w.skips:
        store.db.executemany(c, store.queries["task_skip"], w.skips)
    if w.fired:
        store.db.schedules_fired(c, w.fired)
    if w.added:
        store.db.insert_tasks(c, w.added)
