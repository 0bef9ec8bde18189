"""Handlers that make PostgreSQL drop or poison their connection, on a real server, in real
time (issue 27, bug 1): each is run as often as its retries allow and no more, its attempts
counted, and it ends FAILED with the reason. Each test failed first: the runs went on for
ever (15-23 handler calls in 45-100 s), attempts 0, the task DISPATCHED."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import cronlab
from contract.dist_servers import pg_database
from cronlab.election.store import StoreElector
from cronlab.ports import Retry
from cronlab.queues.store import StoreQueue
from cronlab.runtime.clock import SystemClock
from cronlab.runtime.worker import Worker, WorkerConfig

pytestmark = pytest.mark.postgres
VISIBILITY_MS = 800


@pytest.fixture
def url() -> Iterator[str]:
    with pg_database() as found:
        yield found


def work_until_settled(app: cronlab.App, deadline_s: float = 60.0) -> str:
    """Dispatch the app's due tasks, then run a worker (short visibility, fast retries) until
    no task is open; the one task's status."""
    clock, store = SystemClock(), app.store()
    epoch = StoreElector(store, clock).acquire_or_renew("leader", 10_000)
    assert epoch is not None
    retry = Retry(max_attempts=5, base_ms=100)
    cfg = WorkerConfig(index=0, visibility_ms=VISIBILITY_MS, retry=retry, idle_ms=50)
    worker = Worker(
        cfg,
        store=store,
        queue=StoreQueue(store, clock),
        registry=app.registry,
        clock=clock,
        name="w",
    )
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        store.dispatch_due(clock.now_ms(), 100, epoch.epoch)
        clock.sleep(worker.step() / 1000)
        (status,) = [r[0] for r in store.query("SELECT status FROM tasks")]
        if status in ("DONE", "FAILED"):
            return str(status)
    raise AssertionError("the task was still open after the deadline")


def test_a_task_whose_sql_outlasts_its_timeout_fails_after_its_attempts(url: str) -> None:
    """(a) ``timeout=1 s, retries=2`` and ``SELECT pg_sleep(3)`` through ctx.tx: the alarm
    interrupted psycopg mid-statement and left the connection stuck; the batch was retried
    in place for ever, uncounted. Now the statement is cancelled on the server at the
    deadline: the run fails with TaskTimeout, three calls in all."""
    app, calls = cronlab.App(url), []

    @app.task(name="slow_sql", timeout=timedelta(seconds=1), retries=2)
    def slow_sql(ctx: cronlab.Context) -> None:
        calls.append(ctx.attempt)
        ctx.tx.execute("SELECT pg_sleep(3)")

    slow_sql.defer()
    assert work_until_settled(app) == "FAILED"
    assert calls == [1, 2, 3]
    (error, attempts) = app.store().query("SELECT last_error, attempts FROM tasks")[0]
    assert error.startswith("TaskTimeout") and attempts == 3
    app.store().close()


def test_a_task_that_outlasts_the_servers_idle_transaction_timeout_is_not_rerun_for_ever(
    url: str,
) -> None:
    """(b) The server ends a session idle in its transaction longer than its
    ``idle_in_transaction_session_timeout``; a handler that works that long in Python loses
    its connection. Each lost run counts as a failed attempt: as many calls as attempts."""
    with psycopg.connect(url, autocommit=True) as admin:
        name = admin.info.dbname
        admin.execute(f'ALTER DATABASE "{name}" SET idle_in_transaction_session_timeout = 300')
    app, calls = cronlab.App(url), []

    @app.task(name="dawdles", retries=2)
    def dawdles(ctx: cronlab.Context) -> Any:
        calls.append(ctx.attempt)
        ctx.tx.execute("SELECT 1")
        time.sleep(0.6)  # idle in the transaction past the server's 300 ms
        ctx.tx.execute("SELECT 1")

    dawdles.defer()
    assert work_until_settled(app) == "FAILED"
    assert len(calls) == 3
    (error, attempts) = app.store().query("SELECT last_error, attempts FROM tasks")[0]
    assert error.startswith("LostRun") and attempts == 3
    app.store().close()


def test_a_worker_whose_clock_is_behind_keeps_its_messages_invisible(url: str) -> None:
    """Found by ``cronlab verify --seed 11 --store postgresql://…`` (issue 27): a claim's
    visibility was judged by the worker's own clock, so a worker whose clock had stepped back
    5 s claimed messages already visible again to the others: two workers ran one task, and a
    deadlock between them undid a completed run, which ran again. On a server, the server's
    clock judges it, as it judges the lease."""
    from cronlab.runtime.clock import FakeClock
    from cronlab.stores.postgres import PostgresStore

    store = PostgresStore(url)  # time_source="server"
    now = store.server_ms()
    lease = StoreElector(store, FakeClock(now)).acquire_or_renew("leader", 10_000)
    assert lease is not None
    from cronlab.ports import NewTask

    store.add_tasks([NewTask("k", "h", now - 1_000, "{}")])
    assert store.dispatch_due(now, 10, lease.epoch) == 1
    behind, on_time = FakeClock(now - 5_000), FakeClock(now)
    assert len(StoreQueue(store, behind).claim("a", 10, 5_000)) == 1
    assert StoreQueue(store, on_time).claim("b", 10, 5_000) == []
    store.close()


