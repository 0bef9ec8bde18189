"""Scenarios from text (CLI flags, URL query strings) and results to plain data.

Shared by ``cronlab simulate`` and the lab's ``/api/simulate`` so both accept the same words.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cronlab.core import workload
from cronlab.core.model import Fault, Result, Scenario, Totals
from cronlab.core.series import per_minute
from cronlab.exceptions import ConfigError

COMPARE_KEYS = (
    "election",
    "replicas",
    "workers",
    "rate",
    "lease-ttl",
    "timers",
    "restart-after",
    "crash",
)


def parse_fault(text: str) -> Fault:
    """``leader@T`` or ``replica:I@T`` (T in seconds)."""
    target, sep, at = text.strip().partition("@")
    if not sep:
        raise ConfigError(f"malformed crash {text!r}: expected leader@T or replica:I@T")
    seconds = _int(at, f"crash {text!r}: time")
    if target == "leader":
        return Fault(at=seconds)
    kind, sep, index = target.partition(":")
    if kind != "replica" or not sep:
        raise ConfigError(f"malformed crash {text!r}: expected leader@T or replica:I@T")
    return Fault(at=seconds, replica=_int(index, f"crash {text!r}: replica"))


def parse_restart_after(text: str | int | None) -> int | None:
    """Seconds, or ``never`` (None)."""
    if text is None or (isinstance(text, str) and text.strip().lower() == "never"):
        return None
    return _int(str(text), "restart-after")


def parse_timers(text: str) -> bool:
    """``durable`` → True, ``in-memory`` → False."""
    value = text.strip().lower()
    if value not in ("durable", "in-memory"):
        raise ConfigError(f"unknown timers {text!r} (choose durable or in-memory)")
    return value == "durable"


def build_scenario(
    *,
    preset: str = "midnight",
    tasks: int = workload.DEFAULT_TASKS,
    minutes: int = workload.DEFAULT_MINUTES,
    buckets: list[str] | tuple[str, ...] = (),
    crashes: list[str] | tuple[str, ...] = (),
    restart_after: str | int | None = 300,
    **knobs: Any,
) -> Scenario:
    """A validated scenario; ``knobs`` are Scenario fields (replicas, workers, rate, ...)."""
    if buckets:
        pairs = workload.merge([workload.parse_bucket(b) for b in buckets])
    else:
        pairs = workload.buckets(preset, tasks, minutes)
    faults = tuple(parse_fault(c) for c in crashes)
    return Scenario(
        buckets=pairs, faults=faults, restart_after=parse_restart_after(restart_after), **knobs
    )


def change(s: Scenario, key: str, value: str) -> Scenario:
    """The scenario with one knob changed, as ``--compare KEY=VALUE`` says."""
    key = key.strip().lower().replace("_", "-")
    if key == "election":
        return dataclasses.replace(s, election=value.strip())  # type: ignore[arg-type]
    if key == "replicas":
        return dataclasses.replace(s, replicas=_int(value, key))
    if key == "workers":
        return dataclasses.replace(s, workers=_int(value, key))
    if key == "rate":
        return dataclasses.replace(s, rate=_int(value, key))
    if key in ("lease-ttl", "ttl"):
        return dataclasses.replace(s, lease_ttl=_int(value, key))
    if key in ("timers", "store"):
        return dataclasses.replace(s, durable=parse_timers(value))
    if key == "restart-after":
        return dataclasses.replace(s, restart_after=parse_restart_after(value))
    if key == "crash":
        faults = () if value.strip() == "none" else (parse_fault(value),)
        return dataclasses.replace(s, faults=faults)
    raise ConfigError(f"unknown compare key {key!r} (choose from {', '.join(COMPARE_KEYS)})")


def parse_change(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise ConfigError(f"malformed --compare {text!r}: expected KEY=VALUE, e.g. election=off")
    return key, value


def sentence(s: Scenario) -> str:
    """One sentence on what this mode costs."""
    ttl = s.lease_ttl
    if s.election == "lease" and s.durable:
        return (
            f"leader holds lease; crash costs ~{ttl}s takeover delay, zero loss — "
            "PENDING rows survive in the store."
        )
    if s.election == "lease":
        return (
            f"leader holds lease but timers live in its memory; a crash loses every trigger "
            f"due in the ~{ttl}s takeover gap (and, with no standby, until a restart)."
        )
    dup = s.due * (s.replicas - 1)
    if s.durable:
        return (
            f"no election: every replica dispatches its own copy — duplicates = due × "
            f"(replicas − 1) = {dup:,} with every replica up."
        )
    return (
        f"no election, in-memory timers: every replica fires each trigger (duplicates "
        f"{dup:,}), and a trigger due while none is up is lost."
    )


def scenario_dict(s: Scenario) -> dict[str, Any]:
    return {
        "buckets": [list(b) for b in s.buckets],
        "due": s.due,
        "replicas": s.replicas,
        "workers": s.workers,
        "rate": s.rate,
        "capacity_per_s": s.capacity,
        "election": s.election,
        "lease_ttl": s.lease_ttl,
        "timers": "durable" if s.durable else "in-memory",
        "crashes": [f.label() for f in s.faults],
        "restart_after": "never" if s.restart_after is None else s.restart_after,
    }


def totals_dict(t: Totals) -> dict[str, Any]:
    data = dataclasses.asdict(t)
    data["takeover_delays_s"] = list(t.takeover_delays_s)
    return data


def result_dict(r: Result, *, minutes: bool = False) -> dict[str, Any]:
    """Plain data: ``scenario``, ``totals``, ``timeline`` (runs), ``log`` and ``sentence``."""
    tl = dataclasses.asdict(r.timeline)
    data: dict[str, Any] = {
        "scenario": scenario_dict(r.scenario),
        "totals": totals_dict(r.totals),
        "timeline": {"encoding": "runs", **{k: list(v) for k, v in tl.items()}},
        "log": [dataclasses.asdict(e) for e in r.log],
        "sentence": sentence(r.scenario),
    }
    if minutes:
        pm = per_minute(r.timeline)
        data["per_minute"] = {f.name: getattr(pm, f.name).tolist() for f in dataclasses.fields(pm)}
    return data


def diff(a: Totals, b: Totals) -> dict[str, int]:
    """b − a for every integer total."""
    da, db = dataclasses.asdict(a), dataclasses.asdict(b)
    return {k: db[k] - da[k] for k in da if isinstance(da[k], int)}


def _int(text: str, what: str) -> int:
    try:
        return int(text.strip().replace("_", "").replace(",", ""))
    except ValueError:
        raise ConfigError(f"{what} must be a whole number, got {text.strip()!r}") from None
