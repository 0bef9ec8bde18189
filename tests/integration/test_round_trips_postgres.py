"""Round trips per job on PostgreSQL (issue 30): what one single-job batch costs a worker, and
what the leader's dispatch of it costs, counted as the client's exchanges with the server —
so they cannot creep back.

An exchange is one ``psycopg.Connection.wait``: a statement sent and its answer read, a
``BEGIN``, ``SAVEPOINT`` or ``COMMIT`` as much as a query. The test counts them on every
connection of the process for the one call under test, prints the statements, and holds each
count to its bound (today's count: a change that lowers it lowers the bound)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import cronlab
from contract.dist_servers import pg_database
from cronlab.clock import SystemClock
from cronlab.election.store import StoreElector
from cronlab.ports import Retry
from cronlab.queues.store import StoreQueue
from cronlab.runtime.worker import Worker, WorkerConfig
from cronlab.stores import postgres

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

# Today's counts (the statements are printed with -s; 2026-12-07). The worker, from idle: a
# peek at the queue (by the server's clock, in the statement), the claim (one statement: the
# envelopes marked received, with their tasks' columns; a worker whose last claim found work
# skips the peek), and the run (BEGIN, the envelope locked and the task DONE in one
# statement, the handler's INSERT, the execution record and the ack in one, COMMIT: a batch
# of one run takes no SAVEPOINT and RELEASE — 9 before 2026-12-07). At 0f0decc it was 17.
# The leader: BEGIN, the fence (locked and raised, the lease row locked and the clock read, in
# one statement), the due rows taken, enqueued (counted and NOTIFY in the same statement),
# COMMIT — 10 before 2026-12-08 (the clock, the fence locked, the lease read and the fence
# raised four; enqueued, counted and NOTIFY three). Storage v2 (issue 30) lowers them; one that
# rises fails here.
WORKER_BATCH_OF_ONE = 7
LEADER_DISPATCH_OF_ONE = 5
# A defer of one task: one statement in autocommit — the INSERT, the read of the task holding
# its key and the NOTIFY (9 exchanges before 2026-12-07, when the COPY path took four of them;
# 5 before 2026-12-08: BEGIN, the INSERT, the holder read, NOTIFY, COMMIT). A repeated key
# costs the same. A tick's few occurrences and defer_many's small batches take one INSERT from
# arrays.
DEFER_OF_ONE = 1


class Exchanges:
    """Every exchange of every connection while ``counting``, with the statement it sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.counting = False

    def __enter__(self) -> Exchanges:
        self.sent.clear()
        self.counting = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.counting = False


@pytest.fixture
def exchanges(monkeypatch: pytest.MonkeyPatch) -> Iterator[Exchanges]:
    seen = Exchanges()
    wait = psycopg.Connection.wait
    execute, command = psycopg.Cursor.execute, psycopg.Connection._exec_command
    last: dict[str, str] = {"sql": ""}

    def note(query: Any) -> None:
        text = query.decode(errors="replace") if isinstance(query, bytes) else str(query)
        last["sql"] = " ".join(text.split())[:90]

    def io(gen: Any) -> Any:
        """``gen`` as it was, noted once it first waits for the socket (one that needs no
        I/O — a COMMIT outside a transaction — is no exchange)."""
        try:
            state = next(gen)
        except StopIteration as done:
            return done.value
        if seen.counting:
            kind = getattr(gen, "__qualname__", "?").rpartition("_")[0].rpartition(".")[2]
            seen.sent.append(last["sql"] if kind == "_execute" else kind.strip("_"))
        while True:
            try:
                state = gen.send((yield state))
            except StopIteration as done:
                return done.value

    def counted_wait(self: psycopg.Connection[Any], gen: Any, *a: Any, **k: Any) -> Any:
        return wait(self, io(gen), *a, **k)

    def noted_execute(self: psycopg.Cursor[Any], query: Any, *a: Any, **k: Any) -> Any:
        note(query)
        return execute(self, query, *a, **k)

    def noted_command(self: psycopg.Connection[Any], query: Any, *a: Any, **k: Any) -> Any:
        note(query)
        return command(self, query, *a, **k)

    monkeypatch.setattr(psycopg.Connection, "wait", counted_wait)
    monkeypatch.setattr(psycopg.Cursor, "execute", noted_execute)
    monkeypatch.setattr(psycopg.Connection, "_exec_command", noted_command)
    yield seen


