"""The run history (issue 16): what `SqlStore.runs` lists, the missed and skipped counts, the
backfill and pause notes, and the leader's retention — on every backend, through the real
scheduler and worker loops on a fake clock."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from cronlab.exceptions import ConfigError, FencedError
from cronlab.ports import NewTask, RunQuery
from cronlab.runtime.retention import Retention, parse_keep

from .conftest import Backend
from .ops_lab import MIN, OpsLab, minute, ops_lab

DAY = 86_400_000


@pytest.fixture
def lab(backend: Backend) -> OpsLab:
    return ops_lab(backend.store)


def test_each_run_is_a_row_with_its_times_attempt_worker_and_outcome(lab: OpsLab) -> None:
    lab.cron()
    lab.start(max_attempts=2)
    lab.run_for(2 * MIN)
    lab.failing = True
    lab.run_for(MIN)
    rows = lab.store.runs(RunQuery(schedule="tick"), lab.clock.now_ms())
    assert [(r.occurrence_ms, r.attempt, r.outcome) for r in rows] == [
        (minute(3), 2, "failed"),
        (minute(3), 1, "error"),
        (minute(2), 1, "ok"),
        (minute(1), 1, "ok"),
    ]
    for r in rows:
        assert r.dispatched_ms is not None and r.start_ms is not None and r.end_ms is not None
        assert r.occurrence_ms <= r.dispatched_ms <= r.start_ms <= r.end_ms
        assert r.worker == "worker-0" and r.task == "record" and r.schedule == "tick"
    assert rows[0].error == f"RuntimeError: boom at {minute(3)}"
    assert rows[2].error is None
    failed = lab.store.runs(RunQuery(failed=True), lab.clock.now_ms())
    assert [r.outcome for r in failed] == ["failed", "error"]
    since = lab.store.runs(RunQuery(since_ms=minute(2), task="record"), lab.clock.now_ms())
    assert {r.occurrence_ms for r in since} == {minute(2), minute(3)}
    assert lab.store.runs(RunQuery(task="other"), lab.clock.now_ms()) == []
    assert len(lab.store.runs(RunQuery(limit=1), lab.clock.now_ms())) == 1


def test_occurrences_dropped_by_catch_up_are_missed_and_overlap_skips_are_counted(
    lab: OpsLab,
) -> None:
    lab.cron(catchup="latest")
    lab.start()
    lab.run_for(2 * MIN)
    lab.clock.advance(10 * MIN)  # no scheduler at all: minute 3 waits, 4..12 are not written
    lab.run_for(1_000)
    info = lab.store.get_schedule("tick")
    assert info.missed == 8  # minutes 3..10; 11 (the latest missed) ran
    assert info.skipped == 1  # 12, on time, while 11 still ran (overlap="skip")
    rows = lab.store.runs(RunQuery(schedule="tick"), lab.clock.now_ms())
    outcomes = {r.occurrence_ms: (r.outcome, r.error) for r in rows}
    assert outcomes[minute(3)] == ("missed", "catchup=latest")
    assert outcomes[minute(11)] == ("ok", None)
    assert outcomes[minute(12)] == ("skipped", "overlap")
    assert minute(4) not in outcomes


def test_a_backfill_runs_the_occurrences_that_never_ran_by_the_overlap_policy(
    lab: OpsLab,
) -> None:
    lab.cron(overlap="allow", catchup="none")
    lab.start()
    lab.run_for(2 * MIN)
    lab.clock.advance(5 * MIN)
    lab.run_for(1_000)
    now = lab.clock.now_ms()
    done = lab.store.backfill_schedule("tick", minute(1), minute(7), now)
    assert (done.added, done.existing) == (4, 2)  # minutes 3..6 had no task; 1, 2 ran
    again = lab.store.backfill_schedule("tick", minute(1), minute(7), now)
    assert (again.added, again.existing) == (0, 6)
    lab.ran.clear()
    lab.run_for(2_000)
    assert sorted(lab.ran) == [minute(k) for k in range(3, 7)]
    events = [e for e in lab.store.events() if e.kind == "backfilled"]
    assert events[0].detail == {
        "schedule": "tick",
        "from_ms": minute(1),
        "to_ms": minute(7),
        "added": 4,
        "existing": 2,
    }


def test_a_backfill_leaves_what_the_catch_up_will_still_plan_to_it(lab: OpsLab) -> None:
    """Found by ``cronlab verify`` (kinds operator, outage: seed 13): after an outage the
    schedule's occurrence of minute 3 still waits, and catch-up ``all`` will plan minutes
    4..6 when it runs. A backfill of minutes 4..6 made before then ran each of them twice —
    once backfilled, once caught up. The planner's pending occurrences are its to run."""
    lab.cron(overlap="allow", catchup="all")
    lab.start()
    lab.run_for(2 * MIN)  # minutes 1, 2 run; 3 waits as PENDING
    lab.clock.advance(4 * MIN)  # the leader is down until 09:06:30
    now = lab.clock.now_ms()
    done = lab.store.backfill_schedule("tick", minute(4), now, now)
    assert (done.added, done.existing) == (0, 3)  # catch-up still plans them
    lab.ran.clear()
    lab.run_for(2_000)
    assert sorted(lab.ran) == [minute(k) for k in range(3, 7)]  # each once


