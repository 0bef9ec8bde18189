"""Property: through random crash/restart histories of the real scheduler and worker (memory
store, fake clock), a ``catchup="all"`` schedule never runs a fire time twice, and runs exactly
the fire times that a leading scan saw within their catch-up window; a stale leader coming back
after each crash is fenced and writes nothing.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronlab import App
from cronlab.clock import FakeClock
from cronlab.core.policy import Schedule, occurrences, to_ms
from cronlab.election.store import StoreElector
from cronlab.exceptions import FencedError
from cronlab.handlers import Context
from cronlab.queues.store import StoreQueue
from cronlab.runtime.scheduler import Scheduler, SchedulerConfig
from cronlab.runtime.worker import Worker, WorkerConfig
from cronlab.stores.memory import MemoryStore

T0 = to_ms(datetime(2026, 3, 29, 0, 55, 3, tzinfo=UTC))  # Berlin springs forward at 01:00 UTC
WINDOW = timedelta(minutes=2)
TTL = 5_000

history = st.lists(
    st.tuples(st.integers(1, 90), st.integers(0, 240)),  # seconds up, then seconds down
    min_size=1,
    max_size=6,
)


class ScanLog(MemoryStore):
    """The memory store, noting the instant of every dispatch that the fence let through."""

    def __init__(self) -> None:
        super().__init__()
        self.scans: list[int] = []

    def dispatch_due(self, now_ms: int, limit: int, epoch: int, *, clock: Any = None) -> Any:
        tasks = super().dispatch_due(now_ms, limit, epoch, clock=clock)
        self.scans.append(clock() if clock else now_ms)
        return tasks


def processes(store: ScanLog, clock: FakeClock, app: App, n: int) -> tuple[Scheduler, Worker]:
    scheduler = Scheduler(
        SchedulerConfig(replica=n, ttl_ms=TTL, scan_ms=1_000),
        store=store,
        queue=StoreQueue(store, clock),
        elector=StoreElector(store, clock),
        clock=clock,
        owner=f"scheduler-{n}",
    )
    worker = Worker(
        WorkerConfig(index=n),
        store=store,
        queue=StoreQueue(store, clock),
        registry=app.registry,
        clock=clock,
        name=f"worker-{n}",
    )
    return scheduler, worker


@settings(max_examples=60, deadline=None)
@given(history=history, expr=st.sampled_from(["*/10 * * * * *", "* * * * *", "*/7 * * * *"]))
def test_random_crashes_never_run_a_fire_twice_or_lose_one_in_the_window(
    history: list[tuple[int, int]], expr: str
) -> None:
    clock, store = FakeClock(T0), ScanLog()
    app = App(store=store, clock=clock)
    runs: list[int] = []

    @app.cron(
        expr, name="s", tz="Europe/Berlin", catchup="all", catchup_window=WINDOW, overlap="allow"
    )
    @app.task(name="record")
    def record(ctx: Context) -> None:
        runs.append(ctx.scheduled_ms)

    app.sync()
    schedule = app.schedules["s"]
    stale: int | None = None
    for n, (up_s, down_s) in enumerate(history):
        scheduler, worker = processes(store, clock, app, n)
        for _ in range(up_s):
            clock.advance(1_000)
            scheduler.step()
            while worker.step() == 0:
                pass
            _check_fenced(store, clock, scheduler, stale)
        stale = scheduler.lease.epoch if scheduler.lease else stale
        clock.advance(down_s * 1_000)  # a crash: no release, the lease just expires
    assert max(Counter(runs).values(), default=1) == 1, "a fire time ran twice"
    assert sorted(runs) == expected(schedule, store.scans)


def _check_fenced(store: ScanLog, clock: FakeClock, s: Scheduler, stale: int | None) -> None:
    """The previous leader, waking up now, cannot dispatch once another epoch leads."""
    if stale is None or s.lease is None or s.lease.epoch == stale:
        return
    before = store.counts()
    with pytest.raises(FencedError):
        store.dispatch_due(clock.now_ms(), 100, stale)
    assert store.counts() == before


def expected(schedule: Schedule, scans: list[int]) -> list[int]:
    """Every fire time some leading scan saw at most the catch-up window late."""
    window = schedule.catchup_window_ms
    seen: set[int] = set()
    for t in scans:
        seen.update(occurrences(schedule, max(T0, t - window - 1), t))
    return sorted(seen)