def test_a_single_job_batch_and_its_dispatch_cost_their_bounded_round_trips(
    exchanges: Exchanges,
) -> None:
    """One job that writes one row through ``ctx.tx``, ``--worker-batch 1``: the leader's
    dispatch of it, then the worker's batch (claim, run, record, ack)."""
    with pg_database() as url:
        app = cronlab.App(url)
        app.store().query("CREATE TABLE receipts (n INT)")

        @app.task(name="receipt")
        def receipt(ctx: cronlab.Context, n: int) -> None:
            ctx.tx.execute("INSERT INTO receipts VALUES (?)", (n,))

        receipt.defer(n=1)
        clock, store = SystemClock(), app.store()
        lease = StoreElector(store, clock).acquire_or_renew("leader", 10_000)
        assert lease is not None
        cfg = WorkerConfig(index=0, batch=1, retry=Retry(max_attempts=3, base_ms=100))
        queue = StoreQueue(store, clock)
        worker = Worker(cfg, store=store, queue=queue, registry=app.registry, clock=clock, name="w")
        worker.step()  # a first step: its connection opened, nothing due yet

        with exchanges:
            assert store.dispatch_due(clock.now_ms(), 100, lease.epoch) == 1
        dispatch = list(exchanges.sent)
        with exchanges:
            worker.step()
        batch = list(exchanges.sent)

        assert store.query("SELECT n FROM receipts") == [(1,)]
        print("\nleader, dispatch of one:", *dispatch, sep="\n  ")
        print("worker, batch of one:", *batch, sep="\n  ")
        assert len(dispatch) <= LEADER_DISPATCH_OF_ONE, dispatch
        assert len(batch) <= WORKER_BATCH_OF_ONE, batch
        app.close()


def test_a_defer_of_one_task_costs_its_bounded_round_trips(exchanges: Exchanges) -> None:
    """``Task.defer`` of one task, on an App whose store is open: one statement — and one
    under a key that is taken returns its holder as cheaply; a batch over ``FEW_TASKS`` still
    goes in whole (COPY)."""
    with pg_database() as url:
        app = cronlab.App(url)

        @app.task(name="receipt")
        def receipt(ctx: cronlab.Context, n: int) -> None: ...

        receipt.defer(n=0)  # the store opened and migrated before counting
        with exchanges:
            assert receipt.defer(n=1).added
        once = list(exchanges.sent)
        first = receipt.defer(n=7, key="k")
        with exchanges:
            again = receipt.defer(n=7, key="k")
        keyed = list(exchanges.sent)
        assert (first.added, again.added, again.id) == (True, False, first.id)
        many = receipt.defer_many({"n": n} for n in range(2, 2 + postgres.FEW_TASKS + 1))
        assert many.added == postgres.FEW_TASKS + 1
        assert receipt.defer_many([{"n": 1}, {"n": 1}]).added == 2  # fresh keys each
        counts = app.store().counts()
        print("\ndefer of one:", *once, sep="\n  ")
        assert counts["PENDING"] == 2 + postgres.FEW_TASKS + 1 + 2 + 1
        assert len(once) <= DEFER_OF_ONE, once
        assert len(keyed) <= DEFER_OF_ONE, keyed
        assert sum("INSERT INTO" in s for s in once) == 1, once
        app.close()


def test_the_statements_that_send_notify_themselves_wake_their_channels() -> None:
    """The defer's one statement and the dispatch's enqueue send their channel's NOTIFY with
    ``pg_notify`` (no ``NOTIFY`` statement of their own): a ``LISTEN``ing waiter wakes when a
    task is added and when one is enqueued, and not for a key that was taken."""
    from cronlab.ports import NewTask
    from cronlab.stores.postgres import PostgresStore

    with pg_database() as url:
        store = PostgresStore(url)
        due, queued = store.waiter("due"), store.waiter("queued")
        assert due is not None and queued is not None
        assert (due.wait(0.05), queued.wait(0.05)) == (False, False)
        assert store.add_task(NewTask("k", "t", trigger_ms=0))[0]
        assert due.wait(5)
        assert not store.add_task(NewTask("k", "t", trigger_ms=0))[0]
        assert not due.wait(0.3)
        lease = StoreElector(store, SystemClock()).acquire_or_renew("w", 60_000)
        assert lease is not None
        assert store.dispatch_due(store.server_ms(), 10, lease.epoch) == 1
        assert queued.wait(5)
        due.close()
        queued.close()
        store.close()
