"""The lab model's rules, one test each, and the worked numbers of the foundation issue."""

from __future__ import annotations

import pytest

from cronlab.exceptions import ConfigError
from cronlab.lab.model import Fault, Scenario, simulate
from cronlab.lab.series import per_minute, per_second

MILLION = 1_000_000


def midnight(**knobs: object) -> Scenario:
    return Scenario(buckets=((0, MILLION),), **knobs)  # type: ignore[arg-type]


class TestWorkedNumbers:
    def test_lease_no_duplicates_drains_in_1000_s(self) -> None:
        t = simulate(midnight()).totals
        assert (t.duplicates, t.missed, t.drain_time_s) == (0, 0, 1000)
        assert round(t.drain_time_s / 60, 1) == 16.7

    def test_election_off_duplicates_two_million_drain_50_min(self) -> None:
        t = simulate(midnight(election="off")).totals
        assert t.duplicates == 2 * MILLION
        assert t.dispatched == 3 * MILLION
        assert t.drain_time_s / 60 == 50.0

    def test_leader_crash_at_zero_durable_takes_over_in_ttl(self) -> None:
        t = simulate(midnight(faults=(Fault(at=0),))).totals
        assert t.takeover_delays_s == (10,)
        assert (t.missed, t.duplicates, t.drain_time_s) == (0, 0, 1010)

    def test_leader_crash_at_zero_in_memory_misses_the_million(self) -> None:
        t = simulate(midnight(faults=(Fault(at=0),), durable=False)).totals
        assert t.missed == MILLION
        assert t.executed == 0


class TestLease:
    def test_lowest_live_replica_acquires_at_expiry(self) -> None:
        r = simulate(midnight(faults=(Fault(at=0),), lease_ttl=7))
        acquire = [e for e in r.log if e.kind == "acquire"]
        assert [(e.t, e.replica, e.epoch) for e in acquire] == [(7, 1, 2)]

    def test_takeover_waits_for_a_restart_when_no_replica_is_alive(self) -> None:
        s = Scenario(buckets=((0, 100),), replicas=1, faults=(Fault(at=0),), restart_after=45)
        t = simulate(s).totals
        assert t.takeover_delays_s == (45,)
        assert t.missed == 0
        assert t.drain_time_s == 46

    def test_crash_of_a_standby_changes_nothing(self) -> None:
        base = simulate(midnight()).totals
        t = simulate(midnight(faults=(Fault(at=0, replica=2),))).totals
        assert t == base

    def test_crash_during_takeover_has_no_target(self) -> None:
        r = simulate(midnight(faults=(Fault(at=0), Fault(at=5))))
        assert r.totals.takeover_delays_s == (10,)
        assert any(e.kind == "noop" and e.t == 5 for e in r.log)

    def test_second_leader_crash_after_takeover(self) -> None:
        r = simulate(midnight(faults=(Fault(at=0), Fault(at=20))))
        assert r.totals.takeover_delays_s == (10, 10)
        holders = [e.replica for e in r.log if e.kind == "acquire"]
        assert holders == [1, 2]


class TestScan:
    def test_durable_pending_rows_are_dispatched_by_the_promotion_scan(self) -> None:
        s = Scenario(buckets=((0, 10), (1, 20)), faults=(Fault(at=55),), lease_ttl=30)
        r = simulate(s)
        # the holder dies at 55, bucket 1 (t=60) waits, replica 1 takes over at 85 and scans
        dispatch = [(e.t, e.count) for e in r.log if e.kind == "dispatch"]
        assert dispatch == [(0, 10), (85, 20)]

    def test_in_memory_promotion_scan_fires_nothing(self) -> None:
        s = Scenario(
            buckets=((0, 10), (1, 20), (2, 5)), faults=(Fault(at=55),), lease_ttl=30, durable=False
        )
        t = simulate(s).totals
        assert (t.dispatched, t.missed) == (15, 20)

    def test_off_replicas_scanning_together_each_copy(self) -> None:
        s = Scenario(buckets=((0, 7),), replicas=4, election="off")
        t = simulate(s).totals
        assert (t.dispatched, t.duplicates) == (28, 21)

    def test_off_restart_scan_picks_up_rows_left_while_all_were_down(self) -> None:
        faults = (Fault(at=50, replica=0), Fault(at=50, replica=1))
        s = Scenario(
            buckets=((1, 9),), replicas=2, election="off", faults=faults, restart_after=100
        )
        r = simulate(s)
        assert (r.totals.dispatched, r.totals.duplicates, r.totals.missed) == (18, 9, 0)
        assert [(e.t, e.count) for e in r.log if e.kind == "dispatch"] == [(150, 18)]

    def test_off_crash_leader_kills_lowest_live_replica(self) -> None:
        s = Scenario(buckets=((1, 10),), election="off", faults=(Fault(at=0),), restart_after=None)
        r = simulate(s)
        assert r.totals.duplicates == 10
        assert [e.replica for e in r.log if e.kind == "crash"] == [0]

    def test_durable_rows_with_nobody_left_stay_undispatched(self) -> None:
        s = Scenario(
            buckets=((0, 5), (2, 6)), replicas=1, faults=(Fault(at=60),), restart_after=None
        )
        t = simulate(s).totals
        assert (t.dispatched, t.missed) == (5, 6)


