"""Schedules and the pure decisions the scheduler takes about them.

Everything here takes the time as integer epoch milliseconds and does no I/O. The engine
calls :func:`next_fire` to materialise the next occurrence, :func:`plan_catchup` after a
restart or failover, :func:`overlap_decision` when an occurrence comes due, and stores each
occurrence under :func:`occurrence_key`, which its unique index turns into a no-op the second
time: two schedulers (or an old leader) can never create one occurrence twice.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, get_args

from cronlab.core import cron
from cronlab.exceptions import ConfigError

Catchup = Literal["all", "latest", "none"]
Overlap = Literal["allow", "skip"]
Decision = Literal["run", "skip"]

HOUR_MS = 3_600_000
# Like Quartz's default misfireThreshold: a run this late is late, not missed.
MISFIRE_THRESHOLD_MS = 60_000
ALERT_AFTER_MS = (1_000, 366 * 86_400_000)  # an alert's patience: a second to a year
ALERT_FAILURES = (1, 1_000)
MISSED_COUNT_CAP = 1_000  # fire times a plan counts as missed at most (a long outage)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# An occurrence key is exactly this: a follow-up's key (``…/then/TASK/N``) or a key a user
# gave never parses as one (a schedule name has no ':' or '/').
_KEY = re.compile(r"schedule:(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,99}):(?P<fire>-?[0-9]{1,19})")


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """A named recurring job: which handler runs, when, and what happens when things go wrong.

    ``catchup`` says what to run for occurrences missed while no scheduler was up: ``all`` of
    them (oldest first), the ``latest`` one, or ``none`` (see :func:`plan_catchup`); nothing
    older than ``catchup_window_ms`` is ever run. ``overlap="skip"`` skips (and the engine records
    as skipped) an occurrence that comes due while the previous run is still running.
    ``alert_after_ms``: alert when a run has not started this long after its occurrence;
    ``alert_on_failures``: alert after this many failed runs in a row (None: no alert).
    Construction validates every field and raises ConfigError naming the bad value.
    """

    name: str
    cron: str
    task: str
    tz: str = "UTC"
    payload: Mapping[str, Any] = field(default_factory=dict, hash=False)
    catchup: Catchup = "latest"
    catchup_window_ms: int = HOUR_MS
    overlap: Overlap = "skip"
    paused: bool = False
    alert_after_ms: int | None = None
    alert_on_failures: int | None = None

    def __post_init__(self) -> None:
        _check_name("schedule name", self.name)
        _check_name("task name", self.task)
        cron.parse(self.cron, self.tz)
        _check_choice("catchup", self.catchup, get_args(Catchup))
        _check_choice("overlap", self.overlap, get_args(Overlap))
        if not isinstance(self.catchup_window_ms, int) or self.catchup_window_ms < 0:
            raise ConfigError(f"catchup window must be >= 0 ms, got {self.catchup_window_ms!r}")
        _check_payload(self.payload)
        _check_bound("alert_after", self.alert_after_ms, ALERT_AFTER_MS, "ms")
        _check_bound("alert_on_failures", self.alert_on_failures, ALERT_FAILURES, "runs")
        # A private copy: the caller's dict changing later must not change the schedule.
        object.__setattr__(self, "payload", json.loads(json.dumps(self.payload)))


def _check_bound(what: str, value: int | None, bounds: tuple[int, int], unit: str) -> None:
    low, high = bounds
    ok = value is None or (type(value) is int and low <= value <= high)
    if not ok:
        raise ConfigError(f"{what} must be {low:,}..{high:,} {unit} or None, got {value!r}")


def _check_name(what: str, value: str) -> None:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ConfigError(
            f"bad {what} {value!r}: use 1-100 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )


def _check_choice(what: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"bad {what} {value!r}: choose one of {', '.join(choices)}")


def _check_payload(payload: Mapping[str, Any]) -> None:
    if not isinstance(payload, Mapping):
        raise ConfigError(f"payload must be a JSON object, got {payload!r}")
    try:
        json.dumps(payload, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"payload is not plain JSON: {exc}") from None


def next_fire(schedule: Schedule, after_ms: int) -> int:
    """The schedule's first fire time strictly after ``after_ms`` (epoch ms, DST rules applied).

    Pausing is the engine's business: this answers for the expression alone.
    """
    return next(fires(schedule, after_ms))


def fires(schedule: Schedule, after_ms: int) -> Iterator[int]:
    """Every fire time strictly after ``after_ms``, in epoch ms, in order, without end."""
    parsed = cron.parse(schedule.cron, schedule.tz)
    return (to_ms(t) for t in cron.fires_after(parsed, from_ms(after_ms)))


def occurrences(schedule: Schedule, after_ms: int, until_ms: int) -> list[int]:
    """Fire times in (after_ms, until_ms], oldest first."""
    found = []
    for fire_ms in fires(schedule, after_ms):
        if fire_ms > until_ms:
            break
        found.append(fire_ms)
    return found


def plan_catchup(schedule: Schedule, last_fire_ms: int | None, now_ms: int) -> list[int]:
    """The fire times to materialise and run now, oldest first.

    ``last_fire_ms`` is the newest fire time already materialised (or planned through); the
    candidates are the fire times in (last_fire_ms, now_ms] at most ``catchup_window_ms``
    old. A candidate at most ``min(MISFIRE_THRESHOLD_MS, catchup_window_ms)`` late is *on
    time* and always runs; older ones were *missed*: ``all`` runs every missed one, ``latest``
    runs only the newest missed one (one run for all of them), ``none`` runs none. A schedule
    that never fired (``last_fire_ms`` is None) has missed nothing.
    """
    if last_fire_ms is None:
        return []
    window = schedule.catchup_window_ms
    due = occurrences(schedule, max(last_fire_ms, now_ms - window - 1), now_ms)
    on_time_from = now_ms - min(MISFIRE_THRESHOLD_MS, window)
    missed = [fire for fire in due if fire < on_time_from]
    kept = {"all": missed, "latest": missed[-1:], "none": []}[schedule.catchup]
    return kept + due[len(missed) :]


@dataclass(frozen=True, kw_only=True)
class DispatchPlan:
    """What to do when the PENDING occurrence at ``fire_ms`` comes up for dispatch.

    ``run`` says whether that occurrence runs (False: record it as missed); ``catch_up`` are
    later fire times, already due, to materialise and run now (oldest first); ``next_fire_ms``
    is the future occurrence to materialise as PENDING in the same transaction.
    """

    run: bool
    catch_up: tuple[int, ...]
    next_fire_ms: int


def plan_dispatch(schedule: Schedule, fire_ms: int, now_ms: int) -> DispatchPlan:
    """The engine's step when a materialised occurrence is due: run it, catch up, move on.

    In normal operation the occurrence is on time: it runs, nothing is caught up, and the next
    one is materialised. After downtime the occurrence and the ones after it are judged
    together by :func:`plan_catchup` (the window, ``all``/``latest``/``none``).
    """
    plan = plan_catchup(schedule, fire_ms - 1, now_ms)
    return DispatchPlan(
        run=fire_ms in plan,
        catch_up=tuple(fire for fire in plan if fire > fire_ms),
        next_fire_ms=next_fire(schedule, max(now_ms, fire_ms)),
    )


def missed_fires(schedule: Schedule, fire_ms: int, now_ms: int, plan: DispatchPlan) -> int:
    """How many fire times in [fire_ms, now_ms] ``plan`` does not run: the occurrences no
    scheduler dispatched in time that the catch-up policy dropped (``MISSED_COUNT_CAP`` at
    most). None when ``fire_ms`` is on time: every fire time after it is then on time too."""
    if fire_ms >= now_ms - min(MISFIRE_THRESHOLD_MS, schedule.catchup_window_ms):
        return 0
    ran = set(plan.catch_up) | ({fire_ms} if plan.run else set())
    count = 0
    for fire in itertools.islice(fires(schedule, fire_ms - 1), MISSED_COUNT_CAP):
        if fire > now_ms:
            break
        count += fire not in ran
    return count


LOOKBACK_MS = (60_000, HOUR_MS, 24 * HOUR_MS, 32 * 24 * HOUR_MS, 367 * 24 * HOUR_MS)


def latest_fire(schedule: Schedule, at_ms: int, since_ms: int) -> int | None:
    """The schedule's newest fire time in [since_ms, at_ms], or None (looked for in spans
    growing from a minute to a year back, so a frequent schedule costs a step or two)."""
    for span in LOOKBACK_MS:
        start = max(since_ms - 1, at_ms - span)
        found = occurrences(schedule, start, at_ms)
        if found:
            return found[-1]
        if start == since_ms - 1:
            return None
    return None


def overlap_decision(schedule: Schedule, previous_running: bool) -> Decision:
    """``skip`` if the previous run is still running and the schedule forbids overlap."""
    return "skip" if previous_running and schedule.overlap == "skip" else "run"


def occurrence_key(name: str, fire_ms: int) -> str:
    """The idempotency key of the occurrence of schedule ``name`` at ``fire_ms``.

    The store's unique index on it is what makes a second materialisation a no-op.
    """
    return f"schedule:{name}:{fire_ms}"


def parse_occurrence_key(key: str) -> tuple[str, int]:
    """The (schedule name, fire ms) of an occurrence key; ConfigError if it is not one."""
    match = _KEY.fullmatch(key)
    if match is None:
        raise ConfigError(f"not a schedule occurrence key: {key!r}")
    return match["name"], int(match["fire"])


def to_ms(instant: datetime) -> int:
    """Epoch milliseconds of an aware datetime (exact, no float rounding)."""
    return (instant - EPOCH) // timedelta(milliseconds=1)


def from_ms(ms: int) -> datetime:
    """The aware UTC datetime of epoch milliseconds ``ms``."""
    return EPOCH + timedelta(milliseconds=ms)
