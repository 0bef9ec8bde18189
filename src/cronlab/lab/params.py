"""Scenarios from text (CLI flags, URL query strings) and results to plain data.

Shared by ``cronlab simulate`` and the lab's ``/api/simulate`` so both accept the same words.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cronlab.exceptions import ConfigError
from cronlab.lab import workload
from cronlab.lab.model import Fault, Loss, Pause, Result, Scenario, Totals, WorkerCrash

COMPARE_KEYS = (
    "election",
    "replicas",
    "workers",
    "rate",
    "lease-ttl",
    "timers",
    "restart-after",
    "crash",
    "fencing",
    "batch",
    "effects",
    "visibility",
    "pod-restart",
    "reconcile",
    "pause",
    "worker-crash",
    "lose",
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


def parse_pause(text: str) -> Pause:
    """``leader@T:D`` or ``replica:I@T:D`` (T and D in seconds)."""
    target, sep, rest = text.strip().partition("@")
    at, sep2, seconds = rest.partition(":")
    if not sep or not sep2:
        raise ConfigError(f"malformed pause {text!r}: expected leader@T:D or replica:I@T:D")
    t, d = _int(at, f"pause {text!r}: time"), _int(seconds, f"pause {text!r}: length")
    if target == "leader":
        return Pause(at=t, seconds=d)
    kind, sep, index = target.partition(":")
    if kind != "replica" or not sep:
        raise ConfigError(f"malformed pause {text!r}: expected leader@T:D or replica:I@T:D")
    return Pause(at=t, seconds=d, replica=_int(index, f"pause {text!r}: replica"))


def parse_worker_crash(text: str) -> WorkerCrash:
    """``POD@T``: worker pod POD dies at second T, before its ack."""
    pod, sep, at = text.strip().partition("@")
    if not sep:
        raise ConfigError(f"malformed worker crash {text!r}: expected POD@T, e.g. 0@10")
    return WorkerCrash(
        at=_int(at, f"worker crash {text!r}: time"), pod=_int(pod, f"worker crash {text!r}: pod")
    )


def parse_loss(text: str) -> Loss:
    """``N@T``: N queued messages lost at second T."""
    count, sep, at = text.strip().partition("@")
    if not sep:
        raise ConfigError(f"malformed loss {text!r}: expected N@T, e.g. 1000@30")
    return Loss(at=_int(at, f"lose {text!r}: time"), count=_int(count, f"lose {text!r}: count"))


def parse_seconds_or_off(text: str | int | None, what: str, off: str = "off") -> int | None:
    """Seconds, or ``off`` (``never`` too) for None."""
    if text is None or (isinstance(text, str) and text.strip().lower() in (off, "off", "never")):
        return None
    return _int(str(text), what)


def parse_on_off(text: str | bool, what: str) -> bool:
    if isinstance(text, bool):
        return text
    value = text.strip().lower()
    if value not in ("on", "off"):
        raise ConfigError(f"{what} must be on or off, got {text.strip()!r}")
    return value == "on"


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
    pauses: list[str] | tuple[str, ...] = (),
    worker_crashes: list[str] | tuple[str, ...] = (),
    losses: list[str] | tuple[str, ...] = (),
    fencing: str | bool = True,
    pod_restart: str | int | None = 30,
    reconcile: str | int | None = 60,
    **knobs: Any,
) -> Scenario:
    """A validated scenario from words (flags, query values); ``knobs`` are the other
    Scenario fields as they are (replicas, workers, rate, batch, visibility, effects ...)."""
    if buckets:
        pairs = workload.merge([workload.parse_bucket(b) for b in buckets])
    else:
        pairs = workload.buckets(preset, tasks, minutes)
    return Scenario(
        buckets=pairs,
        faults=tuple(parse_fault(c) for c in crashes),
        restart_after=parse_restart_after(restart_after),
        pauses=tuple(parse_pause(p) for p in pauses),
        worker_crashes=tuple(parse_worker_crash(w) for w in worker_crashes),
        losses=tuple(parse_loss(x) for x in losses),
        fencing=parse_on_off(fencing, "fencing"),
        pod_restart=parse_seconds_or_off(pod_restart, "pod-restart", "never"),
        reconcile=parse_seconds_or_off(reconcile, "reconcile"),
        **knobs,
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
    return _change_fault_knob(s, key, value)


def _change_fault_knob(s: Scenario, key: str, value: str) -> Scenario:
    none = value.strip() == "none"
    if key == "fencing":
        return dataclasses.replace(s, fencing=parse_on_off(value, key))
    if key == "batch":
        return dataclasses.replace(s, batch=_int(value, key))
    if key == "effects":
        return dataclasses.replace(s, effects=value.strip())  # type: ignore[arg-type]
    if key == "visibility":
        return dataclasses.replace(s, visibility=_int(value, key))
    if key == "pod-restart":
        return dataclasses.replace(s, pod_restart=parse_seconds_or_off(value, key, "never"))
    if key == "reconcile":
        return dataclasses.replace(s, reconcile=parse_seconds_or_off(value, key))
    if key == "pause":
        return dataclasses.replace(s, pauses=() if none else (parse_pause(value),))
    if key == "worker-crash":
        return dataclasses.replace(s, worker_crashes=() if none else (parse_worker_crash(value),))
    if key == "lose":
        return dataclasses.replace(s, losses=() if none else (parse_loss(value),))
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


def fault_sentences(r: Result) -> list[str]:
    """What each production fault of the scenario did, with its numbers (the explain panel's
    formulas, docs/model.md)."""
    s, t, out = r.scenario, r.totals, []
    if s.pauses:
        held = sum(e.count for e in r.log if e.kind == "pause")
        if s.fencing:
            out.append(
                f"zombie leader: paused past its {s.lease_ttl} s lease it still held {held:,} "
                f"read rows; fencing refused its write (fenced writes {t.fenced_writes:,}) — "
                "a pause shorter than the lease changes no count."
            )
        else:
            out.append(
                f"zombie leader without fencing: it woke up and published the batch it held — "
                f"duplicates = min(batch {s.batch:,}, due when paused) = {t.duplicates:,}."
            )
    if s.worker_crashes:
        what = (
            "transactional effects commit with the ack, so a redelivery duplicates nothing"
            if s.effects == "transactional"
            else "external effects were sent before the ack: each redelivery that runs sends "
            f"them again (duplicates {t.duplicates:,})"
        )
        out.append(
            f"worker crash: {t.redelivered:,} claimed and unacked came back after the "
            f"{s.visibility} s visibility timeout; {what}."
        )
    if s.losses:
        lost = sum(e.count for e in r.log if e.kind == "lose")
        if s.reconcile is None or s.election != "lease":
            out.append(f"lost messages: {lost:,} gone, no reconciler — {t.stuck:,} stuck for ever.")
        else:
            out.append(
                f"lost messages: {lost:,} gone; the leader's reconcile every {s.reconcile} s "
                f"enqueued them again — {t.stuck:,} stuck, {t.late:,} late (> 60 s)."
            )
    return out


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
        "pauses": [p.label() for p in s.pauses],
        "fencing": "on" if s.fencing else "off",
        "batch": s.batch,
        "worker_crashes": [w.label() for w in s.worker_crashes],
        "visibility": s.visibility,
        "pod_restart": "never" if s.pod_restart is None else s.pod_restart,
        "effects": s.effects,
        "losses": [x.label() for x in s.losses],
        "reconcile": "off" if s.reconcile is None else s.reconcile,
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
        "faults": fault_sentences(r),
        "lanes": {
            "replicas": [dataclasses.asdict(x) for x in r.replicas],
            "pods": [dataclasses.asdict(x) for x in r.pods],
        },
        "verdict": verdict(r.totals),
    }
    if minutes:
        from cronlab.lab.series import per_minute  # numpy: the lab extra

        pm = per_minute(r.timeline)
        data["per_minute"] = {f.name: getattr(pm, f.name).tolist() for f in dataclasses.fields(pm)}
    return data


def verdict(t: Totals) -> dict[str, Any]:
    """The checker's words for a model run: lost (due, never took effect), duplicated,
    unexpected (took effect, never due: none in the model), late, stuck; ``ok`` when all 0."""
    counts = {
        "lost": t.missed + t.stuck,
        "duplicated": t.duplicates,
        "unexpected": 0,
        "late": t.late,
        "stuck": t.stuck,
    }
    return {"ok": not any(counts.values()), "counts": counts}


def diff(a: Totals, b: Totals) -> dict[str, int]:
    """b − a for every integer total."""
    da, db = dataclasses.asdict(a), dataclasses.asdict(b)
    return {k: db[k] - da[k] for k in da if isinstance(da[k], int)}


def _int(text: str, what: str) -> int:
    try:
        return int(text.strip().replace("_", "").replace(",", ""))
    except ValueError:
        raise ConfigError(f"{what} must be a whole number, got {text.strip()!r}") from None
