"""Random crash/restart histories: no (schedule, fire time) runs twice, none is lost.

A small model of the engine's planning loop, built only from the pure functions: a store
with a unique index on the occurrence key (a dict: INSERT … ON CONFLICT DO NOTHING), a durable
``last_fire_ms`` per schedule, a scheduler that ticks every ``period`` seconds while it is up,
may crash in the middle of a tick (after inserting some occurrences, before saving
``last_fire_ms``), and an old leader that keeps ticking on a stale ``last_fire_ms``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from cronlab.core import policy
from cronlab.core.policy import Schedule

SEC = 1_000
HORIZON = 6 * 3_600 * SEC
STARTS = {  # UTC instants a few hours before a 2026 transition, and an ordinary day
    "Europe/Berlin": ["2026-10-24T22:00", "2026-03-28T22:30"],
    "America/New_York": ["2026-11-01T03:00", "2026-03-08T04:00"],
    "UTC": ["2026-06-01T00:00"],
}
CRONS = ["* * * * *", "*/5 * * * *", "0 * * * *", "30 2 * * *", "30 1 * * *", "* * * * * */30"]


@dataclass
class Store:
    """The durable part: occurrence rows under a unique key, and the schedule's last fire."""

    rows: dict[str, int] = field(default_factory=dict)
    executions: dict[int, int] = field(default_factory=dict)
    attempts: dict[int, int] = field(default_factory=dict)  # inserts tried, duplicates too
    last_fire_ms: int = 0

    def insert(self, key: str, fire_ms: int) -> None:
        self.attempts[fire_ms] = self.attempts.get(fire_ms, 0) + 1
        if key in self.rows:  # the unique index: a second insert is a no-op
            return
        self.rows[key] = fire_ms
        self.executions[fire_ms] = self.executions.get(fire_ms, 0) + 1


def tick(store: Store, s: Schedule, now: int, last: int, crash_after: int | None) -> int | None:
    """One planning pass; returns the new last fire, or None if it crashed half-way."""
    plan = policy.plan_catchup(s, last, now)
    for i, fire in enumerate(plan):
        if i == crash_after:
            return None
        store.insert(policy.occurrence_key(s.name, fire), fire)
    return max([last, *plan])


@dataclass(frozen=True, kw_only=True)
class History:
    zone: str
    start: int
    cron: str
    window_s: int
    period_s: int
    downs: list[tuple[int, int]]  # [from, to) in ms since start: every scheduler is down
    crash_every: int  # every n-th tick crashes after its first insert
    stale_every: int  # every n-th tick an old leader plans too (0: never)


@dataclass
class Outcome:
    store: Store
    schedule: Schedule
    completed: list[int] = field(default_factory=list)  # ticks that saved last_fire_ms
    attempted: list[int] = field(default_factory=list)  # every tick, crashed or stale too


