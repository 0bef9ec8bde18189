"""Laws of the model, checked by hypothesis on random scenarios."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cronlab.core.model import Fault, Scenario, simulate
from cronlab.core.series import per_minute, per_second

buckets = st.lists(
    st.tuples(st.integers(0, 20), st.integers(0, 5_000)), min_size=1, max_size=6
).map(lambda pairs: tuple(sorted(dict(pairs).items())))


@st.composite
def scenarios(draw: st.DrawFn, **fixed: object) -> Scenario:
    replicas = draw(st.integers(1, 5))
    faults = draw(
        st.lists(
            st.builds(
                Fault, at=st.integers(0, 1500), replica=st.none() | st.integers(0, replicas - 1)
            ),
            max_size=4,
        )
    )
    knobs: dict[str, object] = {
        "buckets": draw(buckets),
        "replicas": replicas,
        "workers": draw(st.integers(1, 6)),
        "rate": draw(st.integers(1, 300)),
        "election": draw(st.sampled_from(["lease", "off"])),
        "lease_ttl": draw(st.integers(1, 120)),
        "durable": draw(st.booleans()),
        "faults": tuple(faults),
        "restart_after": draw(st.none() | st.integers(0, 600)),
    }
    knobs.update(fixed)
    return Scenario(**knobs)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_conservation(s: Scenario) -> None:
    t = simulate(s).totals
    assert t.dispatched == t.executed
    assert t.dispatched == t.due - t.missed + t.duplicates
    assert 0 <= t.missed <= t.due


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_per_second_series_obey_the_queue(s: Scenario) -> None:
    r = simulate(s)
    ps = per_second(r.timeline)
    assert (ps.executed <= s.capacity).all()
    assert (ps.backlog >= 0).all()
    previous = np.concatenate(([0], ps.backlog[:-1]))
    assert (ps.backlog == previous + ps.dispatched - ps.executed).all()
    assert int(ps.backlog.max(initial=0)) == r.totals.backlog_peak
    pm = per_minute(r.timeline)
    assert int(pm.executed.sum()) == r.totals.executed
    assert int(pm.missed.sum()) == r.totals.missed


@settings(max_examples=200, deadline=None)
@given(scenarios(election="lease"))
def test_lease_never_duplicates(s: Scenario) -> None:
    assert simulate(s).totals.duplicates == 0


@settings(max_examples=100, deadline=None)
@given(scenarios(election="off", faults=()))
def test_off_without_faults_duplicates_every_task_per_extra_replica(s: Scenario) -> None:
    t = simulate(s).totals
    assert t.duplicates == t.due * (s.replicas - 1)


@settings(max_examples=200, deadline=None)
@given(scenarios(durable=True), st.integers(0, 600))
def test_durable_with_replicas_returning_never_misses(s: Scenario, back: int) -> None:
    from dataclasses import replace

    assert simulate(replace(s, restart_after=back)).totals.missed == 0


@settings(max_examples=200, deadline=None)
@given(scenarios(durable=True, restart_after=None))
def test_durable_with_a_replica_left_alive_never_misses(s: Scenario) -> None:
    if len(s.faults) < s.replicas:
        assert simulate(s).totals.missed == 0


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 5), st.integers(1, 120), st.integers(0, 3000), buckets)
def test_takeover_delay_is_the_ttl_when_a_standby_is_alive(
    replicas: int, ttl: int, at: int, due: tuple[tuple[int, int], ...]
) -> None:
    s = Scenario(
        buckets=due, replicas=replicas, lease_ttl=ttl, faults=(Fault(at=at),), restart_after=ttl
    )
    assert simulate(s).totals.takeover_delays_s == (ttl,)
