"""Matching naive wall times of an expanded cron expression, in order: croniter's walk for the
plain grammar (no ``L``, no ``#``), about fifty times cheaper per fire.

The schedulers and the simulator walk fire times all day long (planning, catch-up, backfill,
the console's next fires); croniter builds a parser per walk and a ``relativedelta`` per step.
This walks days, and within a matching day the sorted hours, minutes and seconds.
``tests/unit/test_cron_walk.py`` checks it against croniter on generated expressions.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from datetime import date, datetime, timedelta

Fields = tuple[frozenset[int] | None, ...]  # minute, hour, dom, month, dow, second; None: *

_SECOND = timedelta(seconds=1)
_DAY = timedelta(days=1)


def walk(fields: Fields, origin: datetime, *, day_or: bool) -> Iterator[datetime]:
    """Every matching naive wall time strictly after ``origin``, without end (OverflowError
    past year 9999). ``day_or``: either day field is enough, unless one of them is a star."""
    minutes, hours, doms, months, dows, seconds = fields
    hs, ms, ss = _sorted(hours, 24), _sorted(minutes, 60), _sorted(seconds, 60)
    start = origin.replace(microsecond=0) + _SECOND
    day, floor = start.date(), (start.hour, start.minute, start.second)
    while True:
        if months is not None and day.month not in months:
            day = _next_month(day)
            floor = (0, 0, 0)
            continue
        if _day_matches(day, doms, dows, day_or):
            for h, m, s in _times(hs, ms, ss, floor):
                yield datetime(day.year, day.month, day.day, h, m, s)
        day += _DAY
        floor = (0, 0, 0)


def _sorted(values: frozenset[int] | None, size: int) -> list[int]:
    return list(range(size)) if values is None else sorted(values)


def _next_month(day: date) -> date:
    return date(day.year + 1, 1, 1) if day.month == 12 else date(day.year, day.month + 1, 1)


def _day_matches(
    day: date, doms: frozenset[int] | None, dows: frozenset[int] | None, day_or: bool
) -> bool:
    dom_ok = doms is None or day.day in doms
    dow_ok = dows is None or day.isoweekday() % 7 in dows
    if day_or and doms is not None and dows is not None:
        return dom_ok or dow_ok
    return dom_ok and dow_ok


def _times(
    hs: list[int], ms: list[int], ss: list[int], floor: tuple[int, int, int]
) -> Iterator[tuple[int, int, int]]:
    """(h, m, s) in order, each at or after ``floor``."""
    fh, fm, fs = floor
    for h in hs[bisect.bisect_left(hs, fh) :]:
        for m in ms[bisect.bisect_left(ms, fm) :] if h == fh else ms:
            for s in ss[bisect.bisect_left(ss, fs) :] if (h, m) == (fh, fm) else ss:
                yield h, m, s
