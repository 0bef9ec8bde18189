"""The cron syntax cronlab accepts, checked and expanded field by field.

The grammar (docs/scheduling.md, "Expressions", says the same with examples):

* 5 fields (minute hour day-of-month month day-of-week) or 6, seconds last; each a
  comma-separated list of items, each ``*``, ``N``, ``A-B``, ``*/S``, ``A-B/S`` or ``N/S`` (from
  N to the field's end, every S; in day of week to Saturday, ``7/S`` being ``0/S``); numbers
  are ASCII digits 0-9 only;
* ``A <= B``: a range that runs backwards (``5-1``) is refused instead of wrapping round (cronie
  installs it and the item matches nothing); in day of week a range whose end is Sunday
  (``SUN``, ``0``) ends on Sunday, 7 (``Mon-Sun``, ``5-0``), as cronie's ``get_range`` reads it;
* ranges with equal ends are the one value (``5-5`` is ``5``, ``59-59/15`` is ``59``), as in
  cronie (croniter would read them as the whole field);
* month: names ``JAN``-``DEC``; day of week: ``0``-``7`` (0 and 7 Sunday), names
  ``SUN``-``SAT``, ``D#K`` (the K-th weekday D of the month, K 1-5), ``DL`` or ``LD`` (the
  last weekday D of the month; D a number, as cronsim and croniter: ``MONL`` is refused); day
  of month: ``L`` (its last day), also as the end of a range (``29-L``, ``1-L/8``: up to the
  month's last day); ``?`` is ``*`` in either day field;
* refused, naming the token: ``H`` (hashed) and ``R`` (random), whose value would differ
  between processes, so replicas would disagree on when a schedule fires; ``W`` (nearest
  weekday).

Day of month and day of week combine as in cronie, whatever their items (``D#K``, ``DL`` and
``L`` included): when either field starts with ``*`` both must match (``0 16 */2 * sat`` is
Saturdays that are odd days); otherwise either is enough (``0 0 1,15 * mon`` is the 1st, the
15th and every Monday; ``0 0 1 * 1#1`` the 1st and each first Monday).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from cronlab.core import cron_walk
from cronlab.exceptions import ConfigError

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int]


_MINUTE = _Field("minute", 0, 59, {})
_HOUR = _Field("hour", 0, 23, {})
_DOM = _Field("day of month", 1, 31, {})
_MONTH = _Field("month", 1, 12, {m: i for i, m in enumerate(_MONTHS, 1)})
_DOW = _Field("day of week", 0, 7, {d: i for i, d in enumerate(_DAYS)})
_SECOND = _Field("second", 0, 59, {})
Bad = Callable[[str], ConfigError]
_ITEM = re.compile(r"^(\*|[^-/]+)(?:-([^-/]+))?(?:/([^-/]+))?$")
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: '¹' and '٣' pass str.isdigit()


@dataclass(frozen=True, kw_only=True)
class Spec:
    """A checked expression: its text in croniter's spelling (``*`` and steps kept, names and
    equal ranges resolved; the tests hand it to croniter as the reference), the values each
    field matches, and how its day fields combine."""

    text: str
    day_or: bool
    fields: cron_walk.Fields


@dataclass(frozen=True)
class _Part:
    """An item, or a whole field: its text and what it matches."""

    text: str
    values: frozenset[int] = frozenset()
    nths: frozenset[tuple[int, int]] = frozenset()  # day of week: (D, K) for D#K, (D, LAST) DL
    last: bool = False  # day of month: L


def normalise(expr: str, spec: str) -> Spec:
    """Check ``spec`` (5 or 6 space-separated fields) against the grammar above; ConfigError
    naming ``expr`` and the bad token otherwise."""
    texts = spec.split(" ")
    kinds = [_MINUTE, _HOUR, _DOM, _MONTH, _DOW, _SECOND][: len(texts)]
    out = [_field(expr, text, kind) for text, kind in zip(texts, kinds, strict=True)]
    minute, hour, dom, month, dow, *second = out
    fields = cron_walk.Fields(
        seconds=second[0].values if second else frozenset({0}),
        minutes=minute.values,
        hours=hour.values,
        doms=dom.values,
        months=month.values,
        dows=frozenset(v % 7 for v in dow.values),
        last_dom=dom.last,
        nth_dows=dow.nths,
    )
    day_or = not (dom.text.startswith("*") or dow.text.startswith("*"))
    return Spec(text=" ".join(p.text for p in out), day_or=day_or, fields=fields)


def _field(expr: str, text: str, kind: _Field) -> _Part:
    if text == "?" and kind in (_DOM, _DOW):
        text = "*"
    parts = [_item(expr, item, kind) for item in text.split(",")]
    return _Part(
        ",".join(p.text for p in parts),
        frozenset().union(*(p.values for p in parts)),
        frozenset().union(*(p.nths for p in parts)),
        any(p.last for p in parts),
    )


def _item(expr: str, given: str, kind: _Field) -> _Part:
    def bad(why: str) -> ConfigError:
        return ConfigError(f"bad cron expression {expr!r}: {kind.name} {given!r}: {why}")

    item = given.lower()
    if "w" in item and kind is _DOM:
        raise bad("W (the nearest weekday) is not supported")
    if item in ("h", "r") or item.startswith(("h(", "r(")):
        which = "hashed" if item.startswith("h") else "random"
        raise bad(
            f"{which} values ({item[0].upper()}) are not supported: each process would pick "
            "its own, so replicas would disagree on when the schedule fires; write the value"
        )
    if kind is _DOM and item == "l":
        return _Part(item, last=True)
    if kind is _DOM and "l" in item:
        item = _to_last_day(item, bad)
    if kind is _DOW and (special := _dow_special(item, bad)) is not None:
        return special
    return _plain(item, kind, bad)


def _plain(item: str, kind: _Field, bad: Bad) -> _Part:
    """``*``, ``N``, ``A-B``, ``*/S``, ``A-B/S`` or ``N/S``."""
    match = _ITEM.match(item)
    if not match or (match[1] == "*" and match[2] is not None):
        raise bad("expected *, N, A-B, */S, A-B/S or N/S")
    start, end, step_text = match.groups()
    step = 1 if step_text is None else _step(step_text, bad)
    if end is None:
        low, high = _open_bounds(start, step_text is not None, kind, bad)
        return _Part(item, frozenset(range(low, high + 1, step)))
    low, high = _range_bounds(start, end, kind, bad)
    # A range with equal ends is that one value, with or without a step (cronie's reading)
    text = str(low) if low == high else f"{low}-{high}" + (f"/{step_text}" if step_text else "")
    return _Part(text, frozenset(range(low, high + 1, step)))


def _step(text: str, bad: Bad) -> int:
    step = _number(text, bad, f"step {text!r} is not a number")
    if step == 0:
        raise bad("a step of 0")
    return step


def _open_bounds(start: str, stepped: bool, kind: _Field, bad: Bad) -> tuple[int, int]:
    """The bounds of ``*``, ``*/S``, ``N`` and ``N/S`` (from N to the field's end; a week's
    is Saturday and 7/S is 0/S, croniter's reading, which cronlab has always had)."""
    if start == "*":
        return kind.low, kind.high
    low = _value(start, kind, bad)
    if not stepped:
        return low, low
    return (low % 7, 6) if kind is _DOW else (low, kind.high)


def _range_bounds(start: str, end: str, kind: _Field, bad: Bad) -> tuple[int, int]:
    low, high = _value(start, kind, bad), _value(end, kind, bad)
    if kind is _DOW and high == 0 < low:
        high = 7  # Sunday is 0 and 7: a range to Sunday ends on it (Mon-Sun, 5-0)
    if low > high:
        raise bad(f"the range runs backwards ({low} > {high}); list both parts instead")
    return low, high


def _to_last_day(item: str, bad: Bad) -> str:
    """``A-L`` and ``A-L/S`` as ``A-31`` and ``A-31/S``: a day a month lacks never matches, so
    31 is each month's last day (croniter's reading); ``L`` anywhere else is refused."""
    if m := re.fullmatch(r"([^-/]+)-l(/[^-/]+)?", item):
        return f"{m[1]}-31{m[2] or ''}"
    if item.startswith("l/"):
        raise bad("L (the last day) takes no step")
    if item.startswith("l-"):
        raise bad("L (the last day) can only end a range (29-L: the 29th to the last day)")
    return item


def _dow_special(item: str, bad: Bad) -> _Part | None:
    """``D#K``, ``DL`` and ``LD`` (as croniter's ``LD``); None for an ordinary item."""
    if m := re.fullmatch(r"(.+)#(.*)", item):
        day, nth = _value(m[1], _DOW, bad), _number(m[2], bad, f"{m[2]!r} is not a number")
        if not 1 <= nth <= 5:
            raise bad(f"#{nth}: a month has a 1st to a 5th of each weekday")
        return _Part(f"{day % 7}#{nth}", nths=frozenset({(day % 7, nth)}))
    if (m := re.fullmatch(r"(.+)l", item)) or (m := re.fullmatch(r"l(.+)", item)):
        if m[1] in _DOW.names:  # cronsim and croniter refuse it too
            raise bad("L (the last) goes with a weekday number (5L: the last Friday), not a name")
        day = _value(m[1], _DOW, bad) % 7
        return _Part(f"l{day}", nths=frozenset({(day, cron_walk.LAST)}))
    return None


def _value(token: str, kind: _Field, bad: Bad) -> int:
    if token in kind.names:
        return kind.names[token]
    value = _number(token, bad, f"{token!r} is not a {kind.name} value")
    if not kind.low <= value <= kind.high:
        shown = token if len(token) <= 9 else f"{token[:9]}..."
        raise bad(f"{shown} is out of range {kind.low}-{kind.high}")
    return value


def _number(token: str, bad: Bad, why: str) -> int:
    """``token`` as a number of ASCII digits 0-9; ConfigError ``why`` otherwise (int() alone
    takes '٣' and refuses '¹', which str.isdigit() passes)."""
    if not _DIGITS.fullmatch(token):
        raise bad(why)
    digits = token.lstrip("0") or "0"
    return int(digits) if len(digits) <= 12 else 10**12  # int() refuses 4,300 digits
