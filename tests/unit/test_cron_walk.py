"""cron_walk against croniter: the same naive wall times, in the same order, for generated
expressions of the plain grammar and generated start times (the walk replaced croniter's for
speed; croniter stays the reference)."""

from __future__ import annotations

import itertools
from datetime import datetime

from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from cronlab.core import cron, cron_syntax, cron_walk
from cronlab.exceptions import ConfigError

FIELDS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7), (0, 59)]


@st.composite
def items(draw: st.DrawFn, low: int, high: int) -> str:
    a = draw(st.integers(low, high))
    b = draw(st.integers(a, high))
    step = draw(st.integers(1, high - low + 1))
    return draw(
        st.sampled_from(["*", f"*/{step}", str(a), f"{a}/{step}", f"{a}-{b}", f"{a}-{b}/{step}"])
    )


@st.composite
def expressions(draw: st.DrawFn) -> str:
    width = draw(st.sampled_from([5, 6]))
    fields = []
    for low, high in FIELDS[:width]:
        parts = draw(st.lists(items(low, high), min_size=1, max_size=3))
        fields.append(",".join(parts))
    return " ".join(fields)


def reference(spec: str, day_or: bool, origin: datetime, n: int) -> list[datetime]:
    return list(itertools.islice(croniter(spec, origin, day_or=day_or).all_next(datetime), n))


@settings(max_examples=600, deadline=None, derandomize=True)
@given(
    expressions(),
    st.datetimes(datetime(1999, 1, 1), datetime(2100, 1, 1)),
    st.booleans(),
)
def test_the_walk_matches_croniter(expr: str, origin: datetime, whole: bool) -> None:
    if whole:
        origin = origin.replace(microsecond=0)
    try:
        parsed = cron.parse(expr)
    except ConfigError:  # it never fires: croniter refuses it, so parse does
        return
    assert parsed.fields is not None
    checked = cron_syntax.normalise(expr, expr)
    want = reference(checked.text, checked.day_or, origin, 40)
    got = list(itertools.islice(cron_walk.walk(parsed.fields, origin, day_or=parsed.day_or), 40))
    assert got == want, (expr, checked.text, origin)


def test_specials_are_left_to_croniter() -> None:
    for expr in ("0 0 L * *", "0 0 * * 5L", "0 0 * * 1#2", "0 0 * * L3"):
        assert cron.parse(expr).fields is None
    assert cron.parse("*/5 * * * *").fields is not None


def first(expr: str, n: int) -> list[datetime]:
    parsed = cron.parse(expr)
    assert parsed.fields is not None
    return list(
        itertools.islice(
            cron_walk.walk(parsed.fields, datetime(2026, 3, 1), day_or=parsed.day_or), n
        )
    )


def test_day_fields_combine_as_cronie() -> None:
    """Either day field when both are restricted; both when either starts with '*'."""
    mondays_and_1_15 = [(3, 2), (3, 9), (3, 15), (3, 16), (3, 23), (3, 30), (4, 1), (4, 6)]
    assert [(t.month, t.day) for t in first("0 0 1,15 * mon", 8)] == mondays_and_1_15
    assert all(t.day % 2 == 1 and t.isoweekday() == 6 for t in first("0 16 */2 * sat", 10))
