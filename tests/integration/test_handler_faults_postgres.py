"""Handlers that make PostgreSQL drop or poison their connection, on a real server, in real
time (issue 27, bug 1): each is run as often as its retries allow and no more, its attempts
counted, and it ends FAILED with the reason. Each test failed first: the runs went on for
ever (15-23 handler calls in 45-100 s), attempts 0, the task DISPATCHED."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import cronlab
from contract.dist_servers import REDIS, START_REDIS, need, pg_database
from cronlab.clock import SystemClock
from cronlab.election.store import StoreElector
from cronlab.ports import Queue, Retry
from cronlab.queues.redis import RedisQueue, connect, parse_url
from cronlab.queues.store import StoreQueue
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
        (status,) = [r[0] for r in store.query(store.own("SELECT status FROM tasks"))]
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
    (error, attempts) = app.store().query(
        app.store().own("SELECT last_error, attempts FROM tasks")
    )[0]
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
    (error, attempts) = app.store().query(
        app.store().own("SELECT last_error, attempts FROM tasks")
    )[0]
    assert error.startswith("LostRun") and attempts == 3
    app.store().close()


def test_a_worker_whose_clock_is_behind_keeps_its_messages_invisible(url: str) -> None:
    """Found by ``cronlab verify --seed 11 --store postgresql://…`` (issue 27): a claim's
    visibility was judged by the worker's own clock, so a worker whose clock had stepped back
    5 s claimed messages already visible again to the others: two workers ran one task, and a
    deadlock between them undid a completed run, which ran again. On a server, the server's
    clock judges it, as it judges the lease."""
    from cronlab.clock import FakeClock
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


@pytest.mark.parametrize("queue", ["store", "redis"])
def test_retries_behind_sessions_the_server_ended_still_run(url: str, queue: str) -> None:
    """PostgreSQL seed 1529, again, with the checker made stricter: a worker stopped its batch
    after two groups in a row whose sessions the server ended (retries of handlers that
    outlast the idle-in-transaction timeout); the groups behind them never ran, and each was
    charged a lost attempt at its redelivery, until a quick task FAILED having run once. Now
    only a backend that cannot be reached stops the batch: the quick task's retry runs. (A
    store queue's claim now runs only its first group and gives the others back; Redis's
    heartbeat holds every group, so there the batch still runs group after group.)"""
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
    with queues(app, queue) as (store, q):
        statuses = work_until_all_settled(app, store, q)
    assert statuses == {"dawdles": [("FAILED", 4)] * 3, "quick": [("DONE", 2)]}
    # Its first attempt was in the dawdlers' group, after them: lost before its handler ran.
    assert quick_calls == [2]


@contextlib.contextmanager
def queues(app: cronlab.App, kind: str) -> Iterator[tuple[Any, Queue]]:
    """The app's store and a queue of ``kind``: the store's own, or a Redis stream the store's
    outbox feeds (a prefix of the test's own, dropped after)."""
    store, clock = app.store(), SystemClock()
    if kind == "store":
        yield store, StoreQueue(store, clock)
    else:
        url = parse_url(f"{REDIS}?prefix=cronlab-test-{uuid.uuid4().hex[:10]}")
        need(lambda: connect(url).close(), START_REDIS)
        redis_queue = RedisQueue(url, store, clock)
        try:
            yield store, redis_queue
        finally:
            redis_queue.drop()
            redis_queue.close()
    store.close()


def work_until_all_settled(
    app: cronlab.App, store: Any = None, queue: Queue | None = None, deadline_s: float = 60.0
) -> dict[str, list[Any]]:
    """Dispatch the app's due tasks, then run a worker (short visibility) on ``queue`` (the
    store's own by default) until no task is open; each task name's (status, attempts)."""
    clock = SystemClock()
    store = store or app.store()
    elector = StoreElector(store, clock)
    cfg = WorkerConfig(index=0, visibility_ms=VISIBILITY_MS, idle_ms=50)
    worker = Worker(
        cfg, store=store, queue=queue or StoreQueue(store, clock), registry=app.registry,
        clock=clock, name="w",
    )  # fmt: skip
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        epoch = elector.acquire_or_renew("leader", 10_000)  # (renewed: a run may take longer)
        assert epoch is not None
        store.dispatch_due(clock.now_ms(), 100, epoch.epoch)
        if queue is not None:
            queue.relay()  # a queue elsewhere: the leader's relay (``Scheduler.dispatch``)
        clock.sleep(worker.step() / 1000)
        found = store.query(store.own("SELECT task, status, attempts FROM tasks ORDER BY task, id"))
        if all(status in ("DONE", "FAILED") for _, status, _ in found):
            by_name: dict[str, list[Any]] = {}
            for task, status, attempts in found:
                by_name.setdefault(task, []).append((status, attempts))
            return by_name
    raise AssertionError("tasks were still open after the deadline")


class Recording(Worker):
    """A worker that notes the size of each batch it claims."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[int] = []
        self.claims = threading.Event()  # set at each claim

    def claimed(self, messages: Any) -> None:
        self.batches.append(len(messages))
        self.claims.set()


def test_a_retry_claimed_behind_a_long_group_is_not_charged_an_attempt_it_never_ran(
    url: str,
) -> None:
    """PostgreSQL seeds 510, 1017 and 12941 at 438121c: a worker claimed first attempts and a
    retry together; the retry's transaction comes after the first attempts', and while a
    handler there outlasted the visibility timeout the retry's envelope became visible, so a
    second worker received it again and charged it a lost attempt its handler never started
    (until tasks FAILED having run once). Now a claim keeps only the groups it runs first and
    gives the others back at once, uncharged: the other worker runs the retry as attempt 2."""
    app, flaky_calls = cronlab.App(url), []

    @app.task(name="flaky", retries=3)
    def flaky(ctx: cronlab.Context) -> Any:
        flaky_calls.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("the first attempt fails")

    @app.task(name="slow")
    def slow(ctx: cronlab.Context) -> Any:
        ctx.tx.execute("SELECT 1")
        time.sleep(3 * VISIBILITY_MS / 1000)  # the retry's envelope outlives its visibility

    clock, store = SystemClock(), app.store()
    epoch = StoreElector(store, clock).acquire_or_renew("leader", 60_000)
    assert epoch is not None
    cfg = WorkerConfig(index=0, visibility_ms=VISIBILITY_MS, retry=Retry(base_ms=1), idle_ms=20)

    def worker(name: str) -> Recording:
        queue = StoreQueue(store, clock)
        return Recording(
            cfg, store=store, queue=queue, registry=app.registry, clock=clock, name=name
        )

    a, b = worker("a"), worker("b")
    flaky.defer()
    store.dispatch_due(clock.now_ms(), 100, epoch.epoch)
    a.step()  # attempt 1 fails; its retry waits in an envelope of its own
    slow.defer()
    store.dispatch_due(clock.now_ms(), 100, epoch.epoch)
    clock.sleep(0.05)
    done = threading.Event()

    def poll() -> None:
        a.claims.wait()  # b polls from the moment a claimed the retry and slow together
        while not done.is_set():
            clock.sleep(b.step() / 1000)

    a.claims.clear()
    other = threading.Thread(target=poll)
    other.start()
    end = time.monotonic() + 30
    while time.monotonic() < end and store.counts()["DONE"] < 2:
        clock.sleep(a.step() / 1000)
    done.set()
    other.join()
    assert a.batches[1] == 2  # the retry and slow were claimed together
    found = store.query(store.own("SELECT task, status, attempts FROM tasks ORDER BY task"))
    assert found == [("flaky", "DONE", 2), ("slow", "DONE", 1)]
    assert flaky_calls == [1, 2]
    store.close()
