"""Cron expressions in a time zone, with Vixie cron / cronie daylight-saving rules.

:mod:`cron_syntax` checks and expands the expression and :mod:`cron_walk` walks its *naive
wall-clock* times only; every rule that involves a time zone is applied here, in UTC
arithmetic, so the result does not depend on a library's DST policy (croniter, cronsim,
APScheduler and Quartz all differ there).

The rules (cronie's, see docs/scheduling.md):

* **Fixed-time** expressions (a specific minute AND a specific hour: no ``*`` and no ``/`` in
  either field, e.g. ``30 2 * * *``) fire once per matching wall time. A wall time skipped by
  spring-forward fires once, at the jump; several skipped wall times (``0,30 2 * * *``) fire
  once together. A wall time repeated by fall-back fires once, at its first occurrence.
* **Wildcard** expressions (``*`` or a step in the minute or hour field, e.g. ``0 * * * *``,
  ``*/15 * * * *``, ``0 */2 * * *``) fire at every instant whose wall clock matches: skipped
  wall times never happen, repeated ones happen twice. Hourly is 23 fires on the
  spring-forward day and 25 on the fall-back day: real elapsed time.

Expressions have 5 fields (minute hour day-of-month month day-of-week) or 6, the sixth being
seconds (croniter's order), or are one of the aliases in :data:`ALIASES`. Fire times are
aware datetimes in the expression's zone, always on whole seconds.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronlab.core import cron_syntax, cron_walk
from cronlab.exceptions import ConfigError

ALIASES: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

SECOND = timedelta(seconds=1)
DAY = timedelta(days=1)
_EARLIEST = datetime(1, 1, 3, tzinfo=UTC)
# next_change probes a zone's offset once a day: tzdata has no two transitions within a day.


@dataclass(frozen=True, kw_only=True)
class Cron:
    """A validated cron expression bound to a time zone.

    ``spec`` is the expression as checked by :mod:`cron_syntax` (aliases expanded, croniter's
    spelling); ``fields`` what :mod:`cron_walk` walks; ``day_or``: either day field is enough
    (cronie's rule); ``fixed`` says which DST rule applies (see the module docstring).
    """

    expr: str
    tz: ZoneInfo
    spec: str
    fixed: bool
    day_or: bool
    fields: cron_walk.Fields  # the values each field matches


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``; ConfigError naming it if it is unknown or malformed."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        message = f"unknown time zone {name!r} (use an IANA name like 'Europe/Berlin')"
        raise ConfigError(message) from None


@functools.lru_cache(maxsize=1024)
def parse(expr: str, tz: str = "UTC") -> Cron:
    """Validate ``expr`` and ``tz``; ConfigError naming the bad value otherwise.

    An expression that can never fire (``0 0 30 2 *``) is rejected too.
    """
    spec = ALIASES.get(expr.strip().lower(), " ".join(expr.split()))
    fields = spec.split(" ")
    if len(fields) not in (5, 6):
        raise ConfigError(
            f"bad cron expression {expr!r}: expected 5 fields (6 with seconds) or one of "
            f"{', '.join(ALIASES)}"
        )
    checked = cron_syntax.normalise(expr, spec)
    if not cron_walk.fires_ever(checked.fields, day_or=checked.day_or):
        raise ConfigError(f"bad cron expression {expr!r}: it never fires")
    return Cron(
        expr=expr,
        tz=zone(tz),
        spec=checked.text,
        fixed=_is_fixed(checked.text.split(" ")),
        day_or=checked.day_or,
        fields=checked.fields,
    )


def _is_fixed(fields: list[str]) -> bool:
    # cronie's test is "does the field start with '*'"; a step like 0-59/5 is just as much a
    # "run every so often" field, so any '*' or '/' in minute or hour makes it a wildcard.
    return not any(ch in field for field in fields[:2] for ch in "*/")


def next_after(cron: Cron, after: datetime) -> datetime:
    """The first fire time strictly after the aware datetime ``after``, in ``cron.tz``."""
    return next(fires_after(cron, after))


def fires_after(cron: Cron, after: datetime) -> Iterator[datetime]:
    """Every fire time strictly after the aware datetime ``after``, in order, without end.

    Running past the years datetime supports (1-9999) raises ConfigError.
    """
    if after.tzinfo is None:
        raise ConfigError(f"a time without a UTC offset is ambiguous: {after.isoformat()}")
    return _in_range(cron, after)


def _in_range(cron: Cron, after: datetime) -> Iterator[datetime]:
    try:
        # Fire times are whole seconds, so "after the floored second" is "after `after`".
        start = after.astimezone(UTC).replace(microsecond=0)
        walk = _fixed_fires if cron.fixed else _wildcard_fires
        for instant in walk(cron, start):
            yield instant.astimezone(cron.tz)
    except ConfigError:
        raise
    except (OverflowError, ValueError):
        message = f"no fire time of {cron.expr!r} after {after.isoformat()} within years 1-9999"
        raise ConfigError(message) from None


def _wildcard_fires(cron: Cron, start: datetime) -> Iterator[datetime]:
    """Every instant after ``start`` whose wall clock matches, walked segment by segment.

    Between two offset changes, wall time minus the offset is UTC: one wall-clock walk per
    segment; a candidate beyond the segment's end restarts the walk at the change.
    """
    inclusive = False
    while True:
        offset, checked = _offset(cron.tz, start), start
        for wall in _walls(cron, _wall(cron.tz, start), inclusive=inclusive):
            instant = (wall - offset).replace(tzinfo=UTC)
            change = next_change(cron.tz, checked, instant)
            if change is not None:
                break
            yield instant
            checked = instant
        assert change is not None, "wall-clock walks are endless"
        start, inclusive = change, True


def _fixed_fires(cron: Cron, start: datetime) -> Iterator[datetime]:
    """The first instant at which each matching wall time is reached, once per instant."""
    last: datetime | None = None
    for wall in _walls(cron, _high_water(cron.tz, start), inclusive=False):
        instant = first_reached(cron.tz, wall)
        if instant != last:
            yield instant
        last = instant


def _high_water(tz: ZoneInfo, at: datetime) -> datetime:
    """The latest wall time already reached at ``at`` (after fall-back it is ahead of now)."""
    wall = _wall(tz, at)
    if at < _EARLIEST:  # no day before year 1 to look back on
        return wall
    change = next_change(tz, at - DAY, at)
    if change is None:
        return wall
    reached = (change + _offset(tz, at - DAY)).replace(tzinfo=None) - SECOND
    return max(wall, reached)


def first_reached(tz: ZoneInfo, wall: datetime) -> datetime:
    """The first UTC instant at which the clock in ``tz`` shows ``wall`` or later.

    That is the first occurrence of a repeated wall time, and the jump itself for a wall time
    that spring-forward skips.
    """
    instant = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if _wall(tz, instant) == wall:
        return instant
    # In a gap, fold=0 reads the wall time with the old offset (after the jump) and fold=1
    # with the new one (before it), so the jump lies between the two.
    before = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    change = next_change(tz, before, instant)
    assert change is not None, "a skipped wall time lies in a gap"
    return change


def next_change(tz: ZoneInfo, start: datetime, limit: datetime) -> datetime | None:
    """The first UTC instant in (start, limit] whose UTC offset differs from ``start``'s."""
    offset = _offset(tz, start)
    lo = start
    while lo < limit:
        hi = min(lo + DAY, limit)
        if _offset(tz, hi) != offset:
            return _bisect(tz, lo, hi, offset)
        lo = hi
    return None


def _bisect(tz: ZoneInfo, lo: datetime, hi: datetime, offset: timedelta) -> datetime:
    """Narrow (lo, hi] to the second at which the offset stops being ``offset``."""
    lo, hi = lo.replace(microsecond=0), hi.replace(microsecond=0)
    while hi - lo > SECOND:
        mid = lo + (hi - lo) // 2
        mid = mid.replace(microsecond=0)
        if _offset(tz, mid) == offset:
            lo = mid
        else:
            hi = mid
    return hi


def _walls(cron: Cron, start: datetime, *, inclusive: bool) -> Iterator[datetime]:
    """Matching naive wall times after ``start`` (or at it, if ``inclusive``)."""
    origin = start - SECOND if inclusive else start
    return cron_walk.walk(cron.fields, origin, day_or=cron.day_or)


def _offset(tz: ZoneInfo, instant: datetime) -> timedelta:
    offset = instant.astimezone(tz).utcoffset()
    assert offset is not None
    return offset


def _wall(tz: ZoneInfo, instant: datetime) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None)


