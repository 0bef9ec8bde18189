"""cron_syntax's expansion and cron_walk's walk against croniter: the same naive wall times, in
the same order, for generated expressions and generated start times (cronlab expands and walks
on its own; croniter stays the reference).

Out of scope, because croniter and cronie disagree and cronlab follows cronie: a day field
holding a ``*`` item that is not its first (``0,*``) while the other day field is restricted.
croniter reads the field as ``*`` and requires both day fields; cronie's rule (neither field
starts with ``*``) makes either enough, so it fires every day. Until issue 28 cronlab took
croniter's expansion, and so its reading. ``D#K``, ``DL`` and ``L`` are compared only where
croniter requires both day fields too (the other one starts with ``*``): beside a restricted
day field croniter requires both and cronie's rule either (issue 28 item 18, pinned in
test_cron_syntax.py).
"""

from __future__ import annotations

import itertools
from datetime import datetime

from croniter import croniter
from hypothesis import assume, given, settings
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
    except ConfigError:  # it never fires, so parse refuses it
        return
    assume(not (parsed.day_or and "*" in expr.split()[2] + expr.split()[4]))  # see the top
    checked = cron_syntax.normalise(expr, expr)
    want = reference(checked.text, checked.day_or, origin, 40)
    got = list(itertools.islice(cron_walk.walk(parsed.fields, origin, day_or=parsed.day_or), 40))
    assert got == want, (expr, checked.text, origin)


# croniter refuses a plain weekday beside D#K or DL (5#2,6), which cronsim and cronlab accept.
SPECIALS = ["l", "5#2", "0#1", "3#5", "l5", "l0", "1#1,l4", "2#3,2#4"]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.sampled_from(["0", "*/20", "5,35"]),
    st.sampled_from(["0", "*/7", "9-11"]),
    st.sampled_from(SPECIALS),
    st.sampled_from(["*", "2", "*/3", "1-6"]),
    st.datetimes(datetime(1999, 1, 1), datetime(2100, 1, 1)),
)
def test_specials_match_croniter_where_both_day_fields_are_required(
    minute: str, hour: str, special: str, month: str, origin: datetime
) -> None:
    expr = (
        f"{minute} {hour} {special} {month} *"
        if special == "l"
        else (f"{minute} {hour} * {month} {special}")
    )
    parsed = cron.parse(expr)
    assert not parsed.day_or
    want = reference(parsed.spec, False, origin, 12)
    got = list(itertools.islice(cron_walk.walk(parsed.fields, origin, day_or=False), 12))
    assert got == want, (expr, parsed.spec, origin)


def test_specials_are_walked_here() -> None:
    """L, D#K and DL are members of the day fields' sets, not left to croniter's walk."""
    assert cron.parse("0 0 L * *").fields.last_dom
    assert cron.parse("0 0 * * 5L").fields.nth_dows == {(5, cron_walk.LAST)}
    assert cron.parse("0 0 * * L3").fields.nth_dows == {(3, cron_walk.LAST)}
    assert cron.parse("0 0 * * 7#2").fields.nth_dows == {(0, 2)}
    assert cron.parse("0 0 * * 1-5,L0").fields.dows == {1, 2, 3, 4, 5}


def first(expr: str, n: int) -> list[datetime]:
    parsed = cron.parse(expr)
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
