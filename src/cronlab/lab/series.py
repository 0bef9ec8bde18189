"""Per-minute series from a run-length timeline, vectorised with numpy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cronlab.exceptions import ConfigError
from cronlab.lab.model import Timeline

Ints = npt.NDArray[np.int64]
MAX_MINUTES = 50_000  # a chart of about 35 days, a few MB of JSON


@dataclass(frozen=True, kw_only=True)
class PerSecond:
    """The series one entry per simulated second (short runs and tests); ``PerMinute`` sums
    them per minute."""

    dispatched: Ints
    executed: Ints
    duplicates: Ints
    missed: Ints
    backlog: Ints
    leader: Ints


@dataclass(frozen=True, kw_only=True)
class PerMinute(PerSecond):
    """Minute m covers seconds 60m .. 60m+59; ``backlog`` and ``leader`` are at its last second."""

    minute: Ints


def per_minute(tl: Timeline) -> PerMinute:
    """Aggregate a timeline into minutes, from min 00 to the minute of its last second."""
    count = max(1, -(-tl.end // 60))
    if count > MAX_MINUTES:
        raise ConfigError(
            f"this run lasts {count:,} minutes; the lab charts at most {MAX_MINUTES:,} "
            "(fewer tasks, more workers or a higher rate, or earlier buckets and crashes)"
        )
    t, n = _arr(tl.t), _arr(tl.n)
    edges = np.arange(count + 1, dtype=np.int64) * 60
    return PerMinute(
        minute=np.arange(count, dtype=np.int64),
        dispatched=_by_minute(t, n, _arr(tl.dispatched), count),
        executed=np.diff(_cumulative(t, n, _arr(tl.executed), edges)),
        duplicates=_by_minute(t, n, _arr(tl.duplicates), count),
        missed=_by_minute(t, n, _arr(tl.missed), count),
        backlog=_at(t, n, _arr(tl.backlog), _arr(tl.backlog_step), edges[1:] - 1, tl.end),
        leader=_at(t, n, _arr(tl.leader), np.zeros_like(t), edges[1:] - 1, tl.end),
    )


def _arr(values: tuple[int, ...]) -> Ints:
    return np.asarray(values, dtype=np.int64)


def _by_minute(t: Ints, n: Ints, per_second: Ints, count: int) -> Ints:
    """Sum ``per_second × n`` into the minute each run starts in (exact for one-second runs)."""
    out = np.zeros(count, dtype=np.int64)
    np.add.at(out, t // 60, per_second * n)
    return out


def _cumulative(t: Ints, n: Ints, rate: Ints, edges: Ints) -> Ints:
    """Total of ``rate`` over seconds before each edge."""
    starts: Ints = np.concatenate((np.zeros(1, dtype=np.int64), np.cumsum(rate * n)))[:-1]
    i = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, None)
    total: Ints = starts[i] + rate[i] * np.clip(edges - t[i], 0, n[i])
    return total


def _at(t: Ints, n: Ints, base: Ints, step: Ints, seconds: Ints, end: int) -> Ints:
    """Value at each second (clamped to the last simulated second)."""
    seconds = np.minimum(seconds, max(end - 1, 0))
    i = np.clip(np.searchsorted(t, seconds, side="right") - 1, 0, None)
    return base[i] + step[i] * (seconds - t[i])


def per_second(tl: Timeline) -> PerSecond:
    """Expand every run; memory is O(simulated seconds)."""
    n = _arr(tl.n)
    offset = np.arange(tl.end, dtype=np.int64) - np.repeat(_arr(tl.t), n)
    return PerSecond(
        dispatched=np.repeat(_arr(tl.dispatched), n),
        executed=np.repeat(_arr(tl.executed), n),
        duplicates=np.repeat(_arr(tl.duplicates), n),
        missed=np.repeat(_arr(tl.missed), n),
        backlog=np.repeat(_arr(tl.backlog), n) + np.repeat(_arr(tl.backlog_step), n) * offset,
        leader=np.repeat(_arr(tl.leader), n),
    )
