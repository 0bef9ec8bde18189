"""What operators do to a running store, and what processes say about themselves:
backfills, heartbeats. Every write is one transaction (``SqlStore`` delegates here)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from cronlab.core import occurrences, policy
from cronlab.exceptions import ConfigError
from cronlab.ports import Backfill, ProcessInfo
from cronlab.stores.sql.dialect import Conn

if TYPE_CHECKING:
    from cronlab.stores.sql.schedule_methods import ScheduleMethods
    from cronlab.stores.sql.store import SqlStore

NOT_RUN = ("SKIPPED", "MISSED")  # an occurrence in these states is backfilled


def backfill(
    store: ScheduleMethods, c: Conn, name: str, from_ms: int, to_ms: int, now_ms: int
) -> Backfill:
    """In ``c``'s transaction: a task per fire time in [from_ms, to_ms) that never ran and
    never will: before the schedule's pending occurrence (from that one on, its catch-up
    policy plans them), with no occurrence in the store (never written) or one
    that was skipped or missed, and no backfill of it. Each is planned as it is dispatched
    by the schedule's overlap policy alone (``planning.plan``). A range that reaches what
    the retention deleted of the schedule's history is a ConfigError: an occurrence whose
    row is gone may have run."""
    info = store.must_exist(c, name)
    planned_from = info.next_fire_ms  # None: paused, nothing pending
    fires = occurrences.backfill_fires(info.schedule, from_ms, to_ms, now_ms)
    gone = c.execute(store.q["schedule_history_gone"], {"name": name}).fetchone()
    if fires and gone is not None and gone[0] is not None and fires[0] <= int(gone[0]):
        raise ConfigError(
            f"backfill of {name!r}: its runs up to {_iso(int(gone[0]))} were deleted by the "
            "retention (--keep), so which of those occurrences ran is not known; "
            "backfill a range after it"
        )
    added = existing = 0
    for fire in fires:
        key = policy.occurrence_key(name, fire)
        row = c.execute(store.q["task_by_key"], {"key": key}).fetchone()
        if (row is not None and row[6] not in NOT_RUN) or (
            planned_from is not None and fire >= planned_from
        ):
            existing += 1
        elif store.add(c, occurrences.backfilled(info.schedule, fire)):
            added += 1
        else:
            existing += 1
    return Backfill(added=added, existing=existing)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


def heartbeat(store: SqlStore, info: ProcessInfo, now_ms: int) -> None:
    """Note that the process ``info`` names is alive at ``now_ms``; one nobody registered (a
    scheduler started by hand or by Kubernetes, not by ``cronlab cluster``) registers itself
    in its role and index slot first."""

    def beat(c: Conn) -> None:
        args = {"now": now_ms, "owner": info.owner}
        if c.execute(store.q["heartbeat"], args).rowcount == 0:
            c.execute(store.q["register_process"], dataclasses.asdict(info))
            c.execute(store.q["heartbeat"], args)

    store.d.transaction(beat)
