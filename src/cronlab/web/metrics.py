"""Prometheus text exposition of the live engine's measured state (format version 0.0.4)."""

from __future__ import annotations

from typing import Any

#: (metric, type, help, where in the snapshot: ("report"|"status", key path))
SERIES: tuple[tuple[str, str, str, str, tuple[str, ...]], ...] = (
    (
        "cronlab_live_dispatched_total",
        "counter",
        "Copies enqueued by schedulers.",
        "report",
        ("dispatched",),
    ),
    (
        "cronlab_live_executed_total",
        "counter",
        "Task executions by workers.",
        "report",
        ("executed",),
    ),
    (
        "cronlab_live_duplicates_total",
        "counter",
        "Executions beyond the first of a task.",
        "report",
        ("duplicates",),
    ),
    ("cronlab_live_missed_total", "counter", "Due tasks never dispatched.", "report", ("missed",)),
    ("cronlab_live_backlog", "gauge", "Queue depth now.", "status", ("queue_depth",)),
    (
        "cronlab_live_backlog_peak",
        "gauge",
        "Largest queue depth seen.",
        "report",
        ("backlog_peak",),
    ),
    (
        "cronlab_live_leader_epoch",
        "gauge",
        "Fencing epoch of the current lease.",
        "status",
        ("leader", "epoch"),
    ),
)


def render(snapshot: dict[str, Any]) -> str:
    """Exposition text for a :meth:`Live.snapshot`; values absent from the engine are skipped."""
    running = 1 if snapshot.get("running") else 0
    lines = _one("cronlab_live_running", "gauge", "1 while a live run is going.", running)
    for name, kind, text, source, path in SERIES:
        value = _dig(snapshot.get(source) or {}, path)
        if value is not None:
            lines += _one(name, kind, text, value)
    delays = (snapshot.get("report") or {}).get("takeover_delays_s")
    if isinstance(delays, list):
        lines += _one("cronlab_live_takeovers_total", "counter", "Lease takeovers.", len(delays))
    return "\n".join(lines) + "\n"


def _one(name: str, kind: str, text: str, value: float) -> list[str]:
    return [f"# HELP {name} {text}", f"# TYPE {name} {kind}", f"{name} {value}"]


def _dig(data: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = data
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value
