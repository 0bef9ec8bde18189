"""``cronlab schedule next`` run as a user runs it: a subprocess."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from shell import cronlab

pytestmark = pytest.mark.acceptance


def test_spring_forward_in_berlin_from_the_shell() -> None:
    out = cronlab(
        "schedule", "next", "30 2 * * *", "--tz", "Europe/Berlin", "--after", "2026-03-28T12:00"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "2026-03-29T03:00:00+02:00  # 02:30 skipped by the clock change: runs once at the jump",
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
        "2026-04-01T02:30:00+02:00",
        "2026-04-02T02:30:00+02:00",
    ]


def test_hourly_over_fall_back_in_new_york_as_json() -> None:
    out = cronlab(
        "schedule",
        "next",
        "@hourly",
        "--tz",
        "America/New_York",
        "--after",
        "2026-11-01T00:30:00-04:00",
        "--count",
        "3",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["kind"] == "wildcard"
    assert data["tz"] == "America/New_York"
    assert data["fires"] == [
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T02:00:00-05:00",
    ]
    assert data["notes"] == [
        "first of two 01:00s (clock set back): wildcard schedules run on both",
        "second of two 01:00s (clock set back): wildcard schedules run on both",
        None,
    ]
    assert [b - a for a, b in zip(data["fires_ms"], data["fires_ms"][1:], strict=False)] == [
        3_600_000,
        3_600_000,
    ]


def test_without_after_the_fires_are_in_the_future() -> None:
    before = datetime.now(UTC)
    out = cronlab("schedule", "next", "* * * * *", "--count", "2")
    assert out.returncode == 0, out.stderr
    fires = [datetime.fromisoformat(line) for line in out.stdout.splitlines()]
    assert len(fires) == 2 and before < fires[0] < fires[1]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["61 * * * *"], "'61 * * * *'"),
        (["0 0 30 2 *"], "never fires"),
        (["0 * * * *", "--tz", "Mars/Olympus"], "'Mars/Olympus'"),
        (["0 * * * *", "--after", "yesterday"], "'yesterday'"),
        (["0 * * * *", "--count", "0"], "--count"),
        # Issue 28 item 13: a superscript digit passes str.isdigit() and int() refuses it.
        (["\u00b9 * * * *"], "'\u00b9' is not a minute value"),
        (["1-\u0663 * * * *"], "'\u0663' is not a minute value"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(args: list[str], needle: str) -> None:
    out = cronlab("schedule", "next", *args)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cronlab: error: ")
    assert needle in lines[0]
