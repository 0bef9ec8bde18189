"""The engine's metrics in Prometheus's client library (``pip install 'cronlab[metrics]'``).

A process started with ``--metrics-port P`` serves its own instruments and what the store says
at scrape time (``StoreCollector``: queue depth, due PENDING tasks, missed occurrences per
schedule — every process reads the same rows, so they never double-count). ``cronlab
cluster --metrics-port P`` serves ONE port for all of its children: each child writes its
instruments to files in ``PROMETHEUS_MULTIPROC_DIR`` (the library's multiprocess mode, a
directory the cluster makes and removes) and the cluster's own server reads them all.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from cronlab.core.occurrences import BACKFILL_PREFIX
from cronlab.exceptions import CronlabError
from cronlab.ports import Ended

if TYPE_CHECKING:
    from cronlab.stores.sql import SqlStore

# Seconds. A trigger is late by milliseconds when all is well and by a lease TTL or more after
# a failover; a handler takes milliseconds to minutes.
LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300)
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
CHILD_ENV = "CRONLAB_METRICS"  # set by the cluster in its children: write for it, serve nothing


class PrometheusMetrics:
    """``cronlab.metrics.Metrics`` as Prometheus instruments in ``registry``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        own = registry if registry is not None else REGISTRY
        self._dispatched = Counter(
            "cronlab_tasks_dispatched", "Tasks the leader enqueued.", registry=own
        )
        self._executed = Counter(
            "cronlab_tasks_executed", "Runs recorded, by outcome.", ["outcome"], registry=own
        )
        self._lateness = Histogram(
            "cronlab_trigger_lateness_seconds",
            "First runs: handler start minus the occurrence (trigger) time.",
            buckets=LATENESS_BUCKETS,
            registry=own,
        )
        self._duration = Histogram(
            "cronlab_handler_duration_seconds",
            "Runs: handler end minus start, by task.",
            ["task"],
            buckets=DURATION_BUCKETS,
            registry=own,
        )
        self._epoch = Gauge(
            "cronlab_lease_epoch",
            "The epoch this replica leads under.",
            multiprocess_mode="livemax",
            registry=own,
        )
        self._leader = Gauge(
            "cronlab_is_leader",
            "1 while this replica leads.",
            multiprocess_mode="livesum",
            registry=own,
        )

    def dispatched(self, n: int) -> None:
        if n:
            self._dispatched.inc(n)

    def leading(self, epoch: int | None) -> None:
        self._leader.set(0 if epoch is None else 1)
        if epoch is not None:
            self._epoch.set(epoch)

    def executed(self, counts: Mapping[str, int]) -> None:
        for outcome, n in counts.items():
            if n and outcome != "stale":  # a stale delivery ran nothing and left no record
                self._executed.labels(outcome).inc(n)

    def ended(self, runs: Sequence[Ended]) -> None:
        for m, start, end, *_ in runs:
            self._duration.labels(m.task).observe((end - start) / 1000)
            if m.attempt == 1 and not m.idempotency_key.startswith(BACKFILL_PREFIX):
                self._lateness.observe((start - m.trigger_ms) / 1000)


class StoreCollector:
    """What the store says when scraped: ``cronlab_queue_depth``, ``cronlab_pending_due`` and
    ``cronlab_schedule_missed_total{schedule}`` (a count the store keeps, so it survives a
    process restart and every replica reports the same). The server answers each scrape in a
    thread of its own, so each scrape opens the store (``opener``) and closes it after:
    a SQLite connection belongs to the thread that opened it."""

    def __init__(
        self,
        opener: Callable[[], SqlStore],
        now_ms: Callable[[], int],
        close: bool = True,
    ) -> None:
        self._open, self._now, self._close = opener, now_ms, close

    def collect(self) -> Iterator[Metric]:
        try:
            store = self._open()
        except CronlabError:  # not there yet (a cluster binds its port first), busy, down:
            return  # the process's own instruments are still served, these are left out
        try:
            depth, due = store.queue_depth(), store.pending_due(self._now())
            missed_rows = store.named("schedule_missed")
        except CronlabError:
            return
        finally:
            if self._close:
                store.close()
        yield GaugeMetricFamily("cronlab_queue_depth", "Messages not yet acked.", value=depth)
        yield GaugeMetricFamily(
            "cronlab_pending_due", "PENDING tasks whose trigger time has come.", value=due
        )
        missed = CounterMetricFamily(
            "cronlab_schedule_missed",
            "Occurrences no scheduler dispatched in time (dropped by catch-up), by schedule.",
            labels=["schedule"],
        )
        for name, count in missed_rows:
            missed.add_metric([name], int(count))
        yield missed


def serve(port: int, host: str, registry: CollectorRegistry) -> None:
    """Serve ``registry`` at http://HOST:PORT/metrics in a daemon thread, under the servers'
    rules (``server.py``: loopback Host names, a token off loopback); a port that is taken is
    a one-line ConfigError."""
    from cronlab.metrics import server

    server.serve(port, host, registry, server.token_from_env())


def for_process(
    port: int | None, host: str, store: Callable[[], SqlStore], now_ms: Callable[[], int]
) -> PrometheusMetrics | None:
    """A process's metrics: a cluster child's (written for the cluster to serve), its own on
    ``port``, or None without either."""
    if os.environ.get(CHILD_ENV) and os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return PrometheusMetrics()
    if port is None:
        return None
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    registry.register(StoreCollector(store, now_ms))
    serve(port, host, registry)
    return metrics


def for_cluster(
    port: int, host: str, folder: str, store: Callable[[], SqlStore], now_ms: Callable[[], int]
) -> dict[str, str]:
    """Serve every child's metrics (from ``folder``) and the store's on one port; returns the
    environment the children need to write there."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
    registry.register(StoreCollector(store, now_ms))
    serve(port, host, registry)
    return {"PROMETHEUS_MULTIPROC_DIR": folder, CHILD_ENV: "1"}


def child_exited(pid: int, folder: str) -> None:
    """Forget a dead child's live gauges (its counters and histograms stay in the sums)."""
    mark_process_dead(pid, folder)  # type: ignore[no-untyped-call]
