"""Matching naive wall times of a parsed cron expression, in order.

The schedulers and the simulator walk fire times all day long (planning, catch-up, backfill,
the console's next fires), so this walks days, and within a matching day the sorted hours,
minutes and seconds; about fifty times cheaper per fire than croniter's walk, which builds a
parser per walk and a ``relativedelta`` per step. ``tests/unit/test_cron_walk.py`` checks it
against croniter on generated expressions; croniter stays the reference there, not a
dependency of the walk.

Days match as in cronie: day of month and day of week are each a set of days, and the last
day of the month (``L``), the K-th weekday D (``D#K``) and the last weekday D (``DL``) are
members of those sets like any number. With ``day_or`` either field is enough, otherwise both
must match (a field written ``*`` holds every day, so "both" is then the other field).
"""

from __future__ import annotations

import bisect
import calendar
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta

LAST = -1  # the K of a last weekday (DL): (5, LAST) is the last Friday

_SECOND = timedelta(seconds=1)
_DAY = timedelta(days=1)


@dataclass(frozen=True, kw_only=True)
class Fields:
    """The values each field matches; weekdays are 0 (Sunday) to 6."""

    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    doms: frozenset[int]
    months: frozenset[int]
    dows: frozenset[int]
    last_dom: bool = False  # L in day of month
    nth_dows: frozenset[tuple[int, int]] = frozenset()  # (weekday, K) for D#K, K LAST for DL


def walk(fields: Fields, origin: datetime, *, day_or: bool) -> Iterator[datetime]:
    """Every matching naive wall time strictly after ``origin``, without end (OverflowError
    past year 9999). ``day_or``: either day field is enough (neither starts with ``*``)."""
    hs, ms, ss = sorted(fields.hours), sorted(fields.minutes), sorted(fields.seconds)
    start = origin.replace(microsecond=0) + _SECOND
    day, floor = start.date(), (start.hour, start.minute, start.second)
    while True:
        if day.month not in fields.months:
            day = _next_month(day)
            floor = (0, 0, 0)
            continue
        if day_matches(day, fields, day_or=day_or):
            for h, m, s in _times(hs, ms, ss, floor):
                yield datetime(day.year, day.month, day.day, h, m, s)
        day += _DAY
        floor = (0, 0, 0)


def fires_ever(fields: Fields, *, day_or: bool) -> bool:
    """Whether any day matches. 2001-2028 holds every (month, day, weekday, month length)
    there is, Feb 29 on each weekday included, so a day pattern that never matches there never
    matches at all (hours, minutes and seconds are never empty)."""
    day = date(2001, 1, 1)
    while day.year < 2029:
        if day.month not in fields.months:
            day = _next_month(day)
        elif day_matches(day, fields, day_or=day_or):
            return True
        else:
            day += _DAY
    return False


def day_matches(day: date, fields: Fields, *, day_or: bool) -> bool:
    """Whether ``day`` matches the day-of-month and day-of-week fields (not the month)."""
    dom_ok = day.day in fields.doms or (fields.last_dom and _days_left(day) == 0)
    weekday = day.isoweekday() % 7
    dow_ok = weekday in fields.dows or (
        bool(fields.nth_dows) and _is_nth(day, weekday, fields.nth_dows)
    )
    return (dom_ok or dow_ok) if day_or else (dom_ok and dow_ok)


def _is_nth(day: date, weekday: int, nths: frozenset[tuple[int, int]]) -> bool:
    """``day`` is a K-th (or the last, if ``_days_left`` < 7) weekday listed in ``nths``."""
    if (weekday, (day.day - 1) // 7 + 1) in nths:
        return True
    return (weekday, LAST) in nths and _days_left(day) < 7


def _days_left(day: date) -> int:
    return calendar.monthrange(day.year, day.month)[1] - day.day


def _next_month(day: date) -> date:
    return date(day.year + 1, 1, 1) if day.month == 12 else date(day.year, day.month + 1, 1)


def _times(
    hs: list[int], ms: list[int], ss: list[int], floor: tuple[int, int, int]
) -> Iterator[tuple[int, int, int]]:
    """(h, m, s) in order, each at or after ``floor``."""
    fh, fm, fs = floor
    for h in hs[bisect.bisect_left(hs, fh) :]:
        for m in ms[bisect.bisect_left(ms, fm) :] if h == fh else ms:
            for s in ss[bisect.bisect_left(ss, fs) :] if (h, m) == (fh, fm) else ss:
                yield h, m, s
