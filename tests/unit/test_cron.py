"""Cron expressions in a zone: Vixie cron / cronie DST rules on the 2026 transitions."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from cronlab.core import cron
from cronlab.exceptions import ConfigError

BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"


def local(zone: str, text: str, fold: int = 0) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone), fold=fold)


def take(expr: str, zone: str, after: datetime, n: int) -> list[str]:
    return [
        t.isoformat() for t in itertools.islice(cron.fires_after(cron.parse(expr, zone), after), n)
    ]


def fires_on_local_day(expr: str, zone: str, day: str) -> list[datetime]:
    """The fire times whose instant lies within the local calendar day ``day``."""
    start = local(zone, f"{day}T00:00")
    end = local(zone, (datetime.fromisoformat(day) + timedelta(days=1)).date().isoformat())
    fires = cron.fires_after(cron.parse(expr, zone), start - timedelta(seconds=1))
    return list(itertools.takewhile(lambda t: t < end, fires))


# --- fixed-time schedules: skipped wall time fires once at the jump, repeated wall time once


@pytest.mark.parametrize(
    ("expr", "zone", "after", "expected"),
    [
        (
            "30 2 * * *",
            BERLIN,
            "2026-03-28T12:00",
            ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"],
        ),
        (
            "0 2 * * *",
            BERLIN,
            "2026-03-28T12:00",
            ["2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"],
        ),
        (
            "30 2 * * *",
            NEW_YORK,
            "2026-03-07T12:00",
            ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"],
        ),
        (
            "59 2 * * *",
            NEW_YORK,
            "2026-03-07T12:00",
            ["2026-03-08T03:00:00-04:00", "2026-03-09T02:59:00-04:00"],
        ),
    ],
)
def test_fixed_time_skipped_by_spring_forward_fires_once_at_the_jump(
    expr: str, zone: str, after: str, expected: list[str]
) -> None:
    assert take(expr, zone, local(zone, after), 2) == expected


@pytest.mark.parametrize(
    ("expr", "zone", "after", "expected"),
    [
        (
            "30 2 * * *",
            BERLIN,
            "2026-10-24T12:00",
            ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"],
        ),
        (
            "0 2 * * *",
            BERLIN,
            "2026-10-24T12:00",
            ["2026-10-25T02:00:00+02:00", "2026-10-26T02:00:00+01:00"],
        ),
        (
            "30 1 * * *",
            NEW_YORK,
            "2026-10-31T12:00",
            ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"],
        ),
    ],
)
def test_fixed_time_repeated_by_fall_back_fires_once_first_occurrence(
    expr: str, zone: str, after: str, expected: list[str]
) -> None:
    assert take(expr, zone, local(zone, after), 2) == expected


def test_fixed_time_asked_during_the_repeated_hour_does_not_fire_again() -> None:
    second_pass = local(BERLIN, "2026-10-25T02:10", fold=1)  # 02:10 CET, after 02:30 CEST ran
    assert second_pass.utcoffset() == timedelta(hours=1)
    assert take("30 2 * * *", BERLIN, second_pass, 1) == ["2026-10-26T02:30:00+01:00"]


def test_several_skipped_wall_times_fire_once_together() -> None:
    fires = fires_on_local_day("0,30 2 * * *", NEW_YORK, "2026-03-08")
    assert [t.isoformat() for t in fires] == ["2026-03-08T03:00:00-04:00"]
    fires = fires_on_local_day("0 2,3 * * *", BERLIN, "2026-03-29")
    assert [t.isoformat() for t in fires] == ["2026-03-29T03:00:00+02:00"]


def test_asking_from_the_jump_instant_moves_on_to_the_next_day() -> None:
    jump = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert take("30 2 * * *", BERLIN, jump, 1) == ["2026-03-30T02:30:00+02:00"]
    assert take("30 2 * * *", BERLIN, jump - timedelta(milliseconds=1), 1) == [
        "2026-03-29T03:00:00+02:00"
    ]


# --- wildcard schedules: real elapsed time


@pytest.mark.parametrize(
    ("zone", "spring", "fall"),
    [(BERLIN, "2026-03-29", "2026-10-25"), (NEW_YORK, "2026-03-08", "2026-11-01")],
)
def test_hourly_fires_23_times_on_spring_forward_day_and_25_on_fall_back_day(
    zone: str, spring: str, fall: str
) -> None:
    for expr in ("0 * * * *", "@hourly"):
        assert len(fires_on_local_day(expr, zone, spring)) == 23
        assert len(fires_on_local_day(expr, zone, fall)) == 25
        assert len(fires_on_local_day(expr, zone, "2026-06-15")) == 24


@pytest.mark.parametrize(("zone", "spring", "fall"), [(BERLIN, "2026-03-29", "2026-10-25")])
def test_wildcard_fires_are_evenly_spaced_in_real_time(zone: str, spring: str, fall: str) -> None:
    for day, count in ((spring, 23 * 4), (fall, 25 * 4)):
        fires = fires_on_local_day("*/15 * * * *", zone, day)
        assert len(fires) == count
        # Same-zone aware datetimes subtract as wall times in Python: compare in UTC.
        utc = [t.astimezone(UTC) for t in fires]
        gaps = {b - a for a, b in itertools.pairwise(utc)}
        assert gaps == {timedelta(minutes=15)}


def test_hourly_during_fall_back_fires_on_both_passes_of_the_repeated_hour() -> None:
    after = local(NEW_YORK, "2026-11-01T00:30")
    assert take("@hourly", NEW_YORK, after, 3) == [
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T02:00:00-05:00",
    ]


def test_wildcard_minute_in_a_skipped_hour_never_fires_that_day() -> None:
    assert fires_on_local_day("* 2 * * *", BERLIN, "2026-03-29") == []
    assert len(fires_on_local_day("* 2 * * *", BERLIN, "2026-10-25")) == 120


def test_seconds_field_keeps_ticking_across_the_jump() -> None:
    jump = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    fires = take("* * * * * *", BERLIN, jump - timedelta(seconds=3), 4)
    assert fires == [
        "2026-03-29T01:59:58+01:00",
        "2026-03-29T01:59:59+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T03:00:01+02:00",
    ]
    assert take("* * * * * */20", "UTC", datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC), 2) == [
        "2026-01-01T00:00:20+00:00",
        "2026-01-01T00:00:40+00:00",
    ]


# --- the rest of the expression language, parsing and errors


def test_aliases_expand_and_pick_their_dst_rule() -> None:
    after = datetime(2026, 1, 1, 0, 30, tzinfo=UTC)
    for alias, expansion in cron.ALIASES.items():
        assert take(alias, BERLIN, after, 3) == take(expansion, BERLIN, after, 3)
    assert cron.parse("@daily").fixed and not cron.parse("@hourly").fixed
    assert not cron.parse("0 */2 * * *").fixed and not cron.parse("0-59/5 3 * * *").fixed
    assert cron.parse("0,30 9-17 * * MON-FRI").fixed


def test_day_fields_are_croniters() -> None:
    after = datetime(2026, 1, 1, tzinfo=UTC)
    assert take("0 9 * * MON", "UTC", after, 2) == [
        "2026-01-05T09:00:00+00:00",
        "2026-01-12T09:00:00+00:00",
    ]
    assert take("0 0 29 2 *", "UTC", after, 1) == ["2028-02-29T00:00:00+00:00"]
    assert take("0 0 L * *", "UTC", after, 2) == [
        "2026-01-31T00:00:00+00:00",
        "2026-02-28T00:00:00+00:00",
    ]


def test_fire_times_are_strictly_after_and_aware_in_the_zone() -> None:
    after = local(BERLIN, "2026-05-01T10:00:00.500")
    first = cron.next_after(cron.parse("0 10 * * *", BERLIN), after)
    assert first.isoformat() == "2026-05-02T10:00:00+02:00"
    assert first.tzinfo == ZoneInfo(BERLIN)
    exact = local(BERLIN, "2026-05-01T10:00")
    assert cron.next_after(cron.parse("* * * * *", BERLIN), exact) == exact + timedelta(minutes=1)


@pytest.mark.parametrize(
    ("expr", "needle"),
    [
        ("61 * * * *", "'61 * * * *'"),
        ("0 0 * *", "expected 5 fields"),
        ("* * * * * * *", "expected 5 fields"),
        ("", "expected 5 fields"),
        ("@reboot", "'@reboot'"),
        ("0 0 30 2 *", "never fires"),
        ("H * * * *", "'H * * * *'"),
        ("0 0 * * 8", "'0 0 * * 8'"),
    ],
)
def test_bad_expressions_raise_config_error_naming_them(expr: str, needle: str) -> None:
    with pytest.raises(ConfigError, match="bad cron expression") as info:
        cron.parse(expr, "UTC")
    assert needle in str(info.value)


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../../etc/passwd", "/etc/localtime"])
def test_unknown_zone_raises_config_error_naming_it(name: str) -> None:
    with pytest.raises(ConfigError, match="unknown time zone") as info:
        cron.parse("0 * * * *", name)
    assert repr(name) in str(info.value)


def test_naive_after_is_refused() -> None:
    with pytest.raises(ConfigError, match="without a UTC offset"):
        cron.next_after(cron.parse("0 * * * *"), datetime(2026, 1, 1))


def test_next_change_finds_the_2026_transitions_to_the_second() -> None:
    tz = ZoneInfo(BERLIN)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    spring = cron.next_change(tz, start, start + timedelta(days=365))
    assert spring == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    fall = cron.next_change(tz, spring, start + timedelta(days=365))
    assert fall == datetime(2026, 10, 25, 1, 0, tzinfo=UTC)
    assert cron.next_change(ZoneInfo("UTC"), start, start + timedelta(days=365)) is None


# --- unusual zones and the ends of time


def test_a_whole_skipped_day_fires_a_fixed_time_once_at_the_jump() -> None:
    # Samoa skipped 30 Dec 2011, jumping from -10:00 to +14:00 at midnight.
    after = local("Pacific/Apia", "2011-12-29T13:00")
    assert take("0 12 * * *", "Pacific/Apia", after, 2) == [
        "2011-12-31T00:00:00+14:00",
        "2011-12-31T12:00:00+14:00",
    ]
    assert take("@hourly", "Pacific/Apia", local("Pacific/Apia", "2011-12-29T22:30"), 2) == [
        "2011-12-29T23:00:00-10:00",
        "2011-12-31T00:00:00+14:00",
    ]


def test_midnight_transitions_in_santiago() -> None:
    zone = "America/Santiago"  # 2026: 00:00 → 01:00 on 6 Sep, 00:00 → 23:00 on 5 Apr
    assert take("@daily", zone, local(zone, "2026-09-05T12:00"), 2) == [
        "2026-09-06T01:00:00-03:00",
        "2026-09-07T00:00:00-03:00",
    ]
    assert take("30 23 * * *", zone, local(zone, "2026-04-04T12:00"), 2) == [
        "2026-04-04T23:30:00-03:00",
        "2026-04-05T23:30:00-04:00",
    ]


@pytest.mark.parametrize(
    ("expr", "after"),
    [
        ("0 0 * * *", datetime(9999, 12, 31, 12, tzinfo=UTC)),
        ("0 0 1 1 *", datetime(9998, 6, 1, tzinfo=UTC)),
        ("0 0 1 1 *", datetime(1, 1, 1, tzinfo=ZoneInfo(BERLIN))),
    ],
)
def test_running_off_the_calendar_is_a_config_error(expr: str, after: datetime) -> None:
    with pytest.raises(ConfigError, match="within years 1-9999"):
        take(expr, BERLIN if after.tzinfo != UTC else "UTC", after, 3)


def test_year_one_still_works_in_utc() -> None:
    assert take("0 0 1 1 *", "UTC", datetime(1, 1, 1, tzinfo=UTC), 1) == [
        "0002-01-01T00:00:00+00:00"
    ]


def test_dst_notes_explain_the_fires_a_clock_change_shaped() -> None:
    def notes(expr: str, zone: str, after: str, n: int) -> list[str | None]:
        c = cron.parse(expr, zone)
        return [
            cron.dst_note(c, t)
            for t in itertools.islice(cron.fires_after(c, local(zone, after)), n)
        ]

    assert notes("30 2 * * *", BERLIN, "2026-03-28T12:00", 2) == [
        "02:30 skipped by the clock change: runs once at the jump",
        None,
    ]
    assert notes("30 1 * * *", NEW_YORK, "2026-10-31T12:00", 2) == [
        "01:30 happens twice (clock set back): runs on the first pass only",
        None,
    ]
    assert notes("0 3 * * *", BERLIN, "2026-03-28T12:00", 1) == [None]  # 03:00 was not skipped
    assert notes("@hourly", BERLIN, "2026-03-29T01:30", 1) == [None]
    assert notes("@hourly", BERLIN, "2026-10-25T01:30", 3) == [
        "first of two 02:00s (clock set back): wildcard schedules run on both",
        "second of two 02:00s (clock set back): wildcard schedules run on both",
        None,
    ]