class TestWorkers:
    def test_execution_is_min_of_queue_and_capacity(self) -> None:
        s = Scenario(buckets=((0, 250),), workers=1, rate=100)
        ps = per_second(simulate(s).timeline)
        assert ps.executed.tolist() == [100, 100, 50]
        assert ps.backlog.tolist() == [150, 50, 0]

    def test_backlog_carries_between_buckets(self) -> None:
        ps = per_second(
            simulate(Scenario(buckets=((0, 6500), (1, 100)), workers=1, rate=100)).timeline
        )
        assert ps.backlog[59] == 500
        assert ps.backlog[60] == 500
        assert ps.executed[60] == 100
        assert ps.dispatched[60] == 100

    def test_backlog_peak_is_after_execution(self) -> None:
        t = simulate(Scenario(buckets=((0, 1000),), workers=2, rate=100)).totals
        assert t.backlog_peak == 800

    def test_drain_time_counts_from_first_trigger(self) -> None:
        t = simulate(Scenario(buckets=((3, 1000),), workers=1, rate=100)).totals
        assert t.drain_time_s == 10

    def test_nothing_executed_means_zero_drain(self) -> None:
        assert simulate(Scenario(buckets=((0, 0),))).totals.drain_time_s == 0


class TestEnd:
    def test_ends_after_last_restart(self) -> None:
        r = simulate(Scenario(buckets=((0, 10),), faults=(Fault(at=0, replica=2),)))
        assert r.timeline.end == 301

    def test_fault_after_drain_extends_the_run(self) -> None:
        r = simulate(Scenario(buckets=((0, 10),), faults=(Fault(at=500),), restart_after=None))
        assert r.timeline.end == 501
        assert r.totals.takeover_delays_s == ()


class TestPerMinute:
    def test_ticker_series_of_the_midnight_run(self) -> None:
        pm = per_minute(simulate(midnight()).timeline)
        assert pm.dispatched[0] == MILLION
        assert pm.executed[0] == 60_000
        assert pm.backlog[0] == 940_000
        assert int(pm.executed.sum()) == MILLION
        assert len(pm.minute) == 17

    def test_sums_match_totals_with_faults_and_duplicates(self) -> None:
        s = Scenario(
            buckets=((0, 5000), (4, 9000)),
            election="off",
            durable=False,
            faults=(Fault(at=200), Fault(at=200, replica=1)),
            workers=2,
            rate=7,
        )
        r = simulate(s)
        pm = per_minute(r.timeline)
        assert int(pm.dispatched.sum()) == r.totals.dispatched
        assert int(pm.executed.sum()) == r.totals.executed
        assert int(pm.missed.sum()) == r.totals.missed
        assert int(pm.duplicates.sum()) == r.totals.duplicates


class TestValidation:
    @pytest.mark.parametrize(
        ("knobs", "word"),
        [
            ({"replicas": 0}, "replicas"),
            ({"workers": 0}, "workers"),
            ({"rate": 0}, "rate"),
            ({"lease_ttl": 0}, "TTL"),
            ({"faults": (Fault(at=0, replica=3),)}, "replica 3"),
            ({"faults": (Fault(at=-1),)}, "crash time"),
            ({"restart_after": -5}, "restart-after"),
            ({"buckets": ((0, -1),)}, "count"),
        ],
    )
    def test_bad_scenarios_name_the_problem(self, knobs: dict[str, object], word: str) -> None:
        knobs.setdefault("buckets", ((0, 1),))
        with pytest.raises(ConfigError, match=word):
            Scenario(**knobs)  # type: ignore[arg-type]
