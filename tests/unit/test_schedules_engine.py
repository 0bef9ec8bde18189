"""Schedules in the engine on a fake clock: materialisation, catch-up, overlap, pause, trigger.

Every test runs on the memory store and on a real SQLite file, through the real scheduler
loop (lease, fenced dispatch) and a real worker; only the clock is fake.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronlab import App
from cronlab.clock import FakeClock
from cronlab.core.policy import Schedule, occurrence_key, to_ms
from cronlab.election.store import StoreElector
from cronlab.exceptions import ConflictError, FencedError, NotFoundError
from cronlab.handlers import Context
from cronlab.queues.store import StoreQueue
from cronlab.runtime.scheduler import Scheduler, SchedulerConfig
from cronlab.runtime.worker import Worker, WorkerConfig
from cronlab.stores.memory import MemoryStore
from cronlab.stores.sqlite import SqliteStore

T0 = to_ms(datetime(2026, 6, 1, 9, 0, 30, tzinfo=UTC))  # half past 09:00:00
MIN = 60_000
EVERY_MINUTE = "* * * * *"


@dataclass
class Lab:
    """A store, a fake clock, an App whose handler records each run, one scheduler, one worker."""

    store: Any
    clock: FakeClock
    app: App
    runs: list[int] = field(default_factory=list)
    scheduler: Scheduler | None = None
    worker: Worker | None = None

    def start(self, n: int = 0) -> None:
        """Fresh scheduler and worker processes (number ``n``) on the same store."""
        self.scheduler = Scheduler(
            SchedulerConfig(replica=n, ttl_ms=10_000, scan_ms=1_000),
            store=self.store,
            queue=StoreQueue(self.store, self.clock),
            elector=StoreElector(self.store, self.clock),
            clock=self.clock,
            owner=f"scheduler-{n}",
        )
        self.worker = Worker(
            WorkerConfig(index=n),
            store=self.store,
            queue=StoreQueue(self.store, self.clock),
            registry=self.app.registry,
            clock=self.clock,
            name=f"worker-{n}",
        )

    def run_for(self, ms: int, *, work: bool = True, step_ms: int = 1_000) -> None:
        """Advance ``ms``, letting the scheduler (and, with ``work``, the worker) act each step."""
        end = self.clock.now_ms() + ms
        assert self.scheduler is not None and self.worker is not None
        while self.clock.now_ms() < end:
            self.clock.advance(min(step_ms, end - self.clock.now_ms()))
            self.scheduler.step()
            while work and self.worker.step() == 0:
                pass

    def cron(self, name: str = "tick", expr: str = EVERY_MINUTE, **kw: Any) -> Schedule:
        """Declare (or redeclare: a redeploy) the schedule ``name`` on ``record``, and sync."""
        self.app.schedules.pop(name, None)
        self.app.cron(expr, name=name, **kw)(self.app.tasks["record"])
        self.app.sync()
        return self.app.schedules[name]

    def statuses(self, name: str = "tick") -> dict[int, str]:
        """Fire ms → task status of the schedule's occurrences."""
        rows = _tasks(self.store)
        return {t: s for key, t, s in rows if key.startswith(f"schedule:{name}:")}


def _tasks(store: Any) -> list[tuple[str, int, str]]:
    rows = store.query(
        store.own("SELECT idempotency_key, trigger_ms, status FROM tasks ORDER BY id")
    )
    return [(r[0], r[1], r[2]) for r in rows]


@pytest.fixture(params=["memory", "sqlite"])
def lab(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lab]:
    clock = FakeClock(T0)
    store: Any = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.db")
    app = App(store=store, clock=clock)
    result = Lab(store=store, clock=clock, app=app)

    @app.task(name="record")
    def record(ctx: Context) -> None:
        result.runs.append(ctx.scheduled_ms)

    result.start()
    yield result
    if isinstance(store, SqliteStore):
        store.close()


def minute(k: int) -> int:
    """The k-th whole minute after T0's minute (k=1 is 09:01:00)."""
    return T0 - 30_000 + k * MIN