def test_a_backfill_under_overlap_skip_skips_what_would_overlap(lab: OpsLab) -> None:
    lab.cron(overlap="skip", catchup="none")
    lab.start()
    lab.clock.advance(5 * MIN)
    lab.run_for(1_000)
    lab.store.backfill_schedule("tick", minute(1), minute(4), lab.clock.now_ms())
    lab.ran.clear()
    lab.run_for(2_000)
    assert lab.ran == [minute(1)]  # 2 and 3 came due while 1 was running: skipped
    rows = lab.store.runs(RunQuery(schedule="tick"), lab.clock.now_ms())
    outcome = {r.key: (r.outcome, r.error) for r in rows}
    assert outcome[f"backfill:tick:{minute(2)}"] == ("skipped", "overlap")


def test_an_occurrence_planned_after_its_backfill_does_not_run_again(lab: OpsLab) -> None:
    """Found by ``cronlab verify --seed 6957``: an operator whose clock runs ahead backfills
    minutes 3 and 4 of a paused schedule; the schedule resumes on the cluster's clock, before
    minute 3, and plans minute 3 again. Each occurrence runs once: the one planned after its
    backfill is SKIPPED ("backfilled")."""
    lab.cron(overlap="allow", catchup="none")
    lab.start()
    lab.run_for(2 * MIN)  # minutes 1, 2 run
    lab.store.pause_schedule("tick", lab.clock.now_ms())
    ahead = minute(5)  # the operator's clock: about 2.5 minutes fast
    done = lab.store.backfill_schedule("tick", minute(3), minute(5), ahead)
    assert (done.added, done.existing) == (2, 0)
    lab.store.resume_schedule("tick", lab.clock.now_ms())
    lab.ran.clear()
    lab.run_for(4 * MIN)
    assert sorted(lab.ran) == [minute(3), minute(4), minute(5), minute(6)]  # each once
    rows = lab.store.runs(RunQuery(schedule="tick"), lab.clock.now_ms())
    outcome = {r.key: (r.outcome, r.error) for r in rows}
    assert outcome[f"schedule:tick:{minute(3)}"] == ("skipped", "backfilled")


def test_a_redefinition_on_a_clock_behind_an_occurrence_that_ran_plans_the_next(
    lab: OpsLab,
) -> None:
    """A deploy whose clock is behind the cluster's redefines the schedule: the next fire by
    its clock is minute 2, which already ran. The schedule goes on at minute 3; it used to
    stop for good, its next occurrence's insert refused by the key of the one that ran."""
    lab.cron(overlap="allow", catchup="none")
    lab.start()
    lab.run_for(2 * MIN)  # minutes 1, 2 run
    redefined = dataclasses.replace(lab.app.schedules["tick"], overlap="skip")
    assert lab.store.put_schedule(redefined, minute(2) - 10_000, replace=True)
    lab.ran.clear()
    lab.run_for(2 * MIN)
    assert sorted(lab.ran) == [minute(3), minute(4)]


