"""Delays of durable one-off tasks: when one is due, from ``--in 3d`` or ``--at ISO8601``.

Pure parsing into integer epoch milliseconds; the engine writes the PENDING row.
"""

from __future__ import annotations

import re
from datetime import datetime

from cronlab.core.policy import to_ms
from cronlab.exceptions import ConfigError

UNIT_MS = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1_000, "ms": 1}
MAX_DELAY_MS = 100 * 366 * UNIT_MS["d"]  # a century: past it, a datetime overflows soon
MAX_DUE_MS = 253_402_300_799_000  # 9999-12-31T23:59:59Z, the last instant a datetime holds
_PART = re.compile(r"([0-9]+)(ms|d|h|m|s)")
_DELAY = re.compile(r"(?:[0-9]+(?:ms|d|h|m|s))+")


def parse_delay(text: str, *, zero: bool = False) -> int:
    """Milliseconds in a delay like ``3d``, ``2h``, ``90s``, ``15m``, ``250ms`` or ``1h30m``.

    ConfigError naming the text if it is empty, has another unit, or is not positive (``zero``:
    ``0s`` is taken too, as "now").
    """
    compact = text.strip().lower()
    if not _DELAY.fullmatch(compact):
        raise ConfigError(f"bad delay {text!r}: use a number and a unit, e.g. 3d, 2h, 15m, 90s")
    if len(compact) > 40:
        raise ConfigError(f"bad delay {text[:40]!r}…: too long")
    total = sum(int(n) * UNIT_MS[unit] for n, unit in _PART.findall(compact))
    if not (0 if zero else 1) <= total <= MAX_DELAY_MS:
        least = "0 or more" if zero else "positive"
        raise ConfigError(f"bad delay {text!r}: it must be {least} and at most 36600d")
    return total


def parse_at(text: str) -> int:
    """Epoch ms of an ISO 8601 time with a UTC offset (``2026-11-01T09:00:00+01:00``, ``…Z``).

    A time without an offset is refused: which zone it meant cannot be guessed.
    """
    try:
        instant = datetime.fromisoformat(text.strip())
    except ValueError:
        message = f"bad time {text!r}: expected ISO 8601, e.g. 2026-11-01T09:00:00Z"
        raise ConfigError(message) from None
    if instant.tzinfo is None:
        raise ConfigError(f"time {text!r} has no UTC offset: add one, e.g. Z or +01:00")
    return to_ms(instant)


def due_ms(*, now_ms: int, delay: str | None = None, at: str | None = None) -> int:
    """When a timer given ``--in`` (``delay``, ``0s`` included) or ``--at`` is due; neither:
    now (as ``defer()``). A time in the past is due at once: the engine runs it on its next
    pass.
    """
    if delay is not None and at is not None:
        raise ConfigError("give one of --in DELAY or --at TIME, not both")
    if delay is None and at is None:
        return now_ms
    due = now_ms + parse_delay(delay, zero=True) if delay is not None else parse_at(at or "")
    if not 0 <= due <= MAX_DUE_MS:
        raise ConfigError(f"due time out of range: {'--in ' + (delay or '') if delay else at}")
    return due
