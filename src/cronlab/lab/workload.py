"""Workload presets for the model: which buckets of due tasks a scenario starts with."""

from __future__ import annotations

from typing import Literal

from cronlab.exceptions import ConfigError
from cronlab.lab.model import MAX_BUCKETS

Preset = Literal["midnight", "steady", "spread"]
PRESETS: tuple[Preset, ...] = ("midnight", "steady", "spread")
DEFAULT_TASKS = 1_000_000
DEFAULT_MINUTES = 60


def buckets(
    preset: str = "midnight", tasks: int = DEFAULT_TASKS, minutes: int = DEFAULT_MINUTES
) -> tuple[tuple[int, int], ...]:
    """(minute, count) pairs for a preset.

    ``midnight``: all ``tasks`` at min 00. ``steady``: ``tasks`` every minute for ``minutes``
    minutes. ``spread``: ``tasks`` over ``minutes`` minutes, the first ``tasks mod minutes``
    minutes getting one task more (the jittered invoice run).
    """
    if tasks < 0:
        raise ConfigError(f"tasks must be >= 0, got {tasks}")
    if not 1 <= minutes <= MAX_BUCKETS:
        raise ConfigError(f"minutes must be 1..{MAX_BUCKETS:,} (a day), got {minutes:,}")
    if preset == "midnight":
        return ((0, tasks),)
    if preset == "steady":
        return tuple((m, tasks) for m in range(minutes))
    if preset == "spread":
        base, extra = divmod(tasks, minutes)
        return tuple((m, base + (1 if m < extra else 0)) for m in range(minutes))
    raise ConfigError(f"unknown preset {preset!r} (choose from {', '.join(PRESETS)})")


def parse_bucket(text: str) -> tuple[int, int]:
    """Parse ``MINUTE=COUNT`` (e.g. ``0=1000000``); ConfigError names a malformed one."""
    minute, sep, count = text.partition("=")
    try:
        if not sep:
            raise ValueError
        pair = int(minute.strip()), int(count.strip().replace("_", "").replace(",", ""))
    except ValueError:
        raise ConfigError(
            f"malformed bucket {text!r}: expected MINUTE=COUNT, e.g. 0=1000000"
        ) from None
    if pair[0] < 0 or pair[1] < 0:
        raise ConfigError(f"malformed bucket {text!r}: minute and count must be >= 0")
    return pair


def merge(pairs: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sum counts given for the same minute; sorted by minute."""
    total: dict[int, int] = {}
    for minute, count in pairs:
        total[minute] = total.get(minute, 0) + count
    return tuple(sorted(total.items()))
