"""The public test suites of croniter, cronsim and robfig/cron, run through cronlab's parser and
walker (issue 28): their vectors are what users expect of a cron expression.

The vectors are data in ``tests/unit/cron_vectors/`` (its README.md says where each file comes
from, at which commit, how it was transcribed, and under which licence). Every vector gives the
answer its suite expects; cronlab's answer must be the same, or the vector is listed in
``differences.json`` with the reason and cronie's answer, and with cronlab's own answer, which
this test pins too: a listed vector whose answer changes fails, so the list stays true.

Two spellings are translated before cronlab reads an expression, and are not differences of
meaning: a six-field expression whose *first* field is seconds (cronsim, robfig/cron, croniter's
``second_at_beginning``) has that field moved last, where cronlab takes it; and robfig's
``TZ=Zone`` / ``CRON_TZ=Zone`` prefix becomes the time zone cronlab takes as an argument.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronlab.core import cron, cron_walk
from cronlab.exceptions import ConfigError

HERE = Path(__file__).parent / "cron_vectors"
SUITES = ("croniter", "cronsim", "robfig")
SECOND = timedelta(seconds=1)
Vector = dict[str, Any]


def suite(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HERE / f"{name}.json").read_text())
    return data


def differences() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HERE / "differences.json").read_text())
    return data


def cronlab_spelling(vector: Vector, seconds_first: bool) -> tuple[str, str]:
    """(expression, zone) as cronlab takes them: the module docstring's two translations."""
    expr, tz = vector["expr"], vector.get("tz", "UTC")
    head, _, rest = expr.partition(" ")
    if head.startswith(("TZ=", "CRON_TZ=")):
        expr, tz = rest.strip(), head.partition("=")[2]
    fields = expr.split()
    first = seconds_first or vector.get("options", {}).get("second_at_beginning", False)
    if first and len(fields) == 6:
        expr = " ".join([*fields[1:], fields[0]])
    return expr, tz


def answer(vector: Vector, seconds_first: bool) -> Any:
    """cronlab's answer to ``vector``, in the shape of the vector's expected answer."""
    expr, tz = cronlab_spelling(vector, seconds_first)
    try:
        parsed = cron.parse(expr, tz)
    except ConfigError as exc:
        if vector["kind"] == "never" and "never fires" in str(exc):
            return "never"
        return False if vector["kind"] == "valid" else "refused"
    return ANSWERS[vector["kind"]](parsed, vector)


def expected(vector: Vector) -> Any:
    kind = vector["kind"]
    if kind == "fields":
        return normal_fields(vector["fields"])
    if kind == "valid":
        return vector["valid"]
    if kind == "never":
        return "never"
    return vector["fires"]  # next, prev, range: fire times; match: whether one falls inside


def same(a: Any, b: Any) -> bool:
    """Equal answers; fire times are equal when they are the same instant, whatever the offset
    a suite wrote them with (robfig's Sao Paulo fires are in New York's offset)."""
    if isinstance(a, list) and isinstance(b, list) and all(isinstance(x, str) for x in a + b):
        return [when(x) for x in a] == [when(x) for x in b]
    return bool(a == b)


def when(text: str) -> datetime:
    return datetime.fromisoformat(text)


def iso(times: list[datetime]) -> list[str]:
    return [t.isoformat() for t in times]


def next_fires(parsed: cron.Cron, vector: Vector) -> list[str]:
    walk = cron.fires_after(parsed, when(vector["start"]))
    return iso(list(itertools.islice(walk, len(vector["fires"]))))


def prev_fires(parsed: cron.Cron, vector: Vector) -> list[str]:
    found, before = [], when(vector["start"])
    for _ in vector["fires"]:
        before = last_before(parsed, before)
        found.append(before)
    return iso(found)


def last_before(parsed: cron.Cron, instant: datetime) -> datetime:
    """The last fire time strictly before ``instant`` (cronlab walks forwards only). In UTC:
    two datetimes of one zone compare and subtract by wall clock, fold ignored."""
    instant, span = instant.astimezone(UTC), timedelta(hours=1)
    while True:
        walk = (t.astimezone(UTC) for t in cron.fires_after(parsed, instant - span))
        fires = list(itertools.takewhile(lambda t: t < instant, walk))
        if fires:
            return fires[-1].astimezone(parsed.tz)
        span *= 4


