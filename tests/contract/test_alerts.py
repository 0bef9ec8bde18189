"""Missed and failing runs alert (issue 16), on every backend, through the real scheduler and
worker loops on a fake clock: raised by the leader once per condition, recorded, said, sent
(and retried) through a webhook whose POST is recorded here. The real HTTP receiver and the
real cluster: tests/integration/test_alerts_cluster.py."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest

from cronlab.ports import Alert
from cronlab.runtime.alerts import Alerter, Sender, Webhook, signature
from cronlab.runtime.retention import Retention

from .conftest import Backend
from .ops_lab import MIN, OpsLab, minute, ops_lab


class Hook:
    """A webhook that fails its first ``failures`` POSTs, then records them."""

    def __init__(self, failures: int = 0) -> None:
        self.failures, self.bodies, self.tries = failures, [], 0
        self.bodies: list[tuple[bytes, str]] = []

    def __call__(self, hook: Webhook, body: bytes, alert_id: int) -> None:
        self.tries += 1
        if self.tries <= self.failures:
            raise ConnectionError("receiver down")
        assert hook.secret is not None
        self.bodies.append((body, signature(hook.secret, body)))


HOOK = Webhook(url="http://127.0.0.1:9/hook", secret=b"s3cret")


def armed(lab: OpsLab, hook: Hook) -> tuple[Alerter, list[str]]:
    said: list[str] = []
    sender = Sender(HOOK, send=hook)
    alerter = Alerter(lab.store, lab.clock, "scheduler-0", sender, say=said.append)
    lab.start(duties=[alerter])
    return alerter, said


@pytest.fixture
def lab(backend: Backend) -> OpsLab:
    return ops_lab(backend.store)


def settle(lab: OpsLab, rounds: int = 5) -> None:
    """Let the sender thread answer and the next rounds record it."""
    for _ in range(rounds):
        time.sleep(0.05)
        lab.run_for(1_000)


def test_a_handler_that_keeps_failing_alerts_once_per_streak(lab: OpsLab) -> None:
    lab.cron(alert_on_failures=3)
    hook = Hook()
    _, said = armed(lab, hook)
    lab.failing = True
    lab.run_for(6 * MIN)  # six failed runs: one streak
    settle(lab)
    alerts = lab.store.alerts.recent(10)
    assert [(a.kind, a.subject) for a in alerts] == [("failing", f"schedule:tick:{minute(1)}")]
    assert alerts[0].delivery == "delivered"
    assert alerts[0].detail["failures"] == 3
    assert alerts[0].detail["error"] == f"RuntimeError: boom at {minute(3)}"
    assert len(hook.bodies) == 1
    body = json.loads(hook.bodies[0][0])
    assert body["kind"] == "failing" and body["schedule"] == "tick"
    assert "3 runs in a row failed" in body["message"]
    assert said == [f"cronlab: alert {alerts[0].id}: {body['message']}"]
    assert [e.kind for e in lab.store.events()].count("alert") == 1
    lab.failing = False
    lab.run_for(MIN)
    lab.failing = True
    lab.run_for(3 * MIN + 15_000)  # a success ended the streak; three more failures
    kinds = [(a.kind, a.subject) for a in lab.store.alerts.recent(10)]
    assert kinds[0] == ("failing", f"schedule:tick:{minute(8)}") and len(kinds) == 2


def test_workers_down_alert_once_for_the_outage(lab: OpsLab) -> None:
    lab.cron(alert_after=timedelta(seconds=30))
    hook = Hook()
    armed(lab, hook)
    lab.run_for(50_000, work=False)  # minute 1 (due 30 s from now) waits 20 s
    assert lab.store.alerts.recent(10) == []
    lab.run_for(15_000, work=False)  # 35 s: past its alert_after
    alerts = lab.store.alerts.recent(10)
    assert [(a.kind, a.subject) for a in alerts] == [("late", str(minute(1)))]
    lab.run_for(5 * MIN, work=False)  # still down: the same outage
    assert len(lab.store.alerts.recent(10)) == 1
    settle(lab)
    assert (
        len(hook.bodies) == 1 and "started within 30 s" in json.loads(hook.bodies[0][0])["message"]
    )
    lab.run_for(MIN)  # workers back: the backlog runs, the next occurrence runs on time
    lab.run_for(2 * MIN, work=False)  # down again: a new outage, a new alert
    assert len(lab.store.alerts.recent(10)) == 2


def test_an_alert_the_retention_pruned_is_not_raised_again_for_the_same_outage(
    lab: OpsLab,
) -> None:
    """Found by ``cronlab verify`` (kind duties, seed 308): the retention deleted a delivered
    alert while its outage went on, and the leader raised it again. The newest alert of a
    schedule's kind is what says "already said": it is kept while its schedule exists."""
    lab.cron(alert_after=timedelta(seconds=30))
    hook = Hook()
    alerter = Alerter(lab.store, lab.clock, "scheduler-0", Sender(HOOK, send=hook))
    lab.start(duties=[alerter, Retention(lab.store, lab.clock, keep_ms=MIN, every_ms=1_000)])
    lab.run_for(65_000, work=False)  # minute 1 waits 35 s: past its alert_after
    for _ in range(5):  # the sender's thread delivers it (the workers still down)
        time.sleep(0.05)
        lab.run_for(1_000, work=False)
    assert [a.subject for a in lab.store.alerts.recent(10)] == [str(minute(1))]
    lab.run_for(5 * MIN, work=False)  # the same outage, the alert past the keep
    assert [a.subject for a in lab.store.alerts.recent(10)] == [str(minute(1))]
    assert len(hook.bodies) == 1
    lab.run_for(MIN)  # workers back: the backlog runs
    lab.run_for(2 * MIN, work=False)  # down again: a new outage, a new alert
    (newest, *_) = lab.store.alerts.recent(10)  # (the first, past the keep, may go now)
    assert int(newest.subject) > minute(6)


