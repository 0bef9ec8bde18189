"""The alerts' rows in the SQL store: which schedules alert, whether a schedule's run started,
its failure streak, raising an alert once (fenced), and the webhook deliveries' bookkeeping."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cronlab.ports import Alert, Watched
from cronlab.stores import rows
from cronlab.stores.sql.dialect import Conn

if TYPE_CHECKING:
    from cronlab.stores.sql.store import SqlStore

EARLIEST = -(1 << 62)


# alerts_recent's and alerts_to_send's columns: Alert's fields
COLUMNS = ("id", "schedule", "kind", "subject", "raised_ms", "detail", "delivery", "attempts",
           "delivered_ms")  # fmt: skip


# alert_schedules' columns
WATCHED = (*rows.SCHEDULE, *rows.STANDING, "expected_from_ms")


def watched(store: SqlStore) -> list[tuple[tuple[Any, ...], int | None]]:
    """The rows of unpaused schedules with alert settings: (schedule columns, expected from)."""
    found = [rows.by_column(WATCHED, r) for r in store.named("alert_schedules")]
    return [(tuple(v[c] for c in rows.SCHEDULE), v["expected_from_ms"]) for v in found]


def as_watched(row: tuple[Any, ...], expected_from_ms: int | None) -> Watched:
    return Watched(schedule=rows.schedule(row), expected_from_ms=expected_from_ms)


def started_since(store: SqlStore, name: str, fire_ms: int, now_ms: int) -> bool:
    """True when schedule ``name`` has had a run start at or after ``fire_ms`` (its record is
    there, or its occurrence was paused or removed by the operator), or has one running now
    (a worker holds its message: an occurrence skipped for overlap waits for it)."""
    args = {"name": name, "fire": fire_ms}
    if store.named("alert_started_since", args):
        return True
    waiting = {int(r[0]) for r in store.named("alert_unstarted", args)}
    if not waiting:
        return False
    held = store.named("held_ids", {"now": now_ms})
    return any(i in waiting for (ids,) in held for i in store.db.ids(ids))


def newest(store: SqlStore, name: str, kind: str) -> int | None:
    """The subject (occurrence ms) of schedule ``name``'s newest ``kind`` alert, if any."""
    rows = store.named("alert_newest", {"name": name, "kind": kind})
    return int(rows[0][0]) if rows else None


def failure_streak(store: SqlStore, name: str, n: int) -> Sequence[Any] | None:
    """``(key, trigger_ms, last_error)`` rows of the first ``n`` failed runs of schedule
    ``name`` since its newest successful one, when there are ``n``; else None."""
    (last_done,) = store.named("alert_last_done", {"name": name})[0]
    after = EARLIEST if last_done is None else int(last_done)
    rows = store.named("alert_failures_after", {"name": name, "after": after, "n": n})
    return rows if len(rows) >= n else None


def raise_alert(store: SqlStore, alert: Alert, epoch: int, holder: str) -> int | None:
    """Insert ``alert`` and its ``alert`` event in one transaction fenced by ``epoch``; None
    (nothing written) when this condition was raised already."""

    def run(c: Conn) -> int | None:
        store.fenced(c, epoch, store.db.now(c, alert.raised_ms))
        args = {
            "schedule": alert.schedule,
            "kind": alert.kind,
            "subject": alert.subject,
            "raised": alert.raised_ms,
            "detail": json.dumps(dict(alert.detail)),
            "delivery": alert.delivery,
        }
        row = c.execute(store.queries["alert_insert"], args).fetchone()
        if row is None:
            return None
        detail = {"alert": int(row[0]), "schedule": alert.schedule, "kind": alert.kind}
        event = {"kind": "alert", "at_ms": alert.raised_ms, "holder": holder, "epoch": epoch}
        c.execute(
            store.queries["record_event"], {**event, "pid": None, "detail": json.dumps(detail)}
        )
        return int(row[0])

    return store.db.transaction(run)


def to_send(store: SqlStore, now_ms: int, limit: int) -> list[Alert]:
    """Pending deliveries that are due, oldest first."""
    return [as_alert(r) for r in store.named("alerts_to_send", {"now": now_ms, "limit": limit})]


def sent(
    store: SqlStore, alert_id: int, delivery: str, next_try_ms: int, delivered_ms: int | None
) -> None:
    """A delivery attempt's end: ``delivered``, ``undeliverable``, or ``pending`` again."""
    args = {"id": alert_id, "delivery": delivery, "next": next_try_ms, "delivered": delivered_ms}
    store.db.transaction(lambda c: c.execute(store.queries["alert_sent"], args))


def recent(store: SqlStore, limit: int) -> list[Alert]:
    """The newest alerts, newest first (the console)."""
    return [as_alert(r) for r in store.named("alerts_recent", {"limit": limit})]


def as_alert(r: Sequence[Any]) -> Alert:
    """An ``alerts_recent`` or ``alerts_to_send`` row as a value (the detail stored as JSON)."""
    values = rows.by_column(COLUMNS, r)
    return Alert(**{**values, "detail": json.loads(values["detail"])})
