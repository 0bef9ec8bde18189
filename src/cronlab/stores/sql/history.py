"""The run history and its retention, read and pruned through the SQL store.

A *run* is an execution record (a handler's start, end, attempt, worker, outcome and error)
joined to its task (occurrence time, dispatch time); an occurrence that never ran is a row of
its own (``skipped``, ``missed``), and so is one not run yet (``due``, ``queued``). The
retention deletes finished tasks and their records, oldest first and in small batches, in the
leader's fenced transaction; it never deletes a PENDING or DISPATCHED task, a schedule's newest
occurrence, or one its catch-up window still covers. The event log (elections, crashes,
an operator's actions) and the queue-depth samples are history too, pruned with it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from cronlab.core import occurrences
from cronlab.ports import Event, RunQuery, RunRecord
from cronlab.stores import rows
from cronlab.stores.rows import LateMinute, RecentRun
from cronlab.stores.sql.dialect import Conn, Dialect
from cronlab.stores.sql.lease import SqlLease
from cronlab.stores.sql.part import Part

EARLIEST = -(1 << 62)
DAY_MS = 86_400_000
DEFAULT_KEEP_MS = 30 * DAY_MS
MIN_KEEP_MS = 3_600_000  # an hour: less would prune runs an operator is still looking at
PRUNE_BATCH = 1_000  # rows of each kind one retention transaction deletes at most


# The runs queries' columns: RunRecord's fields, then the run record's id and the task's
# status and reason (for an occurrence with no run record).
COLUMNS = ("task_id", "key", "task", "schedule", "occurrence_ms", "dispatched_ms", "start_ms",
           "end_ms", "attempt", "worker", "run_id", "outcome", "error", "status",
           "reason")  # fmt: skip
# events' columns: Event's fields
EVENT = tuple(f.name for f in dataclasses.fields(Event))


class SqlHistory(Part):
    """Runs, events and samples; the retention fenced by ``lease``."""

    def __init__(self, db: Dialect, lease: SqlLease) -> None:
        super().__init__(db)
        self.lease = lease

    def runs(self, query: RunQuery, now_ms: int) -> list[RunRecord]:
        """The history rows ``query`` asks for, newest occurrence first."""
        args: dict[str, Any] = {
            "since": EARLIEST if query.since_ms is None else query.since_ms,
            "now": now_ms,
            "task": query.task,
            "failed": int(query.failed),
            "limit": query.limit,
        }
        if query.schedule is None:
            return [record(r) for r in self.named("runs", args)]
        return [
            record(r) for r in self.named("runs_of_schedule", {**args, "schedule": query.schedule})
        ]

    def recent_runs(self, names: Sequence[str], now_ms: int, n: int) -> dict[str, list[RecentRun]]:
        """The ``n`` newest occurrences (not still to come) of each schedule in ``names``,
        newest first, each with its newest run."""
        found: dict[str, list[RecentRun]] = {}
        args = {"now": now_ms, "n": n + 1, "names": json.dumps(list(names))}
        for r in map(RecentRun._make, self.named("recent_runs", args)):
            if r.status == "PENDING" and r.trigger_ms > now_ms:
                continue
            runs = found.setdefault(r.schedule, [])
            if len(runs) < n:
                runs.append(r)
        return found

    def lateness_by_minute(self, since_ms: int, now_ms: int) -> list[LateMinute]:
        """First runs' lateness by minute of occurrence, oldest minute first."""
        found = self.named("lateness_by_minute", {"since": since_ms, "now": now_ms})
        return [LateMinute(int(m), int(n), float(mean), int(top)) for m, n, mean, top in found]

    def prune(self, keep_ms: int, now_ms: int, limit: int, epoch: int) -> int:
        """Delete, in one transaction fenced by ``epoch``, at most ``limit`` finished tasks
        (with their run records) older than ``keep_ms``, and as many events, queue-depth
        samples and settled alerts; returns how many rows went."""

        def run(c: Conn) -> int:
            now = self.lease.fenced_now(c, epoch, now_ms)
            before = now - keep_ms
            args = {"before": before, "now": now, "limit": limit}
            ids = [r[0] for r in c.execute(self.queries["prune_candidates"], args).fetchall()]
            gone = 0
            if ids:
                c.execute(self.queries["prune_executions"], {"ids": self.db.ints(ids)})
                deleted = c.execute(
                    self.queries["prune_tasks"], {"ids": self.db.ints(ids)}
                ).fetchall()
                gone += len(deleted)
                self._note_gone(c, deleted)
            aged = {"before": before, "limit": limit}
            for name in ("prune_events", "prune_samples", "prune_alerts"):
                gone += int(c.execute(self.queries[name], aged).rowcount)
            return gone

        return self.db.transaction(run)

    def _note_gone(self, c: Conn, deleted: Sequence[Sequence[Any]]) -> None:
        """Each schedule's ``pruned_through_ms``: the latest occurrence time of its deleted
        tasks (a backfill never reaches it: ``operations.backfill``)."""
        through: dict[str, int] = {}
        for _, name, trigger_ms in deleted:
            if name is not None:
                through[name] = max(through.get(name, trigger_ms), int(trigger_ms))
        found = [{"name": name, "through": ms} for name, ms in through.items()]
        if found:
            self.db.executemany(c, self.queries["schedule_pruned_through"], found)

    def record_event(self, event: Event) -> None:
        args = {**dataclasses.asdict(event), "detail": json.dumps(dict(event.detail))}
        self.db.transaction(lambda c: c.execute(self.queries["record_event"], args))

    def events(self) -> list[Event]:
        found = [rows.by_column(EVENT, r) for r in self.named("events")]
        return [Event(**{**v, "detail": json.loads(v["detail"])}) for v in found]

    def record_sample(self, now_ms: int, depth: int) -> None:
        args = {"at": now_ms, "depth": depth}
        self.db.transaction(lambda c: c.execute(self.queries["record_sample"], args))


def record(r: Sequence[Any]) -> RunRecord:
    """A ``runs`` row as a value; a task with no run record gets its outcome from its status
    and its error from its reason."""
    values = rows.by_column(COLUMNS, r)
    status, reason = values.pop("status"), values.pop("reason")
    if values.pop("run_id") is None:
        values.update(outcome=occurrences.unrun_outcome(status, reason), error=reason)
    return RunRecord(**values)
