"""The accepted cron syntax, exactly (docs/scheduling.md "Expressions"): cronie's readings where
croniter differs (bugs 12-14 of issue 12), each case failing before the syntax check."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronlab.core import cron
from cronlab.exceptions import ConfigError

START = datetime(2026, 5, 1, tzinfo=UTC)  # a Friday


def fires(expr: str, n: int = 4) -> list[str]:
    walk = cron.fires_after(cron.parse(expr), START)
    return [f"{next(walk):%m-%d %H:%M}" for _ in range(n)]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # Bug 12: a day field starting with * makes both day fields required (cronie).
        ("0 16 */2 * sat", ["05-09 16:00", "05-23 16:00", "06-13 16:00", "06-27 16:00"]),
        ("1 1 1-7 * */7", ["05-03 01:01", "06-07 01:01", "07-05 01:01", "08-02 01:01"]),
        ("0 0 * * mon", ["05-04 00:00", "05-11 00:00", "05-18 00:00", "05-25 00:00"]),
        ("0 0 ? * 1", ["05-04 00:00", "05-11 00:00", "05-18 00:00", "05-25 00:00"]),
        # ... and neither starting with * makes either enough.
        ("0 0 1,15 * mon", ["05-04 00:00", "05-11 00:00", "05-15 00:00", "05-18 00:00"]),
        # Bug 13: a range with equal ends is that one value.
        ("5-5 * * * *", ["05-01 00:05", "05-01 01:05", "05-01 02:05", "05-01 03:05"]),
        ("59-59/15 * * * *", ["05-01 00:59", "05-01 01:59", "05-01 02:59", "05-01 03:59"]),
        ("0 0 1 JAN-JAN *", ["01-01 00:00"] * 4),
        ("0 0 * * 0-0", ["05-03 00:00", "05-10 00:00", "05-17 00:00", "05-24 00:00"]),
        # The last and the nth weekday, in either spelling; the last day of the month.
        ("0 0 * * 5L", ["05-29 00:00", "06-26 00:00", "07-31 00:00", "08-28 00:00"]),
        ("0 0 * * L5", ["05-29 00:00", "06-26 00:00", "07-31 00:00", "08-28 00:00"]),
        ("0 0 * * 0L", ["05-31 00:00", "06-28 00:00", "07-26 00:00", "08-30 00:00"]),
        ("0 0 * * 7L", ["05-31 00:00", "06-28 00:00", "07-26 00:00", "08-30 00:00"]),
        ("0 0 * * FRI#2", ["05-08 00:00", "06-12 00:00", "07-10 00:00", "08-14 00:00"]),
        ("0 0 L * *", ["05-31 00:00", "06-30 00:00", "07-31 00:00", "08-31 00:00"]),
        ("0 0 * * 7", ["05-03 00:00", "05-10 00:00", "05-17 00:00", "05-24 00:00"]),
        ("50/5 23 * * *", ["05-01 23:50", "05-01 23:55", "05-02 23:50", "05-02 23:55"]),
        # Item 15: a day-of-week range to Sunday (SUN, 0 or 7) ends on Sunday.
        ("0 0 * * Mon-Sun", ["05-02 00:00", "05-03 00:00", "05-04 00:00", "05-05 00:00"]),
        ("0 0 * * Fri-Sun", ["05-02 00:00", "05-03 00:00", "05-08 00:00", "05-09 00:00"]),
        ("0 0 * * wed-0", ["05-02 00:00", "05-03 00:00", "05-06 00:00", "05-07 00:00"]),
        ("0 0 * * Sat-Sun", ["05-02 00:00", "05-03 00:00", "05-09 00:00", "05-10 00:00"]),
        ("0 0 * * 5-0", ["05-02 00:00", "05-03 00:00", "05-08 00:00", "05-09 00:00"]),
        ("0 0 * * Fri-0", ["05-02 00:00", "05-03 00:00", "05-08 00:00", "05-09 00:00"]),
        ("0 0 * * 1-7", ["05-02 00:00", "05-03 00:00", "05-04 00:00", "05-05 00:00"]),
        ("0 0 * * 1-0/2", ["05-03 00:00", "05-04 00:00", "05-06 00:00", "05-08 00:00"]),
        ("0 0 * * 7-0", ["05-03 00:00", "05-10 00:00", "05-17 00:00", "05-24 00:00"]),
        ("0 0 * * Sun-Sun", ["05-03 00:00", "05-10 00:00", "05-17 00:00", "05-24 00:00"]),
        # Item 16: L ends a day-of-month range: up to the month's last day.
        ("0 0 29-L * *", ["05-29 00:00", "05-30 00:00", "05-31 00:00", "06-29 00:00"]),
        ("0 0 25-L 2 *", ["02-25 00:00", "02-26 00:00", "02-27 00:00", "02-28 00:00"]),
        ("0 0 29-l 2 *", ["02-29 00:00"] * 4),
        ("0 0 1-L/8 * *", ["05-09 00:00", "05-17 00:00", "05-25 00:00", "06-01 00:00"]),
        ("0 0 31-L * *", ["05-31 00:00", "07-31 00:00", "08-31 00:00", "10-31 00:00"]),
        # Item 18: D#K and DL are day-of-week items like any other: with a restricted day of
        # month either field is enough; with a day field starting with * both must match.
        ("0 0 1 * 1#1", ["05-04 00:00", "06-01 00:00", "07-01 00:00", "07-06 00:00"]),
        ("0 0 15 * 5L", ["05-15 00:00", "05-29 00:00", "06-15 00:00", "06-26 00:00"]),
        ("0 0 1,15 * FRI#2", ["05-08 00:00", "05-15 00:00", "06-01 00:00", "06-12 00:00"]),
        ("0 0 L * 1#1", ["05-04 00:00", "05-31 00:00", "06-01 00:00", "06-30 00:00"]),
        ("0 0 * * 5L,6#1", ["05-02 00:00", "05-29 00:00", "06-06 00:00", "06-26 00:00"]),
        ("0 0 * * 1#1,1#3", ["05-04 00:00", "05-18 00:00", "06-01 00:00", "06-15 00:00"]),
        ("0 0 1-7 * */7", ["05-03 00:00", "06-07 00:00", "07-05 00:00", "08-02 00:00"]),
        # ... and a day field holding every day without starting with * is OR-ed too (cronie;
        # croniter reads 0,* as * and requires both day fields, as cronlab did before)
        ("0 0 1 * Mon-Sun", ["05-02 00:00", "05-03 00:00", "05-04 00:00", "05-05 00:00"]),
        ("0 0 1-31 * 1", ["05-02 00:00", "05-03 00:00", "05-04 00:00", "05-05 00:00"]),
        ("0 0 2 * 0,*", ["05-02 00:00", "05-03 00:00", "05-04 00:00", "05-05 00:00"]),
    ],
)
def test_fire_times_follow_cronie(expr: str, expected: list[str]) -> None:
    assert fires(expr) == expected


@pytest.mark.parametrize(
    ("expr", "named"),
    [
        ("0 0 * * R", "random values (R) are not supported"),  # bug 14
        ("R 0 * * *", "random values (R) are not supported"),
        ("H 0 * * *", "hashed values (H) are not supported"),
        ("* * 5-1 * *", "the range runs backwards (5 > 1)"),
        ("0 0 * * fri-mon", "the range runs backwards (5 > 1)"),
        ("0 0 * * sat-mon", "the range runs backwards (6 > 1)"),
        ("0 0 * * 7-1", "the range runs backwards (7 > 1)"),
        ("0 0 L-5 * *", "L (the last day) can only end a range"),
        ("0 0 L/2 * *", "L (the last day) takes no step"),
        ("0 L * * *", "'l' is not a hour value"),
        ("0 0 30-L 2 *", "it never fires"),
        ("1 1 */100 * MON#4", "it never fires"),  # the 1st that is a 4th Monday
        ("0 0 15W * *", "W (the nearest weekday) is not supported"),
        ("0 0 * * 5#6", "a 1st to a 5th"),
        ("61 * * * *", "61 is out of range 0-59"),
        ("*/0 * * * *", "a step of 0"),
        ("1-2-3 * * * *", "expected *, N, A-B"),
        ("0 0 * foo *", "'foo' is not a month value"),
        # Issue 28 items 13-14: only the ASCII digits 0-9 are digits, anywhere in a field.
        ("\u00b9 * * * *", "'\u00b9' is not a minute value"),
        ("\u0663 * * * *", "'\u0663' is not a minute value"),
        ("1-\u0663 * * * *", "'\u0663' is not a minute value"),
        ("*/\u0663 * * * *", "step '\u0663' is not a number"),
        ("0 0 * * 1#\u00b2", "'\u00b2' is not a number"),
        ("0 0 \uff11 * *", "'\uff11' is not a day of month value"),
        ("0 0 * * \u0665L", "'\u0665' is not a day of week value"),
        ("1" * 5000 + " * * * *", "is out of range 0-59"),
        # Item 17: L goes with a weekday number (cronsim and croniter refuse a name with L).
        ("0 0 * * MONL", "day of week 'MONL': L (the last) goes with a weekday number"),
        ("0 0 * * FRIL", "day of week 'FRIL': L (the last) goes with a weekday number"),
        ("0 0 * * LFRI", "day of week 'LFRI': L (the last) goes with a weekday number"),
    ],
)
def test_what_is_refused_is_named_in_one_line(expr: str, named: str) -> None:
    with pytest.raises(ConfigError) as info:
        cron.parse(expr)
    message = str(info.value)
    assert named in message and repr(expr) in message and "\n" not in message


def test_the_first_of_the_month_or_its_first_monday() -> None:
    """Item 18: 2027-01-01 is a Friday, and the 1st of a month."""
    walk = cron.fires_after(cron.parse("0 0 1 * 1#1"), datetime(2026, 12, 20, tzinfo=UTC))
    assert [f"{next(walk):%Y-%m-%d %a}" for _ in range(3)] == [
        "2027-01-01 Fri",
        "2027-01-04 Mon",
        "2027-02-01 Mon",
    ]
