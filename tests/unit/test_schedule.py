"""Schedules, catch-up, overlap and occurrence keys on a fake clock (epoch ms arguments)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from cronlab.core import delays, policy
from cronlab.core.policy import HOUR_MS, MISFIRE_THRESHOLD_MS, Schedule
from cronlab.exceptions import ConfigError

MIN_MS = 60_000


def ms(text: str) -> int:
    return policy.to_ms(datetime.fromisoformat(text))


def hourly(**changes: Any) -> Schedule:
    fields: dict[str, Any] = {"name": "report", "cron": "0 * * * *", "task": "bill"}
    return Schedule(**(fields | changes))


T0 = ms("2026-06-01T00:00:00+00:00")  # an hourly fire time


# --- the Schedule value


def test_schedule_defaults() -> None:
    s = hourly()
    assert (s.tz, s.catchup, s.catchup_window_ms, s.overlap, s.paused) == (
        "UTC",
        "latest",
        HOUR_MS,
        "skip",
        False,
    )
    assert s.payload == {}


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"cron": "0 0 * *"}, "'0 0 * *'"),
        ({"tz": "Europe/Berlinn"}, "'Europe/Berlinn'"),
        ({"catchup": "some"}, "'some'"),
        ({"overlap": "queue"}, "'queue'"),
        ({"catchup_window_ms": -1}, "-1"),
        ({"name": ""}, "schedule name ''"),
        ({"name": "a:b"}, "'a:b'"),
        ({"name": "x" * 101}, "schedule name"),
        ({"task": "no spaces"}, "'no spaces'"),
        ({"payload": {"when": datetime(2026, 1, 1, tzinfo=UTC)}}, "not plain JSON"),
        ({"payload": {"x": float("nan")}}, "not plain JSON"),
        ({"payload": [1, 2]}, "[1, 2]"),
    ],
)
def test_bad_schedule_raises_config_error_naming_the_value(
    changes: dict[str, Any], needle: str
) -> None:
    with pytest.raises(ConfigError) as info:
        hourly(**changes)
    assert needle in str(info.value)


def test_schedule_is_hashable_and_keeps_its_own_payload() -> None:
    payload = {"plan": "pro", "seats": [1, 2]}
    s = hourly(payload=payload)
    payload["plan"] = "free"
    assert s.payload == {"plan": "pro", "seats": [1, 2]}
    assert hash(s) == hash(hourly(payload={"other": True}))  # payload is not hashed
    assert s != hourly(payload={"other": True})
    assert {s: 1}[hourly(payload={"plan": "pro", "seats": [1, 2]})] == 1


def test_schedule_is_frozen_and_keyword_only() -> None:
    s = hourly()
    with pytest.raises(AttributeError):
        s.paused = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        Schedule("report", "0 * * * *", "bill")  # type: ignore[misc]


# --- next fire


def test_next_fire_is_strictly_after_in_epoch_ms() -> None:
    assert policy.next_fire(hourly(), T0 - 1) == T0
    assert policy.next_fire(hourly(), T0) == T0 + HOUR_MS
    berlin = hourly(cron="30 2 * * *", tz="Europe/Berlin")
    jump = ms("2026-03-29T01:00:00+00:00")  # 02:30 does not exist that night
    assert policy.next_fire(berlin, jump - 1) == jump


def test_occurrences_are_a_half_open_interval() -> None:
    got = policy.occurrences(hourly(), T0, T0 + 3 * HOUR_MS)
    assert got == [T0 + HOUR_MS, T0 + 2 * HOUR_MS, T0 + 3 * HOUR_MS]


# --- catch-up after downtime


def test_catchup_all_runs_every_missed_occurrence_in_the_window_oldest_first() -> None:
    s = hourly(catchup="all", catchup_window_ms=3 * HOUR_MS)
    now = T0 + 5 * HOUR_MS + 10 * MIN_MS  # down since just after T0
    assert policy.plan_catchup(s, T0, now) == [T0 + h * HOUR_MS for h in (3, 4, 5)]


def test_catchup_window_bound_is_inclusive() -> None:
    s = hourly(catchup="all", catchup_window_ms=2 * HOUR_MS)
    now = T0 + 4 * HOUR_MS
    assert policy.plan_catchup(s, T0, now) == [T0 + h * HOUR_MS for h in (2, 3, 4)]
    assert policy.plan_catchup(s, T0, now + 1) == [T0 + h * HOUR_MS for h in (3, 4)]


def test_catchup_latest_runs_one_for_all_missed() -> None:
    s = hourly(catchup="latest", catchup_window_ms=3 * HOUR_MS)
    now = T0 + 5 * HOUR_MS + 10 * MIN_MS
    assert policy.plan_catchup(s, T0, now) == [T0 + 5 * HOUR_MS]


def test_catchup_latest_outside_the_window_runs_nothing() -> None:
    s = hourly(catchup="latest", catchup_window_ms=5 * MIN_MS)
    assert policy.plan_catchup(s, T0, T0 + HOUR_MS + 10 * MIN_MS) == []


def test_catchup_none_skips_to_the_next() -> None:
    s = hourly(catchup="none")
    now = T0 + 5 * HOUR_MS + 10 * MIN_MS
    assert policy.plan_catchup(s, T0, now) == []
    assert policy.next_fire(s, now) == T0 + 6 * HOUR_MS


@pytest.mark.parametrize("catchup", ["all", "latest", "none"])
def test_an_occurrence_planned_on_time_runs_under_every_policy(catchup: str) -> None:
    s = hourly(catchup=catchup)
    assert policy.plan_catchup(s, T0, T0 + HOUR_MS) == [T0 + HOUR_MS]
    late = T0 + HOUR_MS + MISFIRE_THRESHOLD_MS
    assert policy.plan_catchup(s, T0, late) == [T0 + HOUR_MS]
    missed = policy.plan_catchup(s, T0, late + 1)
    assert missed == ([] if catchup == "none" else [T0 + HOUR_MS])


def test_latest_runs_the_newest_missed_and_every_on_time_one() -> None:
    every_20s = hourly(cron="* * * * * */20", catchup="latest")
    now = T0 + 3 * MIN_MS
    # 00:00:20 … 00:01:40 are missed (one run: 00:01:40); 00:02:00 … 00:03:00 are on time.
    assert policy.plan_catchup(every_20s, T0, now) == [
        T0 + 100_000,
        T0 + 120_000,
        T0 + 140_000,
        T0 + 160_000,
        T0 + 180_000,
    ]


def test_never_fired_schedule_has_missed_nothing() -> None:
    assert policy.plan_catchup(hourly(catchup="all"), None, T0 + 10 * HOUR_MS) == []


def test_nothing_due_yet() -> None:
    assert policy.plan_catchup(hourly(catchup="all"), T0, T0 + HOUR_MS - 1) == []


def test_catchup_across_fall_back_runs_both_hourly_fires_of_the_repeated_hour() -> None:
    s = hourly(tz="Europe/Berlin", catchup="all", catchup_window_ms=4 * HOUR_MS)
    last = ms("2026-10-25T01:00:00+02:00")
    now = ms("2026-10-25T03:30:00+01:00")
    assert policy.plan_catchup(s, last, now) == [
        ms("2026-10-25T02:00:00+02:00"),
        ms("2026-10-25T02:00:00+01:00"),
        ms("2026-10-25T03:00:00+01:00"),
    ]


# --- dispatching a materialised occurrence


def test_an_on_time_occurrence_runs_and_materialises_the_next() -> None:
    plan = policy.plan_dispatch(hourly(), T0, T0 + 250)
    assert plan == policy.DispatchPlan(run=True, catch_up=(), next_fire_ms=T0 + HOUR_MS)


@pytest.mark.parametrize(
    ("catchup", "run", "catch_up"),
    [
        ("all", True, (T0 + HOUR_MS, T0 + 2 * HOUR_MS)),
        ("latest", False, (T0 + 2 * HOUR_MS,)),
        ("none", False, ()),
    ],
)
def test_a_late_occurrence_is_judged_with_the_ones_missed_after_it(
    catchup: str, run: bool, catch_up: tuple[int, ...]
) -> None:
    s = hourly(catchup=catchup, catchup_window_ms=3 * HOUR_MS)
    now = T0 + 2 * HOUR_MS + 10 * MIN_MS  # the T0 row waited through two more fire times
    plan = policy.plan_dispatch(s, T0, now)
    assert (plan.run, plan.catch_up, plan.next_fire_ms) == (run, catch_up, T0 + 3 * HOUR_MS)


def test_an_occurrence_older_than_the_window_does_not_run() -> None:
    s = hourly(catchup="all", catchup_window_ms=30 * MIN_MS)
    plan = policy.plan_dispatch(s, T0, T0 + 45 * MIN_MS)
    assert not plan.run and plan.catch_up == ()


# --- overlap and idempotency keys


@pytest.mark.parametrize(
    ("overlap", "running", "decision"),
    [
        ("allow", False, "run"),
        ("allow", True, "run"),
        ("skip", False, "run"),
        ("skip", True, "skip"),
    ],
)
def test_overlap_decision(overlap: str, running: bool, decision: str) -> None:
    assert policy.overlap_decision(hourly(overlap=overlap), running) == decision


def test_occurrence_key_is_stable_and_parses_back() -> None:
    key = policy.occurrence_key("report", T0)
    assert key == f"schedule:report:{T0}"
    assert policy.occurrence_key("report", T0) == key
    assert policy.occurrence_key("report", T0 + 1) != key
    assert policy.occurrence_key("report-2", T0) != key
    assert policy.parse_occurrence_key(key) == ("report", T0)
    with pytest.raises(ConfigError, match="'task:7'"):
        policy.parse_occurrence_key("task:7")


def test_ms_conversions_are_exact() -> None:
    stamp = 1_790_000_000_123
    assert policy.to_ms(policy.from_ms(stamp)) == stamp
    assert policy.from_ms(0) == datetime(1970, 1, 1, tzinfo=UTC)


# --- durable timers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3d", 3 * 86_400_000),
        ("2h", 2 * HOUR_MS),
        ("90s", 90_000),
        ("15m", 15 * MIN_MS),
        ("250ms", 250),
        ("1h30m", 90 * MIN_MS),
        (" 2H ", 2 * HOUR_MS),
    ],
)
def test_parse_delay(text: str, expected: int) -> None:
    assert delays.parse_delay(text) == expected


@pytest.mark.parametrize("text", ["", "3", "d", "3 days", "-2h", "0s", "1.5h", "2w", "h2"])
def test_bad_delay_raises_config_error_naming_it(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        delays.parse_delay(text)
    assert repr(text) in str(info.value)


def test_parse_at_needs_an_offset() -> None:
    assert delays.parse_at("2026-06-01T00:00:00Z") == T0
    assert delays.parse_at("2026-06-01T02:00:00+02:00") == T0
    with pytest.raises(ConfigError, match="no UTC offset"):
        delays.parse_at("2026-06-01T00:00:00")
    with pytest.raises(ConfigError, match="'tomorrow'"):
        delays.parse_at("tomorrow")


def test_due_ms_takes_at_most_one_of_in_and_at_and_neither_is_now() -> None:
    assert delays.due_ms(now_ms=T0, delay="3d") == T0 + 3 * 86_400_000
    assert delays.due_ms(now_ms=T0 + 5, at="2026-06-01T00:00:00Z") == T0
    assert delays.due_ms(now_ms=T0) == T0 == delays.due_ms(now_ms=T0, delay="0s")
    with pytest.raises(ConfigError, match="not both"):
        delays.due_ms(now_ms=T0, delay="1h", at="2026-06-01T00:00:00Z")
    with pytest.raises(ConfigError, match="positive"):
        delays.parse_delay("0s")  # (a keep or a window of nothing is still refused)
