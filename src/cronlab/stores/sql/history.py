"""The run history and its retention, read and pruned through the SQL store.

A *run* is an execution record (a handler's start, end, attempt, worker, outcome and error)
joined to its task (occurrence time, dispatch time); an occurrence that never ran is a row of
its own (``skipped``, ``missed``), and so is one not run yet (``due``, ``queued``). The
retention deletes finished tasks and their records, oldest first and in small batches, in the
leader's fenced transaction; it never deletes a PENDING or DISPATCHED task, a schedule's newest
occurrence, or one its catch-up window still covers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cronlab.core import occurrences
from cronlab.ports import RunQuery, RunRecord
from cronlab.stores import rows
from cronlab.stores.sql.dialect import Conn

if TYPE_CHECKING:
    from cronlab.stores.sql.store import SqlStore

EARLIEST = -(1 << 62)
DAY_MS = 86_400_000
DEFAULT_KEEP_MS = 30 * DAY_MS
MIN_KEEP_MS = 3_600_000  # an hour: less would prune runs an operator is still looking at
PRUNE_BATCH = 1_000  # rows of each kind one retention transaction deletes at most


def runs(store: SqlStore, query: RunQuery, now_ms: int) -> list[RunRecord]:
    """The history rows ``query`` asks for, newest occurrence first."""
    args: dict[str, Any] = {
        "since": EARLIEST if query.since_ms is None else query.since_ms,
        "now": now_ms,
        "task": query.task,
        "failed": int(query.failed),
        "limit": query.limit,
    }
    if query.schedule is None:
        return [record(r) for r in store.named("runs", args)]
    return [
        record(r) for r in store.named("runs_of_schedule", {**args, "schedule": query.schedule})
    ]


# The runs queries' columns: RunRecord's fields, then the run record's id and the task's
# status and reason (for an occurrence with no run record).
COLUMNS = ("task_id", "key", "task", "schedule", "occurrence_ms", "dispatched_ms", "start_ms",
           "end_ms", "attempt", "worker", "run_id", "outcome", "error", "status",
           "reason")  # fmt: skip


def record(r: Sequence[Any]) -> RunRecord:
    """A ``runs`` row as a value; a task with no run record gets its outcome from its status
    and its error from its reason."""
    values = rows.by_column(COLUMNS, r)
    status, reason = values.pop("status"), values.pop("reason")
    if values.pop("run_id") is None:
        values.update(outcome=occurrences.unrun_outcome(status, reason), error=reason)
    return RunRecord(**values)


def recent_runs(
    store: SqlStore, names: Sequence[str], now_ms: int, n: int
) -> dict[str, list[Sequence[Any]]]:
    """The ``n`` newest occurrences (not still to come) of each schedule in ``names``, newest
    first, each with its newest run: ``(schedule, task id, trigger_ms, status, last_error,
    start_ms, end_ms, attempt, worker, outcome, error)`` rows."""
    found: dict[str, list[Sequence[Any]]] = {}
    args = {"now": now_ms, "n": n + 1, "names": json.dumps(list(names))}
    for r in store.named("recent_runs", args):
        if r[3] == "PENDING" and r[2] > now_ms:
            continue
        runs = found.setdefault(r[0], [])
        if len(runs) < n:
            runs.append(r)
    return found


def lateness_by_minute(
    store: SqlStore, since_ms: int, now_ms: int
) -> list[tuple[int, int, float, int]]:
    """``(minute, runs, mean ms, max ms)`` of first runs' lateness by minute of occurrence."""
    rows = store.named("lateness_by_minute", {"since": since_ms, "now": now_ms})
    return [(int(m), int(n), float(mean), int(top)) for m, n, mean, top in rows]


def prune(store: SqlStore, keep_ms: int, now_ms: int, limit: int, epoch: int) -> int:
    """Delete, in one transaction fenced by ``epoch``, at most ``limit`` finished tasks (with
    their run records) older than ``keep_ms``, and as many events, queue-depth samples and
    settled alerts; returns how many rows went."""

    def run(c: Conn) -> int:
        now = store.db.now(c, now_ms)
        store.fenced(c, epoch, now)
        before = now - keep_ms
        args = {"before": before, "now": now, "limit": limit}
        ids = [r[0] for r in c.execute(store.queries["prune_candidates"], args).fetchall()]
        gone = 0
        if ids:
            c.execute(store.queries["prune_executions"], {"ids": store.db.ints(ids)})
            deleted = c.execute(
                store.queries["prune_tasks"], {"ids": store.db.ints(ids)}
            ).fetchall()
            gone += len(deleted)
            _note_gone(store, c, deleted)
        for name in ("prune_events", "prune_samples", "prune_alerts"):
            gone += int(c.execute(store.queries[name], {"before": before, "limit": limit}).rowcount)
        return gone

    return store.db.transaction(run)


def _note_gone(store: SqlStore, c: Conn, deleted: Sequence[Sequence[Any]]) -> None:
    """Each schedule's ``pruned_through_ms``: the latest occurrence time of its deleted tasks
    (a backfill never reaches it: ``operations.backfill``)."""
    through: dict[str, int] = {}
    for _, name, trigger_ms in deleted:
        if name is not None:
            through[name] = max(through.get(name, trigger_ms), int(trigger_ms))
    rows = [{"name": name, "through": ms} for name, ms in through.items()]
    if rows:
        store.db.executemany(c, store.queries["schedule_pruned_through"], rows)