def test_runs_on_time_never_alert(lab: OpsLab) -> None:
    lab.cron(alert_after=timedelta(seconds=30), alert_on_failures=1)
    hook = Hook()
    alerter, said = armed(lab, hook)
    lab.run_for(10 * MIN)
    assert lab.store.alerts.recent(10) == [] and said == [] and alerter.raised == 0


def test_a_failed_delivery_is_retried_with_backoff(lab: OpsLab) -> None:
    lab.cron(alert_on_failures=1)
    hook = Hook(failures=2)
    armed(lab, hook)
    lab.failing = True
    lab.run_for(MIN + 5_000)
    settle(lab, rounds=8)  # tries at once, after 1 s, after 2 s
    (alert,) = lab.store.alerts.recent(10)
    assert (alert.delivery, alert.attempts, hook.tries) == ("delivered", 3, 3)
    assert len(hook.bodies) == 1


def test_a_stale_leader_raises_nothing(lab: OpsLab) -> None:
    from cronlab.exceptions import FencedError

    alert = Alert(id=0, schedule="tick", kind="late", subject="1", raised_ms=0)
    with pytest.raises(FencedError):
        lab.store.alerts.raise_alert(alert, epoch=9, holder="old")
    assert lab.store.alerts.recent(10) == []


def test_no_late_alert_goes_back_before_an_occurrence_already_alerted(lab: OpsLab) -> None:
    """Found by ``cronlab verify`` (kinds duties, skew, schedules; seed 1631): a leader whose
    clock ran behind took over after the retention had deleted the runs and the alert of an
    older occurrence, and alerted that occurrence a second time. Alerts move forward: once an
    occurrence was alerted late, none before it is."""
    lab.cron(alert_after=timedelta(seconds=30))
    alerter = Alerter(lab.store, lab.clock, "scheduler-1", None, say=lambda _: None)
    lab.start(duties=[alerter])
    lab.run_for(1_000, work=False)  # the lease
    assert lab.scheduler is not None and lab.scheduler.lease is not None
    now = lab.clock.now_ms()  # (raised by a leader whose clock was minutes ahead)
    newer = Alert(id=0, schedule="tick", kind="late", subject=str(minute(3)), raised_ms=now)
    assert lab.store.alerts.raise_alert(newer, lab.scheduler.lease.epoch, "scheduler-0")
    lab.run_for(70_000, work=False)  # minute 1 is 40 s late by this leader's clock
    assert [a.subject for a in lab.store.alerts.recent(10)] == [str(minute(3))]


def test_no_alert_is_raised_about_a_schedule_that_is_gone(lab: OpsLab) -> None:
    """Found by the 100,000-seed run at 49e5425 (seeds 24328, 37773, 42949, 57309, 71998,
    90986, 92277): the leader's alerter, on its cached list of schedules, raised a late alert
    about a schedule just removed; the retention had deleted that schedule's alerts (it keeps
    the newest only while the schedule exists), so the same condition was raised twice. An
    alert about a schedule that is no longer in the store is not raised."""
    lab.cron(alert_after=timedelta(seconds=30))
    lab.start()
    lab.run_for(1_000, work=False)  # the lease
    assert lab.scheduler is not None and lab.scheduler.lease is not None
    lab.store.remove_schedule("tick", lab.clock.now_ms())
    late = Alert(
        id=0, schedule="tick", kind="late", subject=str(minute(1)), raised_ms=lab.clock.now_ms()
    )
    assert lab.store.alerts.raise_alert(late, lab.scheduler.lease.epoch, "scheduler-0") is None
    assert lab.store.alerts.recent(10) == []
    assert not [e for e in lab.store.events() if e.kind == "alert"]
