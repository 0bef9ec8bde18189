"""The live engine's measured state as Prometheus metrics, rendered by Prometheus's client
library (``generate_latest``: no hand-written exposition). The names are the lab's contract."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

MEDIA_TYPE = CONTENT_TYPE_LATEST

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


class Snapshot:
    """A collector of one :meth:`Live.snapshot`; values absent from the engine are skipped."""

    def __init__(self, snapshot: dict[str, Any]) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        running = 1 if snap.get("running") else 0
        yield GaugeMetricFamily("cronlab_live_running", "1 while a live run is going.", running)
        for name, kind, text, source, path in SERIES:
            value = _dig(snap.get(source) or {}, path)
            if value is not None:
                yield _family(name, kind, text, value)
        delays = (snap.get("report") or {}).get("takeover_delays_s")
        if isinstance(delays, list):
            yield CounterMetricFamily(
                "cronlab_live_takeovers_total", "Lease takeovers.", len(delays)
            )


def render(snapshot: dict[str, Any]) -> str:
    """Exposition text for a :meth:`Live.snapshot`."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Snapshot(snapshot))
    return generate_latest(registry).decode()


def _family(name: str, kind: str, text: str, value: float) -> Metric:
    if kind == "counter":
        return CounterMetricFamily(name, text, value)
    return GaugeMetricFamily(name, text, value)


def _dig(data: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = data
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value