def test_a_backfill_never_reaches_history_the_retention_deleted(lab: OpsLab) -> None:
    """Found by ``cronlab verify --seed 5285``: a backfill ran minute 1, the retention deleted
    its row, and a second backfill over minute 1 found no row and ran it again. Which of the
    occurrences whose rows are gone ran is not known: a range that reaches them is refused,
    with nothing written."""
    lab.cron(overlap="allow", catchup="none", catchup_window=timedelta(minutes=1))
    lab.start()
    lab.run_for(3 * MIN)  # minutes 1..3 run
    lab.clock.advance(2 * DAY)  # minute 4 is missed (catchup none), the newest occurrence
    lab.run_for(1_000)
    assert lab.scheduler is not None and lab.scheduler.lease is not None
    now, epoch = lab.clock.now_ms(), lab.scheduler.lease.epoch
    assert lab.store.prune_history(DAY, now, 1_000, epoch) > 0  # minutes 1..3, their events
    with pytest.raises(ConfigError, match=r"runs up to 2026-06-01T09:03:00\+00:00 were deleted"):
        lab.store.backfill_schedule("tick", minute(1), minute(3), now)
    assert not [e for e in lab.store.events() if e.kind == "backfilled"]
    keys = {r[0] for r in lab.store.query(lab.store.own("SELECT idempotency_key FROM tasks"))}
    assert not any(k.startswith("backfill:") for k in keys)
    done = lab.store.backfill_schedule("tick", minute(4), minute(10), now)
    assert (done.added, done.existing) == (6, 0)  # after the deleted history: as ever


def test_a_resume_on_a_clock_behind_never_plans_a_fire_that_fired_even_once_pruned(
    lab: OpsLab,
) -> None:
    """Found by ``cronlab verify --seed 43603`` (100,000-seed run at 49e5425): a resume on a
    machine whose clock had jumped back planned a fire that had run and whose row the
    retention had deleted, and ran it again. A schedule's plan never goes back before its
    last fire (``last_fire_ms``, which the retention never deletes)."""
    lab.cron(overlap="allow", catchup="none", catchup_window=timedelta(minutes=1))
    lab.start()
    lab.run_for(3 * MIN)  # minutes 1..3 run
    lab.store.pause_schedule("tick", lab.clock.now_ms())
    lab.clock.advance(2 * DAY)
    lab.run_for(1_000)
    assert lab.scheduler is not None and lab.scheduler.lease is not None
    now, epoch = lab.clock.now_ms(), lab.scheduler.lease.epoch
    lab.store.prune_history(DAY, now, 1_000, epoch)  # minutes 1, 2 go; 3 is the last fire
    assert lab.store.resume_schedule("tick", minute(1) + 30_000)  # a clock 2 days behind
    pending = lab.store.query(
        lab.store.own("SELECT trigger_ms FROM tasks WHERE status = 'PENDING'")
    )
    assert [p for (p,) in pending] == [minute(4)]


@pytest.mark.parametrize(
    ("start", "end", "why"),
    [
        (minute(3), minute(1), "--from must be before --to"),
        (minute(1), minute(1000), "--to is in the future"),
        (minute(-2000), minute(0), "more than 1,000 occurrences"),
    ],
)
def test_a_bad_backfill_range_writes_nothing(lab: OpsLab, start: int, end: int, why: str) -> None:
    lab.cron()
    before = lab.store.counts()
    with pytest.raises(ConfigError, match=why):
        lab.store.backfill_schedule("tick", start, end, lab.clock.now_ms())
    assert lab.store.counts() == before
    assert not [e for e in lab.store.events() if e.kind == "backfilled"]