def test_a_task_that_outlasts_the_idle_transaction_timeout_costs_its_batch_mates_one_attempt(
    url: str,
) -> None:
    """PostgreSQL seed 1529: a handler outlasting the server's idle-in-transaction timeout
    takes its whole batch down, and its retries came back in a batch with the retries of its
    batch-mates, which lost an attempt each time, until they failed too (or, slower, were still
    open when the run ended). Now a retry runs in a transaction of its own: the batch-mates
    lose one attempt and then run; only the handler that dawdles fails."""
    with psycopg.connect(url, autocommit=True) as admin:
        name = admin.info.dbname
        admin.execute(f'ALTER DATABASE "{name}" SET idle_in_transaction_session_timeout = 300')
    app = cronlab.App(url)

    @app.task(name="dawdles", retries=3)
    def dawdles(ctx: cronlab.Context) -> Any:
        ctx.tx.execute("SELECT 1")
        time.sleep(0.6)  # idle in the transaction past the server's 300 ms

    @app.task(name="quick", retries=3)
    def quick(ctx: cronlab.Context, n: int) -> Any:
        ctx.tx.execute("SELECT %s", (n,))

    dawdles.defer()
    for n in range(5):
        quick.defer(n=n)
    statuses = work_until_all_settled(app)
    assert statuses == {"dawdles": [("FAILED", 4)], "quick": [("DONE", 2)] * 5}
    app.store().close()


def test_retries_behind_sessions_the_server_ended_still_run(url: str) -> None:
    """PostgreSQL seed 1529, again, with the checker made stricter: a worker stopped its batch
    after two groups in a row whose sessions the server ended (retries of handlers that
    outlast the idle-in-transaction timeout); the groups behind them never ran, and each was
    charged a lost attempt at its redelivery, until a quick task FAILED having run once. Now
    only a backend that cannot be reached stops the batch: the quick task's retry runs."""
    with psycopg.connect(url, autocommit=True) as admin:
        name = admin.info.dbname
        admin.execute(f'ALTER DATABASE "{name}" SET idle_in_transaction_session_timeout = 300')
    app, quick_calls = cronlab.App(url), []

    @app.task(name="dawdles", retries=3)
    def dawdles(ctx: cronlab.Context, n: int) -> Any:
        ctx.tx.execute("SELECT %s", (n,))
        time.sleep(0.6)  # idle in the transaction past the server's 300 ms

    @app.task(name="quick", retries=3)
    def quick(ctx: cronlab.Context) -> Any:
        quick_calls.append(ctx.attempt)
        ctx.tx.execute("SELECT 1")

    for n in range(3):
        dawdles.defer(n=n)
    quick.defer()
    statuses = work_until_all_settled(app)
    assert statuses == {"dawdles": [("FAILED", 4)] * 3, "quick": [("DONE", 2)]}
    # Its first attempt was in the dawdlers' group, after them: lost before its handler ran.
    assert quick_calls == [2]
    app.store().close()


def work_until_all_settled(app: cronlab.App, deadline_s: float = 60.0) -> dict[str, list[Any]]:
    """Dispatch the app's due tasks, then run a worker (short visibility) until no task is
    open; each task name's (status, attempts)."""
    clock, store = SystemClock(), app.store()
    elector = StoreElector(store, clock)
    cfg = WorkerConfig(index=0, visibility_ms=VISIBILITY_MS, idle_ms=50)
    worker = Worker(
        cfg, store=store, queue=StoreQueue(store, clock), registry=app.registry, clock=clock,
        name="w",
    )  # fmt: skip
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        epoch = elector.acquire_or_renew("leader", 10_000)  # (renewed: a run may take longer)
        assert epoch is not None
        store.dispatch_due(clock.now_ms(), 100, epoch.epoch)
        clock.sleep(worker.step() / 1000)
        found = store.query("SELECT handler, status, attempts FROM tasks ORDER BY handler, id")
        if all(status in ("DONE", "FAILED") for _, status, _ in found):
            by_name: dict[str, list[Any]] = {}
            for handler, status, attempts in found:
                by_name.setdefault(handler, []).append((status, attempts))
            return by_name
    raise AssertionError("tasks were still open after the deadline")
