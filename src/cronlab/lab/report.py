"""``cronlab report``: what happened, measured from the store (definitions in docs/engine.md).

The names match the model's ``Totals`` so a run and its model compare one to one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from cronlab.lab import invoices
from cronlab.ports import Event
from cronlab.stores.sql import SqlStore

TAKEOVER_KINDS = ("crash", "pause")


@dataclass(frozen=True, kw_only=True)
class Report:
    """Measured totals (model names) plus invoice duplicates and dispatch lateness."""

    due: int
    dispatched: int
    executed: int
    duplicates: int
    abandoned_deliveries: int
    missed: int
    backlog_peak: int
    drain_time_s: float
    takeover_delays_s: tuple[float, ...]
    duplicate_invoices: int
    dispatch_lateness_ms: dict[str, int | None]
    tasks: dict[str, int]
    fenced_writes: int = 0
    redelivered: int = 0
    stuck: int = 0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["takeover_delays_s"] = list(self.takeover_delays_s)
        return data


def measure(store: SqlStore, now_ms: int) -> Report:
    """Read every figure from the store as of ``now_ms``."""
    due, first_trigger = store.named("report_due", {"now": now_ms})[0]
    executed, duplicates, last_end, abandoned = store.named("report_runs")[0]
    counts = store.counts()
    drain = (last_end - first_trigger) / 1000 if last_end and first_trigger is not None else 0.0
    events = store.events()
    return Report(
        due=due,
        dispatched=store.named("report_dispatched")[0][0],
        executed=executed,
        duplicates=duplicates,
        abandoned_deliveries=abandoned,
        missed=counts["MISSED"],
        backlog_peak=store.named("report_backlog_peak")[0][0],
        drain_time_s=round(max(0.0, drain), 3),
        takeover_delays_s=takeover_delays(events),
        duplicate_invoices=invoices.duplicates(store),
        dispatch_lateness_ms=lateness(store),
        tasks=counts,
        fenced_writes=sum(int(e.detail.get("count", 0)) for e in events if e.kind == "fenced"),
        redelivered=abandoned,
        stuck=int(store.named("report_stuck")[0][0]),
    )


def takeover_delays(events: list[Event]) -> tuple[float, ...]:
    """Seconds from each hit on the leader (crash, pause) to the next acquisition."""
    delays, seen = [], set()
    for hit in events:
        if hit.kind not in TAKEOVER_KINDS or not hit.detail.get("was_leader"):
            continue
        held = hit.epoch or 0
        if held in seen:
            continue  # a second hit on the same leadership is not a second takeover
        seen.add(held)
        after = [
            e
            for e in events
            if e.kind == "acquire" and (e.epoch or 0) > held and e.at_ms >= hit.at_ms
        ]
        if after:
            delays.append(round((after[0].at_ms - hit.at_ms) / 1000, 3))
    return tuple(delays)


def lateness(store: SqlStore) -> dict[str, int | None]:
    """p50 and p99 of dispatch time minus trigger time over dispatched tasks."""
    (n,) = store.named("report_lateness_count")[0]
    return {name: _at(store, n, q) for name, q in (("p50", 0.50), ("p99", 0.99))}


def _at(store: SqlStore, n: int, q: float) -> int | None:
    if n == 0:
        return None
    rows = store.named("report_lateness_at", {"k": min(n - 1, int(q * n))})
    return int(rows[0][0])