def test_a_pause_keeps_its_note_until_resumed(lab: OpsLab) -> None:
    lab.cron()
    now = lab.clock.now_ms()
    assert lab.store.pause_schedule("tick", now, note="  db migration, back at 10:00 ")
    assert lab.store.get_schedule("tick").paused_note == "db migration, back at 10:00"
    assert lab.store.resume_schedule("tick", now)
    assert lab.store.get_schedule("tick").paused_note is None
    kinds = [(e.kind, e.detail.get("note")) for e in lab.store.events()]
    assert kinds == [("paused", "db migration, back at 10:00"), ("resumed", None)]
    with pytest.raises(ConfigError, match="at most 500"):
        lab.store.pause_schedule("tick", now, note="x" * 501)


def _old_history(lab: OpsLab, n: int) -> None:
    """``n`` one-off tasks 40 days old, run; the schedule's runs of the last minutes."""
    lab.store.add_tasks(
        NewTask(f"old:{i}", "record", lab.clock.now_ms() - 40 * DAY) for i in range(n)
    )


def test_the_retention_prunes_old_finished_runs_in_batches_and_keeps_what_is_needed(
    lab: OpsLab,
) -> None:
    lab.cron(catchup_window=timedelta(days=60))
    lab.start()
    _old_history(lab, 25)
    lab.store.add_tasks([NewTask("old:pending", "record", lab.clock.now_ms() + 40 * DAY)])
    lab.run_for(3 * MIN)
    retention = Retention(lab.store, lab.clock, keep_ms=30 * DAY, batch=10)
    assert lab.scheduler is not None
    lab.scheduler.duties = [retention]
    lab.clock.advance(31 * DAY)  # the schedule's runs are old now too, but its window is 60 d
    lab.run_for(3_000)
    assert retention.pruned >= 25  # 10 a scan while a batch comes back full
    keys = {r[0] for r in lab.store.query(lab.store.own("SELECT idempotency_key FROM tasks"))}
    assert not any(k.startswith("old:") and k != "old:pending" for k in keys)
    assert "old:pending" in keys  # PENDING: never
    assert f"schedule:tick:{minute(1)}" in keys  # inside its catch-up window
    left = lab.store.query(
        lab.store.own(
            "SELECT count(*) FROM executions e LEFT JOIN tasks t ON t.id = e.task_id"
            " WHERE t.id IS NULL"
        )
    )
    assert left[0][0] == 0


def test_the_retention_keeps_a_schedules_newest_occurrence(lab: OpsLab) -> None:
    lab.cron()
    lab.start()
    lab.run_for(3 * MIN)
    lab.store.pause_schedule("tick", lab.clock.now_ms())
    lab.clock.advance(31 * DAY)
    lab.run_for(1_000)
    assert lab.scheduler is not None and lab.scheduler.lease is not None
    now, epoch = lab.clock.now_ms(), lab.scheduler.lease.epoch
    lab.store.prune_history(30 * DAY, now, 100, epoch)
    left = [
        r[0]
        for r in lab.store.query(lab.store.own("SELECT trigger_ms FROM tasks ORDER BY trigger_ms"))
    ]
    assert left == [minute(3)]  # last_fire_ms: what catch-up plans from


def test_a_stale_leader_prunes_nothing(lab: OpsLab) -> None:
    _old_history(lab, 5)
    lab.store.query("SELECT 1")
    with pytest.raises(FencedError):
        lab.store.prune_history(30 * DAY, lab.clock.now_ms() + 50 * DAY, 100, epoch=7)
    assert lab.store.counts()["PENDING"] == 5


def test_keep_is_a_delay_of_an_hour_or_more() -> None:
    assert parse_keep("30d") == 30 * DAY
    with pytest.raises(ConfigError, match="at least 1h"):
        parse_keep("59m")
    with pytest.raises(ConfigError, match="bad delay"):
        parse_keep("forever")
