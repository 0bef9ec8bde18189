"""An idempotency key racing another transaction on PostgreSQL (seed 2601 of the PostgreSQL
search, at ffb1f53). ``defer(key=K)`` inserted, found K taken by a finished task, and read that
task back in a statement of its own — by when the leader's retention had deleted it:
``NotFoundError`` out of ``defer``, for a key the docs call free once the retention deleted its
task. A defer is one statement now (``add_one_at_once``), with no gap between its insert and
its read; the races left are inside that statement, when its insert waits for another
transaction's lock on the key: the tests below hold such a transaction open, wait until the
defer's statement waits for it (``pg_stat_activity``), then commit it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import cronlab
from contract.dist_servers import pg_database
from cronlab.stores.postgres import PostgresStore

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

FINISH = "UPDATE tasks SET status = 'DONE', finished_ms = 0, trigger_ms = 0"


@pytest.fixture
def url() -> Iterator[str]:
    with pg_database() as found:
        yield found


def _while_it_waits(url: str, hold: Callable[[psycopg.Connection[Any]], None], act: Any) -> Any:
    """``hold`` run in a transaction left open; ``act()`` started in a thread; once a session
    of the database waits for a lock (``act``'s statement, on ``hold``'s row), the
    transaction commits; ``act``'s result."""
    found: list[Any] = []
    with psycopg.connect(url) as holder:
        hold(holder)
        runner = threading.Thread(target=lambda: found.append(act()))
        runner.start()
        deadline = time.monotonic() + 10
        while not _someone_waits(url):
            assert time.monotonic() < deadline, "the defer never waited for the held row"
            time.sleep(0.01)
        holder.commit()
    runner.join(10)
    assert found, "the defer did not return"
    return found[0]


def _someone_waits(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as c:
        row = c.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return row is not None and row[0] > 0


def test_a_keyed_defer_whose_finished_task_the_retention_deletes_meanwhile_adds_it_again(
    url: str,
) -> None:
    """The retention's DELETE of the finished task holding K commits while the defer's insert
    waits on that row: the key is free, and the defer adds a new run."""
    app = cronlab.App(url)

    @app.task(name="send")
    def send(ctx: cronlab.Context, n: int) -> None:
        """(never run here)"""

    first = send.defer(key="k1", n=1)
    store = PostgresStore(url)
    try:
        store.write(lambda tx: tx.execute(store.own(FINISH)))  # the first run finished long ago

        def prune(c: psycopg.Connection[Any]) -> None:  # the retention's own statement
            gone = c.execute(store.queries["prune_tasks"], {"ids": [first.id]}).fetchall()
            assert len(gone) == 1

        again = _while_it_waits(url, prune, lambda: send.defer(key="k1", n=1))
        assert again.added and again.id != first.id  # the key was free: a new run
        keys = store.query(store.own("SELECT idempotency_key, status FROM tasks"))
        assert keys == [("k1", "PENDING")]
    finally:
        store.close()
        app.close()


def test_a_keyed_defer_that_waits_for_another_insert_of_its_key_returns_that_task(
    url: str,
) -> None:
    """Another transaction inserts K and commits while the defer's insert waits on it: the
    defer's statement finds K taken by a row its snapshot cannot see, and tries again
    (``KEY_TRIES``) — it returns that task, not added, instead of failing."""
    app = cronlab.App(url)

    @app.task(name="send")
    def send(ctx: cronlab.Context, n: int) -> None:
        """(never run here)"""

    send.defer(key="warm", n=0)  # the store opened and migrated before the race
    store = PostgresStore(url)
    try:
        row = {"idempotency_key": "k2", "task": "send", "payload": '{"n": 2}',
               "trigger_ms": 0, "schedule": None}  # fmt: skip

        def insert(c: psycopg.Connection[Any]) -> None:
            assert c.execute(store.queries["add_task"], row).rowcount == 1

        got = _while_it_waits(url, insert, lambda: send.defer(key="k2", n=2))
        held = store.task_by_key("k2")
        assert (got.added, got.id) == (False, held.id)
    finally:
        store.close()
        app.close()
