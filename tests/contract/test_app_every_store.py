"""The App API on every store, as a user's app runs it (issue 27): a cron-fired task that defers
a follow-up, ``task.defer`` inside a task, and ``run_until_idle`` on a ``FakeClock`` giving the
same counts on SQLite :memory:, a SQLite file and PostgreSQL. Each test failed first."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import cronlab
from cronlab.clock import FakeClock
from cronlab.election.store import StoreElector
from cronlab.stores.memory import MemoryStore

from .dist_servers import pg_database

T0 = 1_796_443_920_000  # a whole minute (2026-12-05T04:52:00Z)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """What an App is opened on: ``memory``, or a store URL."""
    if request.param == "postgres":
        with pg_database() as url:
            yield url
        return
    yield "memory" if request.param == "memory" else f"sqlite:///{tmp_path / 'app.db'}"


def open_app(where: str, clock: FakeClock) -> cronlab.App:
    if where == "memory":
        return cronlab.App(store=MemoryStore(), clock=clock, name="billing")
    return cronlab.App(where, clock=clock, name="billing")


def count(app: cronlab.App, table: str) -> int:
    """Rows of one of the app's tables, or of cronlab's own (``tasks``: ``SqlStore.own``)."""
    store = app.store()
    return int(store.query(store.own(f"SELECT count(*) FROM {table}"))[0][0])


def billing(where: str, clock: FakeClock) -> tuple[cronlab.App, list[str]]:
    """The seed's own use case: bill every minute through ctx.tx, e-mail a minute later."""
    app, calls = open_app(where, clock), []

    @app.on_start
    def tables(store: Any) -> None:
        store.write(lambda tx: tx.execute("CREATE TABLE IF NOT EXISTS bills (k TEXT)"))
        store.write(lambda tx: tx.execute("CREATE TABLE IF NOT EXISTS receipts (k TEXT)"))

    def insert(ctx: cronlab.Context, table: str) -> None:
        mark = "?" if ctx.tx.dialect == "sqlite" else "%s"
        ctx.tx.execute(f"INSERT INTO {table} VALUES ({mark})", (ctx.idempotency_key,))

    @app.task(name="send_receipt")
    def send_receipt(ctx: cronlab.Context, invoice: str) -> None:
        calls.append(f"receipt {invoice}")
        insert(ctx, "receipts")

    @app.cron("* * * * *")
    @app.task(name="bill")
    def bill(ctx: cronlab.Context) -> None:
        calls.append("bill")
        insert(ctx, "bills")
        ctx.defer(send_receipt, {"invoice": ctx.idempotency_key}, delay=timedelta(minutes=1))

    return app, calls


def test_a_cron_fired_task_defers_a_follow_up_and_the_engine_goes_on(where: str) -> None:
    """Failed first: the follow-up's key began ``schedule:`` and was parsed as an occurrence
    key (``not a schedule occurrence key``): every engine process stopped for good."""
    clock = FakeClock(T0)
    app, calls = billing(where, clock)
    app.run_until_idle(timeout=timedelta(seconds=30))
    assert calls == []  # the first occurrence is a minute away
    clock.advance(60_000)
    counts = app.run_until_idle(timeout=timedelta(seconds=30))
    assert (counts["ok"], calls) == (1, ["bill"])
    assert count(app, "receipts") == 0  # due a minute after the bill, not yet
    clock.advance(60_000)
    counts = app.run_until_idle(timeout=timedelta(seconds=30))
    assert counts["ok"] == 2 and sorted(calls) == [
        "bill",
        "bill",
        f"receipt schedule:bill:{T0 + 60_000}",
    ]
    assert (count(app, "bills"), count(app, "receipts")) == (2, 1)


def test_task_defer_inside_a_task_commits_with_its_run(where: str) -> None:
    """Failed first on SQLite: ``BackendUnavailable: cannot start a transaction within a
    transaction`` (the defer opened a second transaction on the worker's connection)."""
    clock = FakeClock(T0)
    app, calls = open_app(where, clock), []

    @app.task(name="nudge")
    def nudge(ctx: cronlab.Context, user: str) -> None:
        calls.append(f"nudge {user}")

    @app.task(name="welcome")
    def welcome(ctx: cronlab.Context, user: str) -> None:
        calls.append(f"welcome {user}")
        nudge.defer(user=user, delay=timedelta(days=3))

    welcome.defer(user="ada")
    counts = app.run_until_idle(timeout=timedelta(seconds=30))
    assert (counts["ok"], calls) == (1, ["welcome ada"])
    clock.advance(3 * 86_400_000)
    counts = app.run_until_idle(timeout=timedelta(seconds=30))
    assert (counts["ok"], calls) == (1, ["welcome ada", "nudge ada"])


