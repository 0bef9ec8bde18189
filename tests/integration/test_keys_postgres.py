"""An idempotency key racing the retention on PostgreSQL (seed 2601 of the PostgreSQL search,
at ffb1f53). ``defer(key=K)`` inserted, found K taken by a finished task, and read that task
back in a statement of its own — by when the leader's retention had deleted it:
``NotFoundError`` out of ``defer``, for a key the docs call free once the retention deleted its
task. The test forces that interleaving: the retention runs, to its commit, right after the
defer's INSERT. It failed first with ``NotFoundError: no task with key 'k1'``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

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


def _after_insert(store: Any, act: Any) -> None:
    """Run ``act`` (in a thread, to its end) once, right after ``store`` inserts tasks."""
    real, done = store.db.insert_tasks, []

    def hooked(c: Any, rows: Any) -> int:
        n = int(real(c, rows))
        if not done:
            done.append(threading.Thread(target=act))
            done[0].start()
            done[0].join(10)
        return n

    store.db.insert_tasks = hooked


def test_a_keyed_defer_whose_finished_task_the_retention_deletes_meanwhile_adds_it_again(
    url: str,
) -> None:
    app = cronlab.App(url)

    @app.task(name="send")
    def send(ctx: cronlab.Context, n: int) -> None:
        """(never run here)"""

    first = send.defer(key="k1", n=1)
    retention = PostgresStore(url)
    try:
        retention.write(
            lambda tx: tx.execute(retention.own(FINISH))
        )  # the first run finished long ago
        lease = retention.lease_cas("leader", 1_000, 60_000)
        assert lease is not None
        pruned: list[int] = []
        _after_insert(
            app.store(),
            lambda: pruned.append(retention.prune_history(1_000, 10_000, 100, lease.epoch)),
        )
        again = send.defer(key="k1", n=1)
        assert pruned == [1]  # the retention deleted the finished task, between the two
        assert again.added and again.id != first.id  # the key was free: a new run
        keys = app.store().query(app.store().own("SELECT idempotency_key, status FROM tasks"))
        assert keys == [("k1", "PENDING")]
    finally:
        retention.close()
        app.close()
