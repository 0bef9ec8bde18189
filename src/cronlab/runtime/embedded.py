"""The embedded engine: a scheduler and a worker in the caller's process (``App.run``,
``App.run_until_idle``, ``cronlab run``).

One loop, one thread: the scheduler's step (renew the lease, dispatch what is due, fenced)
and the worker's (claim a batch, run it) take turns. The lease is the cluster's: several
processes running the same app on one store elect one leader among them, and all of them
work; a process that stops gives its lease up, so another takes over at once.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from cronlab.election.store import StoreElector
from cronlab.ports import RunCounts, SyncReport
from cronlab.queues.store import StoreQueue
from cronlab.runtime import cluster, duties
from cronlab.runtime.duties import Operations
from cronlab.runtime.scheduler import Scheduler, SchedulerConfig
from cronlab.runtime.worker import Worker, WorkerConfig

if TYPE_CHECKING:
    from cronlab.app import App
    from cronlab.stores.sql import SqlStore

log = logging.getLogger("cronlab")


@dataclass
class Engine:
    """A scheduler and a worker on one store, stepped by hand."""

    scheduler: Scheduler
    worker: Worker
    store: SqlStore

    def step(self) -> int:
        """One turn of each; milliseconds until either wants another (0: at once)."""
        return min(self.scheduler.step(), self.worker.step())

    def stop(self) -> None:
        """Give the lease up, so a standby takes over at once."""
        if self.scheduler.lease is not None:
            self.scheduler.elector.release(self.scheduler.owner)


def start(
    app: App, *, concurrency: int, scan_ms: int = 1_000, ops: Operations | None = None
) -> Engine:
    """The app's schedules synced, its ``on_start`` run, and an engine on its store. With
    ``ops`` (``cronlab run``, ``App.run``) the leader prunes and alerts, the process keeps a
    heartbeat and serves ``--metrics-port``."""
    store = app.store()
    app.start(store)
    report(app.sync(store))
    clock = app.clock
    owner = cluster.identity("embedded", 0)
    metrics = duties.metrics(ops, app.store_url or "", clock) if ops else duties.NO_METRICS
    scheduler = Scheduler(
        SchedulerConfig(replica=0, scan_ms=scan_ms),
        store=store,
        queue=StoreQueue(store, clock),
        elector=StoreElector(store, clock),
        clock=clock,
        owner=owner,
        duties=duties.leader_duties(store, clock, owner, ops) if ops else (),
        metrics=metrics,
        heartbeat=duties.heartbeat(store, clock, "embedded", 0, owner) if ops else None,
    )
    worker = Worker(
        WorkerConfig(index=0, concurrency=concurrency),
        store=store,
        queue=StoreQueue(store, clock),
        registry=app.registry,
        clock=clock,
        name=cluster.identity("worker", 0),
        metrics=metrics,
    )
    return Engine(scheduler=scheduler, worker=worker, store=store)


def report(sync: SyncReport) -> None:
    """What a sync changed, in the ``cronlab`` log."""
    for verb, names in (("added", sync.added), ("changed", sync.changed)):
        for name in names:
            log.info("schedule %s: %s", verb, name)
    for name in sync.removed:
        log.info("schedule removed: %s (an occurrence already due is recorded SKIPPED)", name)


def run(
    app: App, *, concurrency: int, scan_interval: timedelta, ops: Operations | None = None
) -> None:
    """``App.run``: until SIGINT or SIGTERM (handled in the main thread) or Ctrl-C."""
    engine = start(
        app, concurrency=concurrency, scan_ms=_ms(scan_interval), ops=ops or Operations()
    )
    with _stopping() as stopping:
        try:
            while not stopping():
                app.clock.sleep(engine.step() / 1000)
        finally:
            engine.stop()


def run_until_idle(app: App, *, concurrency: int, timeout: timedelta | None) -> RunCounts:
    """``App.run_until_idle``: the scheduler scans every turn; stop once nothing due is
    pending and nothing is queued (a retry waiting out its backoff is queued)."""
    engine = start(app, concurrency=concurrency)
    deadline = None if timeout is None else time.monotonic() + timeout.total_seconds()
    try:
        while True:
            engine.scheduler.wake()
            wait = engine.step()
            if wait and _idle(engine.store, app.clock.now_ms()):
                return _counts(engine.worker.totals)
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run_until_idle: still busy after {timeout}")
            app.clock.sleep(wait / 1000)
    finally:
        engine.stop()


def _counts(t: dict[str, int]) -> RunCounts:
    """The worker's totals, as the value ``run_until_idle`` promises."""
    return RunCounts(
        ok=t["ok"], noop=t["noop"], error=t["error"], failed=t["failed"], stale=t["stale"]
    )


def _idle(store: SqlStore, now_ms: int) -> bool:
    return store.pending_due(now_ms) == 0 and store.queue_depth() == 0


def _ms(interval: timedelta) -> int:
    return max(1, interval // timedelta(milliseconds=1))


@contextmanager
def _stopping() -> Iterator[Callable[[], bool]]:
    """A flag that SIGINT/SIGTERM set (their handlers restored after); in a thread other than
    the main one, only the caller's KeyboardInterrupt stops it."""
    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield flag.is_set
        return
    previous = {s: signal.signal(s, lambda *_: flag.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag.is_set
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