def test_a_key_is_a_no_op_while_its_task_is_kept_then_free_once_the_retention_deleted_it(
    where: str,
) -> None:
    """Issue 27, bug 5: what a key promises, as docs/api.md states it — a defer under a key
    its task still holds is a no-op, for as long as the history keeps that task (``keep``);
    once the retention deleted the finished task, the key is free and runs again."""
    clock = FakeClock(T0)
    app, calls = open_app(where, clock), []

    @app.task(name="mail")
    def mail(ctx: cronlab.Context, to: str) -> None:
        calls.append(to)

    assert mail.defer(to="ada", key="mail:ada").added
    app.run_until_idle(timeout=timedelta(seconds=30))
    assert not mail.defer(to="ada", key="mail:ada").added  # kept: a no-op
    app.run_until_idle(timeout=timedelta(seconds=30))
    assert calls == ["ada"]
    store, keep = app.store(), 3_600_000
    clock.advance(keep + 60_000)
    lease = StoreElector(store, clock).acquire_or_renew("l", 10_000)
    assert lease is not None and store.prune_history(keep, clock.now_ms(), 100, lease.epoch) > 0
    assert mail.defer(to="ada", key="mail:ada").added  # deleted by the retention: free again
    app.run_until_idle(timeout=timedelta(seconds=30))
    assert calls == ["ada", "ada"]


def test_defer_many_treats_a_known_key_with_other_arguments_as_defer_does(where: str) -> None:
    """Failed first: ``defer`` raised ``ConflictError`` for a key taken with other arguments,
    ``defer_many`` counted it as existing and went on."""
    app = open_app(where, FakeClock(T0))

    @app.task(name="bill")
    def bill(ctx: cronlab.Context, customer: int) -> None:
        """A user's task."""

    bill.defer(customer=1, key="bill:1")
    same = bill.defer_many([({"customer": 1}, "bill:1"), ({"customer": 2}, "bill:2")])
    assert (same.added, same.existing) == (1, 1)
    with pytest.raises(cronlab.ConflictError, match="bill:1"):
        bill.defer_many([({"customer": 3}, "bill:3"), ({"customer": 9}, "bill:1")])
    assert count(app, "tasks") == 2  # the batch went in whole or not at all


def test_an_apps_sql_written_once_with_question_marks_and_names_runs_on_every_store(
    where: str,
) -> None:
    """Issue 31, item 2: ``ctx.tx`` took each driver's own placeholders, so a task written
    for SQLite failed on PostgreSQL (``the query has 0 placeholders but 2 parameters were
    passed``). Now ``?`` and ``:name`` work on both, in sync and async tasks, in ``rows``
    and in ``store.query``; a ``%`` in a literal stays a ``%``."""
    clock = FakeClock(T0)
    app = open_app(where, clock)

    @app.task(name="credit")
    def credit(ctx: cronlab.Context, n: int) -> None:
        ctx.tx.execute("INSERT INTO ledger VALUES (?, ?)", (ctx.idempotency_key, n))
        ctx.tx.execute("UPDATE ledger SET n = n + :more WHERE k = :k", {"more": 1, "k": "seed"})
        (total,) = ctx.tx.rows("SELECT sum(n) FROM ledger WHERE k LIKE 'c%' OR k = ?", ("x",))
        assert total[0] is None  # (no key starts with c: the % matched as a wildcard)

    @app.task(name="acredit")
    async def acredit(ctx: cronlab.Context, n: int) -> None:
        ctx.tx.execute("INSERT INTO ledger VALUES (:k, :n)", {"k": ctx.idempotency_key, "n": n})

    app.store().write(lambda tx: tx.execute("CREATE TABLE ledger (k TEXT, n INT)"))
    app.store().write(lambda tx: tx.execute("INSERT INTO ledger VALUES (?, ?)", ("seed", 0)))
    credit.defer(n=5, key="one")
    acredit.defer(n=7, key="two")
    counts = app.run_until_idle(timeout=timedelta(seconds=30))
    assert (counts["ok"], counts["error"]) == (2, 0)
    rows = app.store().query("SELECT k, n FROM ledger WHERE n >= ? ORDER BY k", (0,))
    assert [tuple(r) for r in rows] == [("one", 5), ("seed", 1), ("two", 7)]
    assert app.store().query("SELECT n FROM ledger WHERE k = :k", {"k": "two"})[0][0] == 7


def test_a_failed_run_is_said_by_the_process_that_ran_it_one_line_each(
    where: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 31: task failures printed nothing where they ran; only ``cronlab runs`` showed
    them. Now each failed run is one line on the worker's stderr: the task, its id and key,
    the attempt, the error (secrets hidden) and what comes next."""
    clock = FakeClock(T0)
    app = open_app(where, clock)

    @app.task(name="charge", retries=1)
    def charge(ctx: cronlab.Context, card: str) -> None:
        raise ValueError(f"declined\nby postgresql://bank:s3cret@10.0.0.1/x for {card}")

    ref = charge.defer(card="4242", key="charge:1")
    counts = app.run_until_idle(timeout=timedelta(seconds=30))
    assert (counts["error"], counts["failed"]) == (1, 1)
    lines = [x for x in capfd.readouterr().err.splitlines() if "task charge" in x]
    said = "task charge (id {}, key charge:1) attempt {} failed: ValueError: declined by "
    said += "postgresql://bank:***@10.0.0.1/x for 4242; {}"
    assert [x.partition(": ")[2] for x in lines] == [
        said.format(ref.id, 1, "retried"),
        said.format(ref.id, 2, "no attempts left: FAILED"),
    ]