def test_adding_a_schedule_materialises_its_next_occurrence_as_pending(lab: Lab) -> None:
    lab.cron()
    assert lab.statuses() == {minute(1): "PENDING"}
    assert lab.store.get_schedule("tick").next_fire_ms == minute(1)


def test_on_time_every_occurrence_runs_once_in_order(lab: Lab) -> None:
    lab.cron()
    lab.run_for(10 * MIN)
    assert lab.runs == [minute(k) for k in range(1, 11)]
    info = lab.store.get_schedule("tick")
    assert info.last_fire_ms == minute(10) and info.last_outcome == "DONE"
    assert info.next_fire_ms == minute(11)


def downtime(lab: Lab, minutes: int) -> None:
    """Two minutes up, ``minutes`` with no process at all, then new processes."""
    lab.run_for(2 * MIN)
    lab.clock.advance(minutes * MIN)
    lab.start(n=1)
    lab.run_for(1_000)


def test_catchup_all_runs_every_missed_occurrence_once_oldest_first(lab: Lab) -> None:
    lab.cron(catchup="all", overlap="allow")
    downtime(lab, 10)
    assert lab.runs == [minute(k) for k in range(1, 13)]
    assert "SKIPPED" not in lab.statuses().values()


def test_catchup_all_with_overlap_skip_runs_only_the_first_caught_up_one(lab: Lab) -> None:
    # Like Temporal: missed fires are taken subject to the overlap policy. The caught-up
    # occurrences are dispatched together, so each one finds the previous one still running.
    lab.cron(catchup="all", overlap="skip")
    downtime(lab, 10)
    assert lab.runs == [minute(1), minute(2), minute(3)]
    st = lab.statuses()
    assert [st[minute(k)] for k in range(4, 13)] == ["SKIPPED"] * 9


def test_catchup_latest_runs_one_for_all_missed_and_records_the_rest_skipped(lab: Lab) -> None:
    lab.cron(catchup="latest", overlap="allow")
    downtime(lab, 10)
    # 09:03 … 09:11 missed (more than 60 s late); 09:12 is on time and runs as well.
    assert lab.runs == [minute(1), minute(2), minute(11), minute(12)]
    assert lab.statuses()[minute(3)] == "SKIPPED"
    assert lab.store.get_schedule("tick").last_reason == "catchup=latest"


def test_catchup_none_skips_every_missed_one_and_goes_on(lab: Lab) -> None:
    lab.cron(catchup="none", overlap="allow")
    downtime(lab, 10)
    lab.run_for(2 * MIN)
    assert lab.runs == [minute(1), minute(2), minute(12), minute(13), minute(14)]
    assert sum(s == "SKIPPED" for s in lab.statuses().values()) == 1  # the waiting row only


def test_nothing_older_than_the_catchup_window_runs(lab: Lab) -> None:
    lab.cron(catchup="all", catchup_window=timedelta(minutes=5), overlap="allow")
    downtime(lab, 30)
    assert lab.runs == [minute(1), minute(2)] + [minute(k) for k in range(28, 33)]


def test_overlap_skip_records_the_fire_while_the_previous_run_is_still_running(lab: Lab) -> None:
    lab.cron(overlap="skip")
    lab.run_for(3 * MIN, work=False)  # no worker: the first run stays DISPATCHED
    st = lab.statuses()
    assert st[minute(1)] == "DISPATCHED"
    assert st[minute(2)] == st[minute(3)] == "SKIPPED"
    assert lab.store.get_schedule("tick").last_reason == "overlap"
    lab.run_for(MIN)  # the worker runs the first one; the next fire runs again
    assert lab.runs == [minute(1), minute(4)]


def test_overlap_skip_stops_waiting_for_a_run_dispatched_over_an_hour_ago(lab: Lab) -> None:
    """Risk: one run stuck DISPATCHED (its message lost, its worker gone) silenced an
    ``overlap="skip"`` schedule for good. Past an hour it no longer counts as running."""
    lab.cron()
    lab.run_for(65 * MIN, work=False)  # nothing runs: minute 1 stays DISPATCHED
    dispatched = sorted(t for t, s in lab.statuses().items() if s == "DISPATCHED")
    assert dispatched[0] == minute(1) and dispatched[1] in (minute(61), minute(62))
    between = [s for t, s in lab.statuses().items() if minute(1) < t < dispatched[1]]
    assert len(between) >= 59 and set(between) == {"SKIPPED"}


