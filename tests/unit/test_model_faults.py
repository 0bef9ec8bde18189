"""The model's production faults (issue 15): a zombie leader with and without fencing, a crashed
worker with transactional and external effects, lost messages with and without the reconciler —
worked numbers, then the laws, checked by hypothesis on random scenarios."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cronlab.lab.model import Fault, Loss, Pause, Scenario, WorkerCrash, simulate
from cronlab.lab.series import per_second

MILLION = 1_000_000


def midnight(**knobs: object) -> Scenario:
    return Scenario(buckets=((0, MILLION),), **knobs)  # type: ignore[arg-type]


class TestZombie:
    def test_without_fencing_the_held_batch_is_duplicated(self) -> None:
        t = simulate(midnight(pauses=(Pause(at=0, seconds=30),), fencing=False)).totals
        assert (t.duplicates, t.fenced_writes, t.missed, t.takeover_delays_s) == (
            10_000,
            0,
            0,
            (10,),
        )
        assert t.dispatched == MILLION + 10_000

    def test_with_fencing_the_held_batch_is_refused(self) -> None:
        t = simulate(midnight(pauses=(Pause(at=0, seconds=30),))).totals
        assert (t.duplicates, t.fenced_writes, t.executed) == (0, 10_000, MILLION)

    def test_the_held_batch_is_what_was_due_up_to_the_batch_size(self) -> None:
        s = Scenario(buckets=((0, 700),), pauses=(Pause(at=0, seconds=30),), fencing=False)
        assert simulate(s).totals.duplicates == 700
        s = midnight(pauses=(Pause(at=0, seconds=30),), fencing=False, batch=2_500)
        assert simulate(s).totals.duplicates == 2_500

    def test_a_pause_shorter_than_the_lease_changes_no_count(self) -> None:
        calm = simulate(midnight()).totals
        for fencing in (True, False):
            t = simulate(midnight(pauses=(Pause(at=0, seconds=9),), fencing=fencing)).totals
            assert (t.duplicates, t.fenced_writes, t.missed, t.takeover_delays_s) == (0, 0, 0, ())
            assert t.drain_time_s == calm.drain_time_s + 9  # its dispatch waited for it

    def test_a_leader_paused_when_nothing_is_due_holds_nothing(self) -> None:
        t = simulate(midnight(pauses=(Pause(at=100, seconds=30),), fencing=False)).totals
        assert (t.duplicates, t.fenced_writes, t.takeover_delays_s) == (0, 0, (10,))

    def test_the_lease_timeline_shows_the_pause_the_takeover_and_the_refusal(self) -> None:
        r = simulate(midnight(pauses=(Pause(at=0, seconds=30),)))
        lanes = [(x.who, x.state, x.start, x.end, x.epoch, x.held) for x in r.replicas]
        assert (0, "paused", 0, 30, 0, 10_000) in lanes
        assert (1, "leader", 10, r.timeline.end, 2, 0) in lanes
        assert [(e.t, e.kind, e.count) for e in r.log if e.kind == "fenced"] == [
            (30, "fenced", 10_000)
        ]


class TestWorkerCrash:
    def test_transactional_effects_come_back_after_the_visibility_timeout_once(self) -> None:
        r = simulate(midnight(worker_crashes=(WorkerCrash(at=10, pod=0),)))
        t = r.totals
        assert (t.redelivered, t.duplicates, t.executed) == (200, 0, MILLION)
        ps = per_second(r.timeline)
        assert ps.executed[10] == 800  # the pod's 200 of that second took no effect
        assert ps.executed[11] == 800  # four pods until it is back at 40
        assert ps.executed[41] == 1_000

    def test_external_effects_are_duplicated_for_every_unacked_task(self) -> None:
        t = simulate(
            midnight(worker_crashes=(WorkerCrash(at=10, pod=3),), effects="external")
        ).totals
        assert (t.redelivered, t.duplicates, t.executed) == (200, 200, MILLION + 200)

    def test_a_pod_with_less_than_its_share_redelivers_what_it_had(self) -> None:
        s = Scenario(buckets=((0, 450),), worker_crashes=(WorkerCrash(at=0, pod=2),))
        assert simulate(s).totals.redelivered == 50  # pods 0, 1 took 200 each; pod 2 the 50 left


class TestLoss:
    def test_the_reconciler_brings_lost_messages_back_late(self) -> None:
        s = Scenario(buckets=((0, 10_000),), losses=(Loss(at=0, count=10_000),), reconcile=300)
        t = simulate(s).totals
        assert (t.stuck, t.executed, t.late) == (0, 10_000, 10_000)
        assert t.drain_time_s == 310

    def test_without_the_reconciler_lost_messages_are_stuck(self) -> None:
        t = simulate(midnight(losses=(Loss(at=0, count=5_000),), reconcile=None)).totals
        assert (t.stuck, t.executed) == (5_000, MILLION - 5_000)

    def test_the_newest_messages_are_the_ones_lost(self) -> None:
        s = Scenario(
            buckets=((0, 100),), election="off", replicas=2, losses=(Loss(at=0, count=100),)
        )
        t = simulate(s).totals  # the second replica's copies were the newest: no task is lost
        assert (t.stuck, t.duplicates, t.executed) == (0, 0, 100)


# -- laws ------------------------------------------------------------------------------------

buckets = st.lists(
    st.tuples(st.integers(0, 10), st.integers(0, 4_000)), min_size=1, max_size=5
).map(lambda pairs: tuple(sorted(dict(pairs).items())))


@st.composite
def scenarios(draw: st.DrawFn, **fixed: object) -> Scenario:
    replicas, workers = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    target = st.none() | st.integers(0, replicas - 1)
    knobs: dict[str, object] = {
        "buckets": draw(buckets),
        "replicas": replicas,
        "workers": workers,
        "rate": draw(st.integers(1, 400)),
        "election": draw(st.sampled_from(["lease", "off"])),
        "lease_ttl": draw(st.integers(1, 60)),
        "durable": draw(st.booleans()),
        "faults": tuple(
            draw(st.lists(st.builds(Fault, at=st.integers(0, 900), replica=target), max_size=2))
        ),
        "restart_after": draw(st.none() | st.integers(0, 400)),
        "pauses": tuple(
            draw(
                st.lists(
                    st.builds(
                        Pause, at=st.integers(0, 900), seconds=st.integers(1, 120), replica=target
                    ),
                    max_size=3,
                )
            )
        ),
        "fencing": draw(st.booleans()),
        "batch": draw(st.integers(1, 5_000)),
        "worker_crashes": tuple(
            draw(
                st.lists(
                    st.builds(WorkerCrash, at=st.integers(0, 900), pod=st.integers(0, workers - 1)),
                    max_size=3,
                )
            )
        ),
        "visibility": draw(st.integers(1, 120)),
        "pod_restart": draw(st.none() | st.integers(0, 200)),
        "effects": draw(st.sampled_from(["transactional", "external"])),
        "losses": tuple(
            draw(
                st.lists(
                    st.builds(Loss, at=st.integers(0, 900), count=st.integers(1, 3_000)), max_size=2
                )
            )
        ),
        "reconcile": draw(st.none() | st.integers(1, 300)),
    }
    knobs.update(fixed)
    return Scenario(**knobs)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_conservation(s: Scenario) -> None:
    t = simulate(s).totals
    assert t.executed == t.due - t.missed - t.stuck + t.duplicates
    assert 0 <= t.missed <= t.due and t.stuck >= 0 and t.late >= 0


@settings(max_examples=300, deadline=None)
@given(scenarios(election="lease", fencing=True, effects="transactional"))
def test_fencing_on_never_duplicates_for_any_pause_or_crash(s: Scenario) -> None:
    assert simulate(s).totals.duplicates == 0


@settings(max_examples=200, deadline=None)
@given(
    scenarios(
        election="lease", fencing=False, effects="transactional", worker_crashes=(), losses=()
    ),
    st.integers(0, 5),
)
def test_fencing_off_duplicates_at_most_the_held_batches(s: Scenario, _: int) -> None:
    t = simulate(s).totals
    assert t.duplicates <= s.batch * len(s.pauses)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 10_000), st.integers(1, 20), st.integers(11, 120))
def test_a_pause_past_the_ttl_during_a_burst_duplicates_exactly_the_held_batch(
    batch: int, ttl: int, extra: int
) -> None:
    s = Scenario(
        buckets=((0, 5_000),),
        batch=batch,
        lease_ttl=ttl,
        fencing=False,
        pauses=(Pause(at=0, seconds=ttl + extra),),
    )
    assert simulate(s).totals.duplicates == min(batch, 5_000)


@settings(max_examples=300, deadline=None)
@given(scenarios(election="lease", effects="transactional", pauses=(), fencing=True))
def test_transactional_effects_never_duplicate_for_any_worker_crash(s: Scenario) -> None:
    assert simulate(s).totals.duplicates == 0


@settings(max_examples=300, deadline=None)
@given(scenarios(election="lease", reconcile=60, faults=(), pod_restart=0, durable=True))
def test_reconcile_on_leaves_nothing_stuck(s: Scenario) -> None:
    assert simulate(s).totals.stuck == 0


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_per_second_series_obey_the_queue(s: Scenario) -> None:
    r = simulate(s)
    ps = per_second(r.timeline)
    assert (ps.executed <= s.capacity).all() and (ps.backlog >= 0).all()
    tl = r.timeline
    requeued = np.repeat(np.asarray(tl.requeued or (0,) * len(tl.n)), tl.n)
    lost = np.repeat(np.asarray(tl.lost or (0,) * len(tl.n)), tl.n)
    previous = np.concatenate(([0], ps.backlog[:-1]))
    assert (ps.backlog == previous + ps.dispatched + requeued - ps.executed - lost).all()
    assert int(ps.backlog.max(initial=0)) == r.totals.backlog_peak
    assert int(ps.executed.sum()) == r.totals.executed
