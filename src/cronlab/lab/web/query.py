"""The lab's scenario from a URL query string: the page, its shared links and the API agree.

A query names each knob once (``crash``, ``bucket`` and ``compare`` may repeat; an empty one
is no value). Every bad value, one with spaces around it included, raises :class:`ParamError`,
which names the field so the API can answer 422 with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import partial
from typing import Any, TypeVar

from cronlab.exceptions import ConfigError, ParamError
from cronlab.lab import params, workload
from cronlab.lab.model import Scenario

#: Bounds keep one request cheap: the model's cost grows with buckets and faults, not tasks.
INT_BOUNDS: dict[str, tuple[str, int, int]] = {
    "tasks": ("tasks", 0, 10**12),
    "minutes": ("minutes", 1, 1440),
    "replicas": ("replicas", 1, 32),
    "workers": ("workers", 1, 100_000),
    "rate": ("rate", 1, 10**8),
    "ttl": ("lease_ttl", 1, 86_400),
    "batch": ("batch", 1, 10**12),
    "visibility": ("visibility", 1, 86_400),
}
ALIASES = {
    "lease-ttl": "ttl",
    "lease_ttl": "ttl",
    "restart_after": "restart-after",
    "worker_crash": "worker-crash",
    "pod_restart": "pod-restart",
}
T = TypeVar("T")
REPEATABLE = {
    "crash": 20,
    "bucket": 1440,
    "compare": 4,
    "pause": 20,
    "worker-crash": 20,
    "lose": 20,
}
SINGLE = {*INT_BOUNDS, "preset", "election", "timers", "restart-after", "token"}
SINGLE |= {"fencing", "effects", "pod-restart", "reconcile"}
# Each fault kind: its query name, the parser that checks one value, build_scenario's argument.
FAULTS: tuple[tuple[str, Callable[[str], object], str], ...] = (
    ("crash", params.parse_fault, "crashes"),
    ("pause", params.parse_pause, "pauses"),
    ("worker-crash", params.parse_worker_crash, "worker_crashes"),
    ("lose", params.parse_loss, "losses"),
)


@dataclass(frozen=True, kw_only=True)
class Request:
    """A parsed query: the scenario and the ``compare`` changes (key, value) in order."""

    scenario: Scenario
    changes: tuple[tuple[str, str], ...]


def parse(items: list[tuple[str, str]]) -> Request:
    """Build the scenario from query ``items`` (pairs, as the URL lists them)."""
    grouped = _group(items)
    knobs: dict[str, Any] = {}
    for name in INT_BOUNDS:
        if name in grouped:
            field, low, high = INT_BOUNDS[name]
            knobs[field] = _bounded(name, grouped[name][0], low, high)
    scenario = _guard("scenario", lambda: _build(grouped, knobs))
    return Request(scenario=scenario, changes=_changes(scenario, _all(grouped, "compare")))


def _changes(scenario: Scenario, texts: list[str]) -> tuple[tuple[str, str], ...]:
    """Parse each ``KEY=VALUE`` and check that applying them in order gives a valid B."""
    changes = tuple(_guard("compare", partial(params.parse_change, t)) for t in texts)
    b = scenario
    for key, value in changes:
        b = _guard("compare", partial(params.change, b, key, value))
    return changes


def _group(items: list[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for raw, value in items:
        name = ALIASES.get(raw, raw)
        if name not in SINGLE and name not in REPEATABLE:
            raise ParamError(raw[:40], f"unknown parameter {raw[:40]!r}")
        if value != value.strip():
            raise ParamError(name, f"{name} has spaces around its value {value[:40]!r}")
        grouped.setdefault(name, []).append(value)
    for name, values in grouped.items():
        limit = REPEATABLE.get(name, 1)
        if len(values) > limit:
            raise ParamError(name, f"{name} given {len(values)} times (at most {limit})")
    return grouped


def _build(grouped: dict[str, list[str]], knobs: dict[str, Any]) -> Scenario:
    preset = _choice(grouped, "preset", workload.PRESETS)
    election = _choice(grouped, "election", ("lease", "off"))
    durable = _choice(grouped, "timers", ("durable", "in-memory")) == "durable"
    restart = _one(grouped, "restart-after", "300")
    _guard("restart-after", partial(params.parse_restart_after, restart))
    buckets = _all(grouped, "bucket")
    _guard("bucket", lambda: [workload.parse_bucket(b) for b in buckets])
    fields: dict[str, Any] = {
        "preset": preset,
        "buckets": buckets,
        "restart_after": restart,
        "election": election,
        "durable": durable,
        "effects": _choice(grouped, "effects", ("transactional", "external")),
        "fencing": _choice(grouped, "fencing", ("on", "off")),
        **knobs,
    }
    for name, default, parse in (
        ("pod-restart", "30", lambda v: params.parse_seconds_or_off(v, "pod-restart", "never")),
        ("reconcile", "60", lambda v: params.parse_seconds_or_off(v, "reconcile")),
    ):
        fields[name.replace("-", "_")] = value = _one(grouped, name, default)
        _guard(name, partial(parse, value))
    faults: dict[str, Any] = {arg: _all(grouped, name) for name, _, arg in FAULTS}
    for name, check, arg in FAULTS:
        _guard(name, lambda: [check(v) for v in faults[arg]])  # noqa: B023 (called at once)
    _guard("scenario", partial(params.build_scenario, **fields))
    # Then what is left across fields (a target that does not exist): each fault kind's own.
    for name, _, arg in FAULTS:
        _guard(name, partial(params.build_scenario, **{arg: faults[arg]}, **fields))
    return params.build_scenario(**faults, **fields)


def _choice(grouped: dict[str, list[str]], name: str, choices: tuple[str, ...]) -> str:
    """The value of ``name`` (default: the first choice); ParamError unless one of ``choices``."""
    value = _one(grouped, name, choices[0])
    if value not in choices:
        raise ParamError(name, f"unknown {name} {value!r} (choose {' or '.join(choices)})")
    return value


def _bounded(name: str, text: str, low: int, high: int) -> int:
    """A whole number within [low, high]: ``1000``, ``1,000``, ``1_000``, or a number that is
    whole in another notation (``1000.0``, ``1e3``: what JSON Schema calls an integer)."""
    try:
        value = Decimal(text.strip().replace(",", ""))
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value != value.to_integral_value():
        raise ParamError(name, f"{name} must be a whole number, got {text[:40]!r}")
    if not low <= value <= high:
        raise ParamError(name, f"{name} must be between {low:,} and {high:,}, got {text[:40]}")
    return int(value)


def _one(grouped: dict[str, list[str]], name: str, default: str) -> str:
    return grouped.get(name, [default])[0].strip()


def _all(grouped: dict[str, list[str]], name: str) -> list[str]:
    return [v for v in grouped.get(name, []) if v.strip()]


def _guard(field: str, build: Callable[[], T]) -> T:
    """Run ``build``; a ConfigError becomes a ParamError naming ``field``."""
    try:
        return build()
    except ParamError:
        raise
    except ConfigError as exc:
        raise ParamError(field, str(exc)) from None