def test_overlap_allow_dispatches_while_the_previous_run_is_running(lab: Lab) -> None:
    lab.cron(overlap="allow")
    lab.run_for(3 * MIN, work=False)
    assert set(lab.statuses().values()) == {"DISPATCHED", "PENDING"}
    lab.run_for(1_000)
    assert lab.runs == [minute(1), minute(2), minute(3)]


def test_pause_stops_firing_and_resume_goes_on_without_catching_up(lab: Lab) -> None:
    lab.cron(catchup="all")
    lab.run_for(2 * MIN)
    assert lab.store.pause_schedule("tick", lab.clock.now_ms()) is True
    assert lab.store.pause_schedule("tick", lab.clock.now_ms()) is False
    assert lab.store.get_schedule("tick").next_fire_ms is None
    lab.run_for(5 * MIN)
    assert lab.runs == [minute(1), minute(2)]
    assert lab.store.resume_schedule("tick", lab.clock.now_ms()) is True
    lab.run_for(2 * MIN)
    assert lab.runs == [minute(1), minute(2), minute(8), minute(9)]


def test_redeploying_the_app_keeps_an_operator_pause(lab: Lab) -> None:
    lab.cron()
    lab.store.pause_schedule("tick", lab.clock.now_ms())
    lab.cron()
    lab.run_for(3 * MIN)
    assert lab.runs == [] and lab.store.get_schedule("tick").schedule.paused


def test_trigger_runs_once_now_even_while_paused(lab: Lab) -> None:
    lab.cron()
    lab.store.pause_schedule("tick", lab.clock.now_ms())
    key = lab.store.trigger_schedule("tick", lab.clock.now_ms())
    lab.run_for(1_000)
    assert lab.runs == [T0] and key == f"trigger:tick:{T0}"
    assert lab.store.get_schedule("tick").last_outcome == "DONE"


def test_remove_drops_the_waiting_occurrence_and_keeps_history(lab: Lab) -> None:
    lab.cron()
    lab.run_for(MIN)
    lab.store.remove_schedule("tick", lab.clock.now_ms())
    lab.run_for(3 * MIN)
    assert lab.runs == [minute(1)] and lab.statuses() == {minute(1): "DONE"}
    with pytest.raises(NotFoundError, match="'tick'"):
        lab.store.get_schedule("tick")
    with pytest.raises(NotFoundError, match="'tick'"):
        lab.store.remove_schedule("tick", lab.clock.now_ms())


def test_deploying_twice_changes_nothing_and_a_change_moves_the_occurrence(lab: Lab) -> None:
    first = lab.cron()
    before = lab.statuses()
    assert lab.store.put_schedule(first, lab.clock.now_ms(), replace=True) is False
    assert lab.statuses() == before
    lab.cron(expr="*/5 * * * *")
    assert lab.statuses() == {minute(5): "PENDING"}
    with pytest.raises(ConflictError, match="'tick'"):
        lab.store.put_schedule(first, lab.clock.now_ms(), replace=False)


def test_a_stale_leader_is_fenced_and_writes_no_occurrence(lab: Lab) -> None:
    lab.cron()
    old = StoreElector(lab.store, lab.clock).acquire_or_renew("old", 2_000)
    assert old is not None
    lab.clock.advance(MIN)  # 09:01:30: the old lease expired, the occurrence is due
    new = StoreElector(lab.store, lab.clock).acquire_or_renew("new", 10_000)
    assert new is not None
    before = lab.statuses()
    with pytest.raises(FencedError):
        lab.store.dispatch_due(lab.clock.now_ms(), 100, old.epoch)
    assert lab.statuses() == before == {minute(1): "PENDING"}
    lab.store.dispatch_due(lab.clock.now_ms(), 100, new.epoch)
    lab.store.dispatch_due(lab.clock.now_ms(), 100, new.epoch)
    assert lab.statuses() == {minute(1): "DISPATCHED", minute(2): "PENDING"}


