"""The schedules' side of the SQL store (``ports.ScheduleStore``): put, sync, read, pause with
a note, resume, remove, trigger and backfill, each ONE transaction.

A schedule's next occurrence is a PENDING task written in the same transaction as the
schedule (``_rematerialise``); a dispatch plans it (``plan_batch.plan``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from cronlab.core import occurrences, policy, zones
from cronlab.core.policy import Schedule
from cronlab.exceptions import ConflictError, NotFoundError
from cronlab.ports import Backfill, ScheduleInfo, SyncReport
from cronlab.stores import rows
from cronlab.stores.sql import operations
from cronlab.stores.sql.dialect import Conn, Dialect
from cronlab.stores.sql.part import Part
from cronlab.stores.sql.tasks import SqlTasks

T = TypeVar("T")

MAX_PASSED_OVER = 1_000  # occurrences a redefinition passes over that exist already
# The name every App had unless given one, before the default became its module: every
# service shared it, so a schedule stored under it is adopted by the app that declares it
# and removed by no sync (not even of an App still named "app": it may be another's).
OLD_DEFAULT_APP = "app"


class SqlSchedules(Part):
    """``ports.ScheduleStore``; a schedule's occurrences are ``tasks`` rows."""

    def __init__(self, db: Dialect, tasks: SqlTasks) -> None:
        super().__init__(db)
        self.tasks = tasks

    def changing(
        self, now_ms: int, fn: Callable[[Conn, int], T], clock: Callable[[], int] | None = None
    ) -> T:
        """``fn(c, now)`` in a transaction that changes schedules or their occurrences,
        serialised with the leader's: it first takes every fence row a dispatch or the
        retention takes (PostgreSQL; SQLite's writer lock serialises every write already). A
        dispatch then never plans from a definition a deploy replaces under it (bug 4), a
        backfill never reads history the retention is deleting (bug 3), and two adds of one
        name meet. ``now`` is judged once the locks are held (``Dialect.now``: the server's
        clock, else the caller's ``clock`` read then, else ``now_ms``): a change that waited for
        a paused leader's dispatch never drops an occurrence that fell due while it waited
        (seed 1507 on PostgreSQL), nor one a leader planned after the machine's clock jumped
        while it waited for SQLite's write lock (seed 60941 on SQLite)."""

        def serialised(c: Conn) -> T:
            c.execute(self.queries["fence_lock_all"])
            return fn(c, self.db.now(c, now_ms if clock is None else clock()))

        return self.db.transaction(serialised)

    def put_schedule(
        self,
        schedule: Schedule,
        now_ms: int,
        *,
        replace: bool,
        clock: Callable[[], int] | None = None,
    ) -> bool:
        zones.check(schedule.tz)  # a new definition: in a zone every replica reads alike
        stored = self.db.read(lambda c: self._schedule(c, schedule.name))
        if (
            stored is not None
            and replace
            and occurrences.same_definition(stored.schedule, schedule)
        ):
            return False  # read outside the lock: redeploying takes no write lock

        def put(c: Conn, now: int) -> bool:
            old = self._schedule(c, schedule.name, lock=True)
            if old is not None and not replace:
                raise ConflictError(f"a schedule named {schedule.name!r} already exists")
            if old is not None and occurrences.same_definition(old.schedule, schedule):
                return False
            c.execute(self.queries["schedule_upsert"], rows.schedule_row(schedule))
            paused = old.schedule.paused if old is not None else schedule.paused
            self._rematerialise(c, schedule, now, paused)
            return True

        return self.changing(now_ms, put, clock)

    def sync_schedules(
        self,
        app: str,
        wanted: Sequence[Schedule],
        now_ms: int,
        *,
        clock: Callable[[], int] | None = None,
    ) -> SyncReport:
        for s in wanted:
            zones.check(s.tz)

        def sync(c: Conn, now: int) -> SyncReport:
            added: list[str] = []
            changed: list[str] = []
            for s in wanted:
                old = self._schedule(c, s.name, lock=True)
                if old is not None and old.app not in (None, OLD_DEFAULT_APP, app):
                    raise ConflictError(
                        f"schedule {s.name!r} is declared by app {old.app!r}, not {app!r}: "
                        "nothing was written (give one of them another name)"
                    )
                same = old is not None and occurrences.same_definition(old.schedule, s)
                if not same:
                    (changed if old is not None else added).append(s.name)
                if same and old is not None and old.app == app:
                    continue
                c.execute(self.queries["schedule_upsert"], rows.schedule_row(s, app))
                if not same:
                    paused = old.schedule.paused if old is not None else s.paused
                    self._rematerialise(c, s, now, paused)
            declared = {s.name for s in wanted}
            names = c.execute(self.queries["schedule_names_of_app"], {"app": app}).fetchall()
            mine = app != OLD_DEFAULT_APP
            removed = [n for (n,) in names if n not in declared and mine]
            for name in removed:
                self._remove(c, name, now)
            return SyncReport(added=tuple(added), changed=tuple(changed), removed=tuple(removed))

        return self.changing(now_ms, sync, clock)

    def get_schedule(self, name: str) -> ScheduleInfo:
        def get(c: Conn) -> ScheduleInfo:
            info = self.must_exist(c, name)
            outcome = c.execute(self.queries["schedule_last_outcome"], {"name": name}).fetchone()
            return dataclasses.replace(info, last_outcome=outcome[0] if outcome else None)

        return self.db.read(get)

    def list_schedules(self) -> list[ScheduleInfo]:
        names = self.db.read(lambda c: c.execute(self.queries["schedule_names"]).fetchall())
        return [self.get_schedule(r[0]) for r in names]

    def pause_schedule(
        self,
        name: str,
        now_ms: int,
        note: str | None = None,
        *,
        clock: Callable[[], int] | None = None,
    ) -> bool:
        text = occurrences.check_note(note)

        def pause(c: Conn, now: int) -> bool:
            self.must_exist(c, name, lock=True)
            args = {"name": name, "paused": 1}
            changed = int(c.execute(self.queries["schedule_set_paused"], args).rowcount)
            c.execute(self.queries["schedule_drop_pending"], {"name": name, "now": now})
            c.execute(
                self.queries["schedule_set_next"], {"name": name, "next": None, "expect": None}
            )
            if changed or text is not None:
                c.execute(self.queries["schedule_note"], {"name": name, "note": text})
            self._operated(c, "paused", name, now, note=text)
            return changed > 0

        return self.changing(now_ms, pause, clock)

    def resume_schedule(
        self, name: str, now_ms: int, *, clock: Callable[[], int] | None = None
    ) -> bool:
        def resume(c: Conn, now: int) -> bool:
            info = self.must_exist(c, name, lock=True)
            args = {"name": name, "paused": 0}
            changed = int(c.execute(self.queries["schedule_set_paused"], args).rowcount)
            if changed:
                self._rematerialise(c, info.schedule, now, False)
                c.execute(self.queries["schedule_note"], {"name": name, "note": None})
                self._operated(c, "resumed", name, now)
            return changed > 0

        return self.changing(now_ms, resume, clock)

    def backfill_schedule(self, name: str, from_ms: int, to_ms: int, now_ms: int) -> Backfill:
        """Run the schedule's occurrences in [from_ms, to_ms) that never ran (``operations
        .backfill``); a range backwards, in the future or of more than ``MAX_BACKFILL`` is a
        ConfigError and writes nothing."""

        def fill(c: Conn, now: int) -> Backfill:
            done = operations.backfill(self, c, name, from_ms, to_ms, now)
            if done.added:
                self.db.notify(c, "due")
            span = {"from_ms": from_ms, "to_ms": to_ms, "added": done.added}
            self._operated(c, "backfilled", name, now, **span, existing=done.existing)
            return done

        return self.changing(now_ms, fill)

    def _operated(self, c: Conn, kind: str, name: str, now_ms: int, **detail: Any) -> None:
        """An operator's action on schedule ``name``, in the event log (the audit trail)."""
        event = {"kind": kind, "at_ms": now_ms, "holder": None, "epoch": None, "pid": None}
        c.execute(
            self.queries["record_event"],
            {**event, "detail": json.dumps({"schedule": name, **detail})},
        )

    def remove_schedule(
        self, name: str, now_ms: int, *, clock: Callable[[], int] | None = None
    ) -> None:
        def remove(c: Conn, now: int) -> None:
            self.must_exist(c, name, lock=True)
            self._remove(c, name, now)

        self.changing(now_ms, remove, clock)

    def _remove(self, c: Conn, name: str, now_ms: int) -> None:
        """Delete a schedule and its occurrence still to come; one already due stays, and is
        recorded SKIPPED ("removed") as it is dispatched."""
        c.execute(self.queries["schedule_drop_pending"], {"name": name, "now": now_ms})
        c.execute(self.queries["schedule_delete"], {"name": name})

    def trigger_schedule(self, name: str, now_ms: int) -> str:
        def trigger(c: Conn, now: int) -> str:
            new = occurrences.triggered(self.must_exist(c, name).schedule, now)
            self.tasks.add(c, new)
            self.db.notify(c, "due")
            self._operated(c, "triggered", name, now, key=new.idempotency_key)
            return new.idempotency_key

        return self.changing(now_ms, trigger)

    def _schedule(self, c: Conn, name: str, *, lock: bool = False) -> ScheduleInfo | None:
        query = self.queries["schedule_get_locked" if lock else "schedule_get"]
        row = c.execute(query, {"name": name}).fetchone()
        return None if row is None else rows.schedule_info(row)

    def must_exist(self, c: Conn, name: str, *, lock: bool = False) -> ScheduleInfo:
        info = self._schedule(c, name, lock=lock)
        if info is None:
            raise NotFoundError(f"no schedule named {name!r}")
        return info

    def _rematerialise(self, c: Conn, s: Schedule, now_ms: int, paused: bool) -> None:
        """Replace the schedule's occurrence still to come by ``next_fire(now)`` (none while
        paused); one already due stays, and runs. It is never at or before the schedule's last
        fire (``now`` from a clock behind the cluster's: seed 43603), and a fire whose
        occurrence has a task already is passed over for the next: a schedule never waits on
        a key it cannot insert."""
        c.execute(self.queries["schedule_drop_pending"], {"name": s.name, "now": now_ms})
        stored = self._schedule(c, s.name)
        fired = stored.last_fire_ms if stored is not None else None
        # never back before the last fire, whose run the retention may have deleted
        after = now_ms if fired is None else max(now_ms, fired)
        next_ms = None if paused else policy.next_fire(s, after)
        for _ in range(MAX_PASSED_OVER):
            if next_ms is None or self.tasks.add(c, occurrences.occurrence(s, next_ms)):
                break
            next_ms = policy.next_fire(s, next_ms)
        else:
            raise ConflictError(
                f"schedule {s.name!r}: its next {MAX_PASSED_OVER:,} occurrences after "
                f"{now_ms} ms have run already; is this clock far behind the cluster's?"
            )
        if next_ms is not None:
            self.db.notify(c, "due")
        args = {"name": s.name, "next": next_ms, "expect": next_ms}
        c.execute(self.queries["schedule_set_next"], args)