@st.composite
def histories(draw: st.DrawFn) -> History:
    zone = draw(st.sampled_from(sorted(STARTS)))
    start = datetime.fromisoformat(draw(st.sampled_from(STARTS[zone]))).replace(tzinfo=UTC)
    downs = draw(
        st.lists(st.tuples(st.integers(0, HORIZON // SEC), st.integers(1, 3 * 3_600)), max_size=4)
    )
    return History(
        zone=zone,
        start=policy.to_ms(start),
        cron=draw(st.sampled_from(CRONS)),
        window_s=draw(st.integers(0, 2 * 3_600)),
        period_s=draw(st.integers(20, 15 * 60)),
        downs=[(a * SEC, (a + n) * SEC) for a, n in downs],
        crash_every=draw(st.integers(2, 40)),
        stale_every=draw(st.sampled_from([0, 3, 7])),
    )


def run(h: History, catchup: str) -> Outcome:
    """Tick through the horizon, skipping down intervals, crashing and racing as drawn."""
    s = Schedule(
        name="job",
        cron=h.cron,
        tz=h.zone,
        task="h",
        catchup=catchup,  # type: ignore[arg-type]
        catchup_window_ms=h.window_s * SEC,
    )
    out, period = Outcome(store=Store(last_fire_ms=h.start), schedule=s), h.period_s * SEC
    for n in range(1, HORIZON // period + 1):
        now = h.start + n * period
        if any(a <= now - h.start < b for a, b in h.downs):
            continue
        out.attempted.append(now)
        crash = 1 if n % h.crash_every == 0 else None
        new_last = tick(out.store, s, now, out.store.last_fire_ms, crash)
        if new_last is not None:
            out.store.last_fire_ms = new_last
            out.completed.append(now)
        if h.stale_every and n % h.stale_every == 0:
            tick(out.store, s, now, h.start, None)  # an old leader that never saw progress
    return out


@settings(max_examples=40, deadline=None)
@given(h=histories(), catchup=st.sampled_from(["all", "latest", "none"]))
def test_no_occurrence_runs_twice_and_every_run_is_a_real_fire_time(
    h: History, catchup: str
) -> None:
    out = run(h, catchup)
    real = set(policy.occurrences(out.schedule, h.start, h.start + HORIZON))
    assert set(out.store.executions) <= real
    assert all(count == 1 for count in out.store.executions.values())
    assert len(out.store.rows) == len(set(out.store.rows.values()))


@settings(max_examples=40, deadline=None)
@given(h=histories())
def test_catchup_all_never_loses_an_occurrence_within_the_window(h: History) -> None:
    out, window = run(h, "all"), h.window_s * SEC
    for fire in policy.occurrences(out.schedule, h.start, h.start + HORIZON):
        executed = fire in out.store.executions
        if any(fire <= t <= fire + window for t in out.completed):
            assert executed, f"lost {policy.from_ms(fire)}"
        if executed:
            assert any(fire <= t <= fire + window for t in out.attempted)


def run_materialised(h: History, catchup: str) -> tuple[Store, Schedule, list[int]]:
    """The issue's design: the next occurrence waits as a PENDING row, materialised ahead.

    Dispatching a due row asks ``plan_dispatch`` and, in the same step, inserts the catch-up
    rows and the next one. A crash loses nothing but the step in progress; rows survive.
    """
    s = Schedule(
        name="job",
        cron=h.cron,
        tz=h.zone,
        task="h",
        catchup=catchup,  # type: ignore[arg-type]
        catchup_window_ms=h.window_s * SEC,
    )
    store, pending, ticks = Store(), {policy.next_fire(s, h.start)}, []
    period = h.period_s * SEC
    for n in range(1, HORIZON // period + 1):
        now = h.start + n * period
        if any(a <= now - h.start < b for a, b in h.downs):
            continue
        ticks.append(now)
        for fire in sorted(f for f in pending if f <= now):
            plan = policy.plan_dispatch(s, fire, now)
            for due in ([fire] if plan.run else []) + list(plan.catch_up):
                store.insert(policy.occurrence_key(s.name, due), due)
            pending.discard(fire)
            pending.add(plan.next_fire_ms)
    return store, s, ticks


@settings(max_examples=40, deadline=None)
@given(h=histories(), catchup=st.sampled_from(["all", "latest", "none"]))
def test_materialised_ahead_runs_each_fire_at_most_once_and_all_loses_none(
    h: History, catchup: str
) -> None:
    store, s, ticks = run_materialised(h, catchup)
    window = h.window_s * SEC
    real = policy.occurrences(s, h.start, h.start + HORIZON)
    assert set(store.executions) <= set(real)
    # Without crashes the planner alone must never plan a fire twice (the key is a backstop).
    assert all(count == 1 for count in store.attempts.values())
    for fire in real:
        seen = any(fire <= t <= fire + window for t in ticks)
        if catchup == "all" and seen:
            assert fire in store.executions, f"lost {policy.from_ms(fire)}"
        if fire in store.executions:
            assert seen