def test_two_planners_of_one_occurrence_create_it_once(lab: Lab) -> None:
    s = lab.cron()
    key = occurrence_key("tick", minute(1))
    assert lab.store.add_tasks([_occurrence(s, minute(1))]) == 0  # the key exists
    assert [k for k, _, _ in _tasks(lab.store)] == [key]


def _occurrence(s: Schedule, fire_ms: int) -> Any:
    from cronlab.core.occurrences import occurrence

    return occurrence(s, fire_ms)


def test_a_redeploy_keeps_the_occurrence_already_due_and_runs_it(lab: Lab) -> None:
    """Bug 5: a deploy at 09:01:05 with a changed definition deleted the 09:01 occurrence, due
    but not yet dispatched (the leader was between scans, or down): lost, with no record."""
    lab.cron()
    lab.clock.advance(minute(1) - T0 + 5_000)  # 09:01:05, nothing dispatched yet
    lab.cron(expr="*/5 * * * *")
    assert lab.statuses() == {minute(1): "PENDING", minute(5): "PENDING"}
    lab.run_for(1_000)
    assert lab.runs == [minute(1)]
    lab.run_for(5 * MIN)
    assert lab.runs == [minute(1), minute(5)]


def test_a_kept_occurrence_never_makes_the_new_definition_catch_up_before_its_deploy(
    lab: Lab,
) -> None:
    """Sim seed 48: the occurrence kept by a redeploy also matched the new cron, so it was
    planned as the new definition's and caught up fire times from before the deploy."""
    lab.cron(expr="*/2 * * * *")
    lab.clock.advance(minute(7) - T0 + 5_000)  # the leader was down from 09:00:30 to 09:07:05
    lab.cron(expr=EVERY_MINUTE, catchup="all")
    lab.run_for(1_000)
    assert lab.runs == [minute(2)]
    assert lab.statuses() == {minute(2): "DONE", minute(8): "PENDING"}
    lab.run_for(2 * MIN)
    assert lab.runs == [minute(2), minute(8), minute(9)]


def test_pausing_or_removing_records_the_occurrence_already_due_as_skipped(lab: Lab) -> None:
    lab.cron()
    lab.clock.advance(minute(1) - T0 + 5_000)
    lab.store.pause_schedule("tick", lab.clock.now_ms())
    lab.run_for(1_000)
    assert lab.runs == [] and lab.statuses() == {minute(1): "SKIPPED"}
    assert lab.store.get_schedule("tick").last_reason == "paused"
    lab.store.resume_schedule("tick", lab.clock.now_ms())
    lab.clock.advance(MIN)
    lab.store.remove_schedule("tick", lab.clock.now_ms())
    lab.run_for(1_000)
    assert lab.statuses() == {minute(1): "SKIPPED", minute(2): "SKIPPED"}


def test_a_change_judges_due_ness_by_the_callers_clock_once_it_holds_the_lock(lab: Lab) -> None:
    """SQLite seed 60941: a redeploy asked at 09:00:30 waited for the write lock while the
    machine's clock stepped to 09:01:05; judged by the instant it was asked, it dropped the
    09:01 occurrence, due by then, as still to come (lost). Given the caller's clock, the
    store reads it once it holds the lock: the occurrence stays, and runs."""
    lab.cron()
    asked = lab.clock.now_ms()  # 09:00:30
    lab.clock.advance(minute(1) - T0 + 5_000)  # 09:01:05 by the time the lock is held
    lab.app.schedules.pop("tick")
    lab.app.cron("*/5 * * * *", name="tick")(lab.app.tasks["record"])
    changed = lab.store.put_schedule(
        lab.app.schedules["tick"], asked, replace=True, clock=lab.clock.now_ms
    )
    assert changed
    assert lab.statuses() == {minute(1): "PENDING", minute(5): "PENDING"}
    lab.run_for(1_000)
    assert lab.runs == [minute(1)]
