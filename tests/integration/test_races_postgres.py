"""Operator actions racing the leader on PostgreSQL, each interleaving forced at one statement
(issue 27, bugs 3 and 4). The leader's transaction is paused right after a given statement
while the other action runs, on its own connection, to its end (or until it waits for a lock
the paused transaction holds); then the leader goes on. Each test failed first."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from contract.dist_servers import pg_database
from cronlab.core.policy import Schedule
from cronlab.exceptions import ConflictError
from cronlab.stores.postgres import QUERIES, PostgresStore

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

T0 = 1_767_225_600_000  # a whole minute
MIN = 60_000
DONE = "UPDATE tasks SET status = 'DONE' WHERE status = 'DISPATCHED'"


@pytest.fixture
def stores() -> Iterator[tuple[PostgresStore, PostgresStore]]:
    with pg_database() as url:
        leader = PostgresStore(url, time_source="caller")
        other = PostgresStore(url, time_source="caller")
        yield leader, other
        leader.close()
        other.close()


@contextlib.contextmanager
def meanwhile(store: PostgresStore, after: str, act: Callable[[], Any]) -> Iterator[list[str]]:
    """Run ``act`` in a thread, once, right after ``store`` executes the named query ``after``;
    wait for it to finish (or to wait for a lock: 1 s), then let ``store`` go on. Yields what
    became of ``act``: "done", or "waited" (it finished after the store's transaction)."""
    real, said, worker = store.postgres._pool.connection, [], []

    @contextlib.contextmanager
    def connection() -> Iterator[Any]:
        with real() as conn:
            execute = conn.execute

            def hooked(query: Any, params: Any = None, **kw: Any) -> Any:
                found = execute(query, params, **kw)
                if query == QUERIES[after] and not worker:
                    worker.append(threading.Thread(target=act))
                    worker[0].start()
                    worker[0].join(1.0)
                    said.append("waited" if worker[0].is_alive() else "done")
                return found

            conn.execute = hooked
            try:
                yield conn
            finally:
                del conn.execute

    store.postgres._pool.connection = connection  # type: ignore[method-assign]
    try:
        yield said
    finally:
        store.postgres._pool.connection = real  # type: ignore[method-assign]
        if worker:
            worker[0].join(10)


def test_a_redeploy_committing_during_a_dispatch_leaves_no_occurrence_of_the_old_definition(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """Bug 4: planning read the schedule unlocked; a redeploy (every 3 s, task ``b``) committed
    meanwhile; the dispatch then planned the next occurrence of the old definition (2 s, task
    ``a``), which ran the old task, and wrote the schedule's next fire over the deploy's."""
    leader, deployer = stores
    every2 = Schedule(name="tick", cron="* * * * * */2", task="a", overlap="allow")
    every3 = Schedule(name="tick", cron="* * * * * */3", task="b", overlap="allow")
    leader.put_schedule(every2, T0 - 1_000, replace=True)
    epoch = leader.lease_cas("leader", T0, 60_000)
    assert epoch is not None

    def deploy() -> None:
        deployer.put_schedule(every3, T0 + 100, replace=True)

    with meanwhile(leader, "schedules_get_many", deploy):
        assert leader.dispatch_due(T0 + 100, 100, epoch.epoch) == 1
    pending = leader.query(
        leader.own(
            "SELECT idempotency_key, task FROM tasks WHERE status = 'PENDING' ORDER BY trigger_ms"
        )
    )
    assert pending == [(f"schedule:tick:{T0 + 3_000}", "b")]
    (info,) = leader.list_schedules()
    assert (info.schedule.task, info.next_fire_ms) == ("b", T0 + 3_000)


def test_a_backfill_racing_the_retention_never_runs_an_occurrence_twice(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """Bug 3: the backfill read how far back the retention had deleted once, then looked each
    occurrence up in later statements; the retention deleted them meanwhile, so the backfill
    took occurrences that had run for ones that never did, and ran them again."""
    leader, operator = stores
    hourly = Schedule(name="hourly", cron="0 * * * *", task="h", overlap="allow")
    leader.put_schedule(hourly, T0 - 1, replace=True)
    epoch = leader.lease_cas("leader", T0, 3_600_000 * 10)
    assert epoch is not None
    for hour in range(3):  # three occurrences run (marked DONE as a worker would)
        now = T0 + hour * 3_600_000
        leader.dispatch_due(now, 100, epoch.epoch)
        leader.write(lambda tx: tx.execute(leader.own(DONE)))
    later = T0 + 3 * 3_600_000 + 1_000

    def prune() -> None:
        leader_again = PostgresStore(leader.url, time_source="caller")
        leader_again.prune_history(3_600_000, later, 100, epoch.epoch)
        leader_again.close()

    outcome: list[Any] = []
    with meanwhile(operator, "schedule_history_gone", prune):
        try:
            outcome.append(operator.backfill_schedule("hourly", T0, T0 + 2 * 3_600_000, later))
        except Exception as exc:  # refused: the range reaches deleted history
            outcome.append(exc)
    backfilled = leader.query(
        leader.own("SELECT count(*) FROM tasks WHERE starts_with(idempotency_key, 'backfill:')")
    )
    assert backfilled == [(0,)], f"re-ran occurrences that ran: {outcome}"


def test_two_schedule_adds_of_one_name_at_once_end_in_a_conflict_not_an_overwrite(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """Issue 27 ("also seen"): two ``schedule add`` of one name at once on PostgreSQL: neither
    saw the other's row (it did not exist yet to lock), so the second overwrote the first."""
    first, second = stores
    a = Schedule(name="report", cron="0 6 * * *", task="a")
    b = Schedule(name="report", cron="0 7 * * *", task="b")
    refused: list[Exception] = []

    def add_b() -> None:
        try:
            second.put_schedule(b, T0, replace=False)
        except ConflictError as exc:
            refused.append(exc)

    with meanwhile(first, "schedule_get_locked", add_b):
        first.put_schedule(a, T0, replace=False)
    (info,) = first.list_schedules()
    assert info.schedule.task == "a" and len(refused) == 1


def test_a_redeploy_that_waited_for_a_dispatch_keeps_the_occurrence_due_meanwhile() -> None:
    """PostgreSQL seed 1507: a redeploy asked at instant A, then waited for the fence locks of
    a dispatch; an occurrence of the old definition fell due while it waited. The redeploy
    judged due-ness by A, took that occurrence for one still to come and dropped it: it never
    ran. Now a change is judged by the store's clock once it holds the locks."""
    every_second = Schedule(name="tick", cron="* * * * * *", task="a", overlap="allow")
    yearly = Schedule(name="tick", cron="0 0 1 1 *", task="b", overlap="allow")
    with pg_database() as url:
        leader, deployer = PostgresStore(url), PostgresStore(url)  # the server's clock
        try:
            now = lambda: int(leader.query(SERVER_MS)[0][0])  # noqa: E731
            leader.put_schedule(every_second, now(), replace=True)
            epoch = leader.lease_cas("leader", now(), 60_000)
            assert epoch is not None
            _sleep_until(now, (now() // 1_000 + 1) * 1_000 + 100)  # 0.1 s past a second
            asked: list[int] = []

            def deploy() -> None:
                asked.append(now())  # as the CLI reads its clock, before it waits
                deployer.put_schedule(yearly, asked[0], replace=True)

            with meanwhile(leader, "schedules_get_many", deploy) as said:
                assert leader.dispatch_due(now(), 100, epoch.epoch) >= 1
            due_meanwhile = (asked[0] // 1_000 + 1) * 1_000
            assert said == ["waited"] and now() > due_meanwhile
            kept = leader.query(
                leader.own(
                    f"SELECT task FROM tasks WHERE trigger_ms = {due_meanwhile} "
                    "AND starts_with(idempotency_key, 'schedule:tick:')"
                )
            )
            assert kept == [("a",)], f"the occurrence due at {due_meanwhile} was dropped"
        finally:
            leader.close()
            deployer.close()


SERVER_MS = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"


def _sleep_until(now: Callable[[], int], at_ms: int) -> None:
    while (left := at_ms - now()) > 0:
        time.sleep(left / 1000)
