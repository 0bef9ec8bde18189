"""A dispatch plans its claimed occurrences in bulk (``stores/sql/plan_batch.py``) and must decide
exactly as planning them one at a time does: a dispatch limited to one task claims and plans one
occurrence, so the same scenario run with a limit of 1 and with a large limit must leave the
same tasks, skips and schedule state behind — catch-up, overlap, pause, removal and backfill
included, several schedules and several occurrences of one schedule in the same batch."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronlab.clock import FakeClock
from cronlab.core.policy import Schedule
from cronlab.election.store import StoreElector
from cronlab.stores.memory import MemoryStore
from cronlab.stores.postgres import PostgresStore
from cronlab.stores.sql import SqlStore
from cronlab.stores.sqlite import SqliteStore

from .dist_servers import pg_database

T0 = 1_780_000_000_000 - 1_780_000_000_000 % 3_600_000 + 30_000  # half a minute past an hour
MIN = 60_000
CRONS = ("* * * * *", "*/2 * * * *", "*/5 * * * *", "0 * * * *", "* * * * * */20")
LEASE_MS = 30 * 86_400_000


@dataclass(frozen=True)
class Spec:
    """A schedule of the scenario: its rule and what an operator does to it."""

    cron: str
    catchup: str
    overlap: str
    window_min: int
    paused: bool
    removed: bool
    backfill: bool


specs = st.builds(
    Spec,
    cron=st.sampled_from(CRONS),
    catchup=st.sampled_from(("all", "latest", "none")),
    overlap=st.sampled_from(("allow", "skip")),
    window_min=st.integers(1, 90),
    paused=st.booleans(),
    removed=st.booleans(),
    backfill=st.booleans(),
)


def play(store: SqlStore, schedules: list[Spec], outage_min: int, limit: int) -> Any:
    """Schedules put at T0, nobody dispatching for ``outage_min`` minutes, then a leader
    dispatching every 20 s for ten minutes (no worker runs: what it dispatched keeps running);
    half way, the operator pauses, removes or backfills. What the store holds at the end."""
    clock = FakeClock(T0)
    for i, s in enumerate(schedules):
        rule = Schedule(
            name=f"s{i}",
            cron=s.cron,
            task="h",
            catchup=s.catchup,  # type: ignore[arg-type]
            overlap=s.overlap,  # type: ignore[arg-type]
            catchup_window_ms=s.window_min * MIN,
        )
        store.put_schedule(rule, T0, replace=False)
    clock.advance(outage_min * MIN)
    lease = StoreElector(store, clock).acquire_or_renew("leader", LEASE_MS)
    assert lease is not None
    for step in range(30):
        if step == 15:
            operate(store, schedules, clock.now_ms())
        while due(store, clock.now_ms()):
            store.dispatch_due(clock.now_ms(), limit, lease.epoch)
        clock.advance(20_000)
    return snapshot(store)


def operate(store: SqlStore, schedules: list[Spec], now_ms: int) -> None:
    for i, s in enumerate(schedules):
        name = f"s{i}"
        if s.backfill:
            store.backfill_schedule(name, T0 - 30 * MIN, now_ms - MIN, now_ms)
        if s.paused:
            store.pause_schedule(name, now_ms, "by the test")
        if s.removed:
            store.remove_schedule(name, now_ms)


def due(store: SqlStore, now_ms: int) -> int:
    """PENDING tasks due at ``now_ms`` (a dispatch that skips all it claimed returns 0)."""
    query = store.own("SELECT count(*) FROM tasks WHERE status = 'PENDING' AND trigger_ms <= :now")
    if isinstance(store, PostgresStore):
        query = query.replace(":now", "%(now)s")
    return int(store.db.transaction(lambda c: c.execute(query, {"now": now_ms}).fetchone()[0]))


def snapshot(store: SqlStore) -> Any:
    def read(c: Any) -> Any:
        tasks = c.execute(
            store.own(
                "SELECT idempotency_key, status, last_error, trigger_ms FROM tasks ORDER BY 1"
            )
        ).fetchall()
        rows = c.execute(
            store.own(
                "SELECT name, next_fire_ms, last_fire_ms, last_reason, missed, skipped, paused"
                " FROM schedules ORDER BY name"
            )
        ).fetchall()
        return [tuple(t) for t in tasks], [tuple(r) for r in rows]

    return store.db.transaction(read)


def one_and_bulk(make: Callable[[], SqlStore], schedules: list[Spec], outage_min: int) -> Any:
    """The scenario played with a limit of 1 and of 10,000: the same store (returned)."""
    one, bulk = make(), make()
    try:
        planned_one = play(one, schedules, outage_min, limit=1)
        planned_bulk = play(bulk, schedules, outage_min, limit=10_000)
    finally:
        one.close()
        bulk.close()
    assert planned_bulk == planned_one
    return planned_one


@settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(schedules=st.lists(specs, min_size=1, max_size=6), outage_min=st.integers(0, 120))
def test_bulk_planning_decides_as_one_at_a_time(schedules: list[Spec], outage_min: int) -> None:
    one_and_bulk(MemoryStore, schedules, outage_min)


SCENARIO = [  # every rule at once: catch-up kinds, overlap, pause, removal, backfill
    Spec("* * * * *", "all", "skip", 90, False, False, True),
    Spec("* * * * *", "all", "allow", 30, False, False, False),
    Spec("*/2 * * * *", "latest", "skip", 60, True, False, False),
    Spec("* * * * *", "none", "allow", 10, False, True, False),
    Spec("* * * * *", "all", "skip", 90, False, False, False),  # the same rule as s0
    Spec("0 * * * *", "latest", "allow", 90, False, False, True),
]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], SqlStore]]:
    """Fresh stores of one backend, each in a file or a database of its own."""
    with ExitStack() as stack:
        if request.param == "sqlite":
            counter = itertools.count()
            yield lambda: SqliteStore(tmp_path / f"plan{next(counter)}.db")
        else:
            yield lambda: PostgresStore(stack.enter_context(pg_database()), time_source="caller")


@pytest.mark.parametrize("outage_min", [0, 45])
def test_bulk_planning_decides_as_one_at_a_time_on_every_backend(
    make: Callable[[], SqlStore], outage_min: int
) -> None:
    """The same on each dialect (its array and bulk-write forms), one scenario."""
    tasks, _ = one_and_bulk(make, SCENARIO, outage_min)
    outcomes = {(status, reason) for _, status, reason, _ in tasks}
    expected = {("DISPATCHED", None), ("SKIPPED", "overlap")}
    if outage_min:
        expected |= {("SKIPPED", f"catchup={kind}") for kind in ("all", "latest", "none")}
    assert expected <= outcomes  # the scenario reaches the rules planning applies
