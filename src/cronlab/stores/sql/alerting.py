"""The alerts' rows in the SQL store: which schedules alert, whether a schedule's run started,
its failure streak, raising an alert once (fenced), and the webhook deliveries' bookkeeping."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cronlab.ports import Alert, Watched
from cronlab.stores import rows
from cronlab.stores.sql.dialect import Conn, Dialect
from cronlab.stores.sql.lease import SqlLease
from cronlab.stores.sql.part import Part

EARLIEST = -(1 << 62)


# alerts_recent's and alerts_to_send's columns: Alert's fields
COLUMNS = ("id", "schedule", "kind", "subject", "raised_ms", "detail", "delivery", "attempts",
           "delivered_ms")  # fmt: skip


class SqlAlerts(Part):
    """The ``alerts`` table and what alerting reads of schedules and runs; a raise fenced by
    ``lease``."""

    def __init__(self, db: Dialect, lease: SqlLease) -> None:
        super().__init__(db)
        self.lease = lease

    def watched(self) -> list[tuple[tuple[Any, ...], int | None]]:
        """The rows of unpaused schedules with alert settings: (schedule columns, expected from)."""
        found = [rows.by_column(rows.LISTED, r) for r in self.named("alert_schedules")]
        return [(tuple(v[c] for c in rows.SCHEDULE), v["expected_from_ms"]) for v in found]

    def started_since(self, name: str, fire_ms: int, now_ms: int) -> bool:
        """True when schedule ``name`` has had a run start at or after ``fire_ms`` (its record is
        there, or its occurrence was paused or removed by the operator), or has one running now
        (a worker holds its message: an occurrence skipped for overlap waits for it)."""
        args = {"name": name, "fire": fire_ms}
        if self.named("alert_started_since", args):
            return True
        waiting = {int(r[0]) for r in self.named("alert_unstarted", args)}
        if not waiting:
            return False
        held = self.named("held_ids", {"now": now_ms})
        return any(i in waiting for (ids,) in held for i in self.db.ids(ids))

    def newest(self, name: str, kind: str) -> int | None:
        """The subject (occurrence ms) of schedule ``name``'s newest ``kind`` alert, if any."""
        found = self.named("alert_newest", {"name": name, "kind": kind})
        return int(found[0][0]) if found else None

    def failure_streak(self, name: str, n: int) -> Sequence[Any] | None:
        """``(key, trigger_ms, last_error)`` rows of the first ``n`` failed runs of schedule
        ``name`` since its newest successful one, when there are ``n``; else None."""
        (last_done,) = self.named("alert_last_done", {"name": name})[0]
        after = EARLIEST if last_done is None else int(last_done)
        found = self.named("alert_failures_after", {"name": name, "after": after, "n": n})
        return found if len(found) >= n else None

    def raise_alert(self, alert: Alert, epoch: int, holder: str) -> int | None:
        """Insert ``alert`` and its ``alert`` event in one transaction fenced by ``epoch``; None
        (nothing written) when this condition was raised already."""

        def run(c: Conn) -> int | None:
            self.lease.fenced_now(c, epoch, alert.raised_ms)
            args = {
                "schedule": alert.schedule,
                "kind": alert.kind,
                "subject": alert.subject,
                "raised": alert.raised_ms,
                "detail": json.dumps(dict(alert.detail)),
                "delivery": alert.delivery,
            }
            row = c.execute(self.queries["alert_insert"], args).fetchone()
            if row is None:
                return None
            detail = {"alert": int(row[0]), "schedule": alert.schedule, "kind": alert.kind}
            event = {"kind": "alert", "at_ms": alert.raised_ms, "holder": holder, "epoch": epoch}
            c.execute(
                self.queries["record_event"], {**event, "pid": None, "detail": json.dumps(detail)}
            )
            return int(row[0])

        return self.db.transaction(run)

    def to_send(self, now_ms: int, limit: int) -> list[Alert]:
        """Pending deliveries that are due, oldest first."""
        return [as_alert(r) for r in self.named("alerts_to_send", {"now": now_ms, "limit": limit})]

    def sent(
        self, alert_id: int, delivery: str, next_try_ms: int, delivered_ms: int | None
    ) -> None:
        """A delivery attempt's end: ``delivered``, ``undeliverable``, or ``pending`` again."""
        args = {
            "id": alert_id,
            "delivery": delivery,
            "next": next_try_ms,
            "delivered": delivered_ms,
        }
        self.db.transaction(lambda c: c.execute(self.queries["alert_sent"], args))

    def recent(self, limit: int) -> list[Alert]:
        """The newest alerts, newest first (the console)."""
        return [as_alert(r) for r in self.named("alerts_recent", {"limit": limit})]


def as_watched(row: tuple[Any, ...], expected_from_ms: int | None) -> Watched:
    return Watched(schedule=rows.schedule(row), expected_from_ms=expected_from_ms)


def as_alert(r: Sequence[Any]) -> Alert:
    """An ``alerts_recent`` or ``alerts_to_send`` row as a value (the detail stored as JSON)."""
    values = rows.by_column(COLUMNS, r)
    return Alert(**{**values, "detail": json.loads(values["detail"])})