def grain(parsed: cron.Cron) -> timedelta:
    return SECOND if len(parsed.spec.split()) == 6 else timedelta(minutes=1)


def matches(parsed: cron.Cron, vector: Vector) -> bool:
    """A fire time in [from, to], ``from`` floored to the expression's grain (minute or second,
    as croniter.match and croniter.match_range read it)."""
    start, end = when(vector["from"]).astimezone(UTC), when(vector["to"]).astimezone(UTC)
    floor = start - (start - datetime(2000, 1, 1, tzinfo=UTC)) % grain(parsed)
    return cron.next_after(parsed, floor - SECOND) <= end


def fires_between(parsed: cron.Cron, vector: Vector) -> list[str]:
    """croniter_range: the fires from start to stop, both ends included unless exclude_ends,
    in the order of the two (start after stop walks backwards)."""
    start, stop = when(vector["start"]), when(vector["stop"])
    low, high = min(start, stop).astimezone(UTC), max(start, stop).astimezone(UTC)
    inside = vector.get("options", {}).get("exclude_ends", False)
    walk = cron.fires_after(parsed, low if inside else low - timedelta(microseconds=1))
    found = list(itertools.takewhile(lambda t: t < high if inside else t <= high, walk))
    return iso(found if start <= stop else found[::-1])


def fields_of(parsed: cron.Cron, vector: Vector) -> dict[str, Any]:
    f = parsed.fields
    mine: dict[str, Any] = {
        "minute": f.minutes,
        "hour": f.hours,
        "dom": f.doms,
        "month": f.months,
        "dow": f.dows,
        "second": f.seconds,
        "dom_last": f.last_dom,
        "dow_nth": [[d, "L" if k == cron_walk.LAST else k] for d, k in f.nth_dows],
    }
    wanted = vector["fields"]
    if "second" not in wanted:
        del mine["second"]
    return normal_fields(mine)


def never(parsed: cron.Cron, vector: Vector) -> str:
    return f"fires at {cron.next_after(parsed, when(vector['start'])).isoformat()}"


FULL = {
    "minute": range(60),
    "hour": range(24),
    "dom": range(1, 32),
    "month": range(1, 13),
    "dow": range(7),
    "second": range(60),
}


def normal_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Every field as a sorted list ('*' spelled out, weekday 7 as 0), the specials as lists."""
    out: dict[str, Any] = {"dom_last": bool(fields.get("dom_last", False))}
    for name, full in FULL.items():
        if name in fields:
            values = full if fields[name] == "*" else fields[name]
            out[name] = sorted({v % 7 if name == "dow" else v for v in values})
    out["dow_nth"] = sorted([d % 7, k] for d, k in fields.get("dow_nth", []))
    if fields.get("dom_last_weekday"):
        out["dom_last_weekday"] = True
    return out


ANSWERS = {
    "next": next_fires,
    "prev": prev_fires,
    "match": matches,
    "range": fires_between,
    "valid": lambda parsed, vector: True,
    "never": never,
    "fields": fields_of,
}


def cases() -> list[tuple[str, Vector, bool]]:
    out = []
    for name in SUITES:
        data = suite(name)
        first = data["seconds_field"] == "first"
        out += [(name, vector, first) for vector in data["vectors"]]
    return out


CASES = cases()
LISTED = differences()


@pytest.mark.parametrize(
    ("name", "vector", "seconds_first"), CASES, ids=[f"{n}:{v['id']}" for n, v, _ in CASES]
)
def test_vector(name: str, vector: Vector, seconds_first: bool) -> None:
    mine = answer(vector, seconds_first)
    listed = LISTED["vectors"][name].get(vector["id"])
    if listed is None:
        assert same(mine, expected(vector)), (vector, mine)
    else:
        assert not same(mine, expected(vector)), f"{vector['id']} passes now: take it off the list"
        assert listed["reason"] in LISTED["reasons"]
        assert same(mine, listed["cronlab"]), (vector, mine)


def test_the_list_names_only_vectors_that_exist() -> None:
    for name in SUITES:
        ids = {v["id"] for v in suite(name)["vectors"]}
        assert set(LISTED["vectors"][name]) <= ids
    used = Counter(d["reason"] for s in LISTED["vectors"].values() for d in s.values())
    assert set(used) == set(LISTED["reasons"])  # no reason without a vector