def dst_note(cron: Cron, fire: datetime) -> str | None:
    """Why a fire time looks unusual, if a clock change shaped it; None for ordinary ones.

    For people reading ``cronlab schedule next``: a fixed time skipped and run at the jump, a
    fixed time repeated and run on its first pass only, a wildcard fire on either pass.
    """
    instant = fire.astimezone(UTC)
    wall = _wall(cron.tz, instant)
    if cron.fixed and (skipped := _skipped_match(cron, instant)) is not None:
        return f"{skipped:%H:%M} skipped by the clock change: runs once at the jump"
    passes = {wall.replace(tzinfo=cron.tz, fold=f).astimezone(UTC) for f in (0, 1)}
    if len(passes) == 1:
        return None
    if cron.fixed:
        return f"{wall:%H:%M} happens twice (clock set back): runs on the first pass only"
    which = "first" if instant == min(passes) else "second"
    return f"{which} of two {wall:%H:%M}s (clock set back): wildcard schedules run on both"


def _skipped_match(cron: Cron, instant: datetime) -> datetime | None:
    """The first matching wall time the clock jumped over at ``instant``, if it jumped."""
    before, after = _offset(cron.tz, instant - SECOND), _offset(cron.tz, instant)
    if after <= before:
        return None
    gap_start = (instant + before).replace(tzinfo=None)
    first = next(_walls(cron, gap_start, inclusive=True))
    return first if first < (instant + after).replace(tzinfo=None) else None
