"""The DST walk against an independent oracle: cronie's minute-by-minute clock loop.

The oracle steps real time one minute at a time, like cron's main loop, reading the wall
clock. Wildcard schedules fire when the wall clock matches. Fixed-time schedules keep a
high-water mark of the wall clock: when it moves forward, every matching wall minute passed
over fires (once per step); when it moves back, nothing fires until it catches up.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from cronlab.core import cron

MINUTE = timedelta(minutes=1)
TRANSITIONS = {
    "Europe/Berlin": ["2026-03-29T01:00", "2026-10-25T01:00"],
    "America/New_York": ["2026-03-08T07:00", "2026-11-01T06:00"],
    # A 30-minute shift: fall back at 02:00 on Apr 5, spring forward at 02:00 on Oct 4.
    "Australia/Lord_Howe": ["2026-04-04T15:00", "2026-10-03T15:30"],
    # Transitions at local midnight: 00:00 → 23:00 on Apr 5, 00:00 → 01:00 on Sep 6.
    "America/Santiago": ["2026-04-05T03:00", "2026-09-06T04:00"],
    "UTC": ["2026-06-01T00:00"],
}
MINUTES = ["*", "*/15", "0", "30", "0,30", "5-10", "45", "*/7"]
HOURS = ["*", "*/2", "2", "1", "0-3", "3", "1,2", "23", "0", "22,23"]
SPAN = timedelta(days=3)


def wall_minutes_matching(spec: str) -> tuple[set[int], set[int]]:
    minutes, hours, *_ = croniter(spec).expanded
    all_hours = set(range(24)) if hours == ["*"] else {int(h) for h in hours}
    all_minutes = set(range(60)) if minutes == ["*"] else {int(m) for m in minutes}
    return all_minutes, all_hours


def oracle(spec: str, zone: str, after: datetime, until: datetime) -> list[datetime]:
    """Fires in (after, until] found by cron's clock loop, warmed up a day before ``after``."""
    minutes, hours = wall_minutes_matching(spec)
    tz = ZoneInfo(zone)
    fixed = not any(ch in field for field in spec.split()[:2] for ch in "*/")

    def matches(wall: datetime) -> bool:
        return wall.minute in minutes and wall.hour in hours

    t = (after - timedelta(days=1)).replace(second=0, microsecond=0)
    high = t.astimezone(tz).replace(tzinfo=None)
    found = []
    while t <= until:
        t += MINUTE
        wall = t.astimezone(tz).replace(tzinfo=None)
        if fixed:
            passed_over = max(0, (wall - high) // MINUTE)
            fire = any(matches(high + MINUTE * k) for k in range(1, passed_over + 1))
            high = max(high, wall)
        else:
            fire = matches(wall)
        if fire and after < t <= until:
            found.append(t)
    return found


@settings(max_examples=60, deadline=None)
@given(
    zone=st.sampled_from(sorted(TRANSITIONS)),
    pick=st.integers(0, 1),
    shift_min=st.integers(-36 * 60, 36 * 60),
    minute=st.sampled_from(MINUTES),
    hour=st.sampled_from(HOURS),
)
def test_fires_match_the_clock_loop_oracle_around_transitions(
    zone: str, pick: int, shift_min: int, minute: str, hour: str
) -> None:
    marks = TRANSITIONS[zone]
    moment = datetime.fromisoformat(marks[pick % len(marks)]).replace(tzinfo=UTC)
    after = moment + timedelta(minutes=shift_min, seconds=17)
    spec = f"{minute} {hour} * * *"
    until = after + SPAN
    walked = cron.fires_after(cron.parse(spec, zone), after)
    mine = [t.astimezone(UTC) for t in itertools.takewhile(lambda t: t <= until, walked)]
    assert mine == oracle(spec, zone, after, until)
