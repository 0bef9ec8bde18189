"""What a scheduler process adds to the bare loop: the leader's duties (retention, alerts),
its metrics and its heartbeat — built once from the command line's options."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cronlab.metrics import NO_METRICS, Metrics

__all__ = ["NO_METRICS", "Operations", "heartbeat", "leader_duties", "metrics"]
from cronlab.ports import Clock, ProcessInfo
from cronlab.runtime import alerts, proc
from cronlab.runtime.heartbeat import Heartbeat
from cronlab.runtime.retention import Retention
from cronlab.runtime.scheduler import Duty
from cronlab.stores.sql.history import DEFAULT_KEEP_MS

if TYPE_CHECKING:
    from cronlab.stores.sql import SqlStore

METRICS_HOST = "127.0.0.1"


@dataclass(frozen=True, kw_only=True)
class Operations:
    """``--keep``, ``--alert-webhook``, ``--metrics-port`` and ``--metrics-host``."""

    keep_ms: int = DEFAULT_KEEP_MS
    alert_webhook: str | None = None
    metrics_port: int | None = None
    metrics_host: str = METRICS_HOST


def leader_duties(store: SqlStore, clock: Clock, owner: str, ops: Operations) -> list[Duty]:
    """The retention and the alerter (with a sender when a webhook is configured)."""
    hook = alerts.webhook(ops.alert_webhook)
    sender = alerts.Sender(hook) if hook is not None else None
    return [
        Retention(store, clock, keep_ms=ops.keep_ms),
        alerts.Alerter(store, clock, owner, sender),
    ]


def metrics(ops: Operations, url: str, clock: Clock) -> Metrics:
    """This process's metrics: written for its cluster, served on ``--metrics-port``, or none
    (Prometheus's client is imported only when one of the first two asks for it)."""
    if ops.metrics_port is None and not os.environ.get("CRONLAB_METRICS"):
        return NO_METRICS
    from cronlab import stores
    from cronlab.metrics import prometheus

    found = prometheus.for_process(
        ops.metrics_port,
        ops.metrics_host,
        lambda: stores.open_store(url, create=False),
        clock.now_ms,
    )
    return found if found is not None else NO_METRICS


def heartbeat(store: SqlStore, clock: Clock, role: str, index: int, owner: str) -> Heartbeat:
    """The heartbeat of this process, registering it under ``role`` and ``index`` if nobody did."""
    pid = os.getpid()
    info = ProcessInfo(
        role=role,
        index=index,
        pid=pid,
        owner=owner,
        started_ms=clock.now_ms(),
        place=proc.place(pid),
    )
    return Heartbeat(store, clock, info)
