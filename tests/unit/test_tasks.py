"""The Python API (issue 14): tasks as functions, defer and defer_many, async tasks, retries and
timeouts, run_until_idle — on the memory store, driven as a user drives it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
import typing
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import cronlab
from cronlab.exceptions import ConfigError, ConflictError
from cronlab.testing import FakeClock, MemoryStore

T0 = 1_780_000_000_000


@pytest.fixture
def app() -> cronlab.App:
    return cronlab.App(store=MemoryStore(), clock=FakeClock(T0))


def effects(app: cronlab.App) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in app.store().query("SELECT * FROM effects ORDER BY rowid")]


@pytest.fixture
def table(app: cronlab.App) -> cronlab.App:
    app.store().write(lambda tx: tx.execute("CREATE TABLE effects (who TEXT, n INTEGER)"))
    return app


def test_defer_checks_the_arguments_against_the_signature_before_writing(
    app: cronlab.App,
) -> None:
    @app.task
    def bill(ctx: cronlab.Context, plan: str, customer: int, note: str = "") -> None: ...

    cases = [
        ({"plan": "pro"}, "missing argument 'customer'"),
        ({"plan": "pro", "customer": 1, "seats": 3}, "unexpected argument 'seats'"),
        ({"plan": datetime.now(UTC), "customer": 1}, "must be JSON"),
        ({"plan": "pro", "customer": float("nan")}, "must be JSON"),
        ({"plan": "x" * 70_000, "customer": 1}, "at most 65,536"),
    ]
    for arguments, words in cases:
        with pytest.raises(cronlab.TaskArgumentError, match=words):
            bill.defer(**arguments)
    with pytest.raises(TypeError):  # a TaskArgumentError is a TypeError too
        bill.defer(plan="pro")
    assert app.store().counts()["PENDING"] == 0


def test_defer_is_due_now_after_a_delay_or_at_an_aware_instant(app: cronlab.App) -> None:
    @app.task
    def bill(ctx: cronlab.Context, customer: int) -> None: ...

    now = bill.defer(customer=1)
    later = bill.defer(customer=2, delay=timedelta(days=3))
    at = datetime(2027, 1, 1, tzinfo=UTC)
    fixed = bill.defer(customer=3, at=at)
    assert now.added and now.task.endswith(
        ".test_defer_is_due_now_after_a_delay_or_at_an_aware_instant.bill"
    )
    assert later.due - now.due == timedelta(days=3) and fixed.due == at
    with pytest.raises(ConfigError, match="aware datetime"):
        bill.defer(customer=4, at=datetime(2027, 1, 1))
    with pytest.raises(ConfigError, match="not both"):
        bill.defer(customer=4, at=at, delay=timedelta(1))
    with pytest.raises(ConfigError, match="century"):
        bill.defer(customer=4, delay=timedelta(days=40_000))
    assert [
        r[0] for r in app.store().query(app.store().own("SELECT id FROM tasks ORDER BY id"))
    ] == [1, 2, 3]


def test_a_key_makes_a_second_defer_a_no_op_and_other_arguments_a_conflict(
    app: cronlab.App,
) -> None:
    @app.task
    def bill(ctx: cronlab.Context, customer: int) -> None: ...

    first = bill.defer(customer=9, key="bill:9:2026-12")
    again = bill.defer(customer=9, key="bill:9:2026-12", delay=timedelta(hours=1))
    assert first.added and not again.added and again.id == first.id and again.due == first.due
    with pytest.raises(ConflictError, match="other arguments"):
        bill.defer(customer=10, key="bill:9:2026-12")
    assert app.store().counts()["PENDING"] == 1


def test_a_key_postgresql_cannot_store_is_refused_before_anything_is_written(
    app: cronlab.App,
) -> None:
    @app.task
    def bill(ctx: cronlab.Context, customer: int) -> None: ...

    for key in ("", "k" * 501, "bill\x009"):  # PostgreSQL's text holds no NUL
        with pytest.raises(ConfigError, match="idempotency key"):
            bill.defer(customer=1, key=key)
        with pytest.raises(ConfigError, match="idempotency key"):
            bill.defer_many([({"customer": 1}, key)])
    assert app.store().counts()["PENDING"] == 0


def test_a_parameter_named_like_defers_own_keywords_is_refused_at_registration(
    app: cronlab.App,
) -> None:
    with pytest.raises(ConfigError, match="'key' is one of defer"):

        @app.task
        def bad(ctx: cronlab.Context, key: str) -> None: ...

    with pytest.raises(ConfigError, match="first parameter must be the Context"):
        app.task(name="no_ctx")(lambda: None)


def test_defer_many_streams_in_batches_and_counts_what_was_there(app: cronlab.App) -> None:
    @app.task
    def bill(ctx: cronlab.Context, customer: int) -> None: ...

    pulled: list[int] = []

    def items() -> Iterator[dict[str, int] | tuple[dict[str, int], str]]:
        for c in range(25_000):
            pulled.append(c)
            yield ({"customer": c}, f"bill:{c}") if c < 10 else {"customer": c}

    written: list[tuple[int, int]] = []
    result = bill.defer_many(items(), progress=lambda n: written.append((n, len(pulled))))
    assert result == cronlab.DeferResult(added=25_000, existing=0)
    # one batch at a time: the first went in before the generator got past it
    assert written == [(10_000, 10_000), (10_000, 20_000), (5_000, 25_000)]
    again = bill.defer_many([({"customer": c}, f"bill:{c}") for c in range(20)])
    assert again == cronlab.DeferResult(added=10, existing=10)


def test_defer_many_stops_at_a_bad_item_before_its_batch_is_written(app: cronlab.App) -> None:
    @app.task
    def bill(ctx: cronlab.Context, customer: int) -> None: ...

    items = [{"customer": c} for c in range(15_000)] + [{"customer": 1, "x": 2}]
    with pytest.raises(cronlab.TaskArgumentError, match="unexpected argument 'x'"):
        bill.defer_many(items)
    assert app.store().counts()["PENDING"] == 10_000  # the first whole batch, not the second


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"user": float("nan")}, "must be JSON"),
        ({"user": {1, 2}}, "must be JSON"),
        ({"user": "x" * 70_000}, "at most 65,536"),
        (["user", "ada"], "must be a mapping"),
    ],
)
def test_a_follow_up_deferred_by_name_is_checked_as_task_defer_checks_it(
    app: cronlab.App, arguments: Any, words: str
) -> None:
    @app.task(name="notify")
    def notify(ctx: cronlab.Context, **kw: Any) -> None: ...

    raised: list[BaseException] = []

    @app.task(retries=0)
    def welcome(ctx: cronlab.Context) -> None:
        try:
            ctx.defer("notify", arguments)
        except Exception as exc:
            raised.append(exc)
            raise

    ref = welcome.defer()
    assert app.run_until_idle()["failed"] == 1
    (exc,) = raised
    assert isinstance(exc, cronlab.TaskArgumentError), repr(exc)
    assert words in str(exc) and "\n" not in str(exc)
    assert app.store().counts()["PENDING"] == 0  # no follow-up stored
    assert "TaskArgumentError" in (app.store().last_error(ref.id) or "")
    if isinstance(arguments, dict):  # the same error as deferring it from code
        with pytest.raises(cronlab.TaskArgumentError, match=words):
            notify.defer(**arguments)


def test_a_follow_up_of_a_long_key_has_a_key_of_at_most_500_characters(app: cronlab.App) -> None:
    """Issue 28, one rule for keys everywhere: a follow-up's key derives from its parent's, so
    a chain of them (or a parent of 500 characters) grew past 500; it stays the same key for
    a duplicate execution (added once)."""

    @app.task(name="step")
    def step(ctx: cronlab.Context, n: int) -> None:
        if n < 3:
            ctx.defer(step, {"n": n + 1})
            ctx.defer(step, {"n": n + 1})  # a second follow-up: another key

    step.defer(n=0, key="k" * 500)
    app.run_until_idle()
    keys = [k for (k,) in app.store().query(app.store().own("SELECT idempotency_key FROM tasks"))]
    assert len(keys) == 1 + 2 + 4 + 8 and len(set(keys)) == len(keys)
    assert max(map(len, keys)) == 500, sorted(map(len, keys))


def test_run_until_idle_returns_typed_counts_that_read_as_a_dict(app: cronlab.App) -> None:
    @app.task
    def ping(ctx: cronlab.Context) -> None: ...

    ping.defer()
    counts: cronlab.RunCounts = app.run_until_idle()
    assert "RunCounts" in cronlab.__all__ and counts["ok"] == 1
    assert counts == {"ok": 1, "noop": 0, "error": 0, "failed": 0, "stale": 0}
    hints = typing.get_type_hints(cronlab.App.run_until_idle)
    assert hints["return"] is cronlab.RunCounts


def test_run_until_idle_runs_what_is_due_and_what_it_defers(table: cronlab.App) -> None:
    app = table

    @app.task
    def welcome(ctx: cronlab.Context, user: str) -> None:
        ctx.tx.execute("INSERT INTO effects VALUES (?, 1)", (user,))
        ctx.defer(nudge, {"user": user})  # due now too: it runs in the same call

    @app.task
    def nudge(ctx: cronlab.Context, user: str) -> None:
        ctx.tx.execute("INSERT INTO effects VALUES (?, 2)", (user,))

    welcome.defer(user="ada")
    welcome.defer(user="bob", delay=timedelta(days=1))  # not due: it waits
    assert app.run_until_idle() == {"ok": 2, "noop": 0, "error": 0, "failed": 0, "stale": 0}
    assert effects(app) == [("ada", 1), ("ada", 2)]
    assert app.store().counts()["PENDING"] == 1


def test_a_task_is_retried_as_often_as_it_says_then_fails(app: cronlab.App) -> None:
    attempts: list[int] = []

    @app.task(retries=2)
    def flaky(ctx: cronlab.Context) -> None:
        attempts.append(ctx.attempt)
        raise RuntimeError("down")

    ref = flaky.defer()
    counts = app.run_until_idle()
    assert attempts == [1, 2, 3] and counts["error"] == 2 and counts["failed"] == 1
    assert app.store().task(ref.id).status == "FAILED"
    assert "RuntimeError: down" in (app.store().last_error(ref.id) or "")


def test_a_sync_task_past_its_timeout_fails_with_its_effect_undone(table: cronlab.App) -> None:
    app = table

    @app.task(retries=0, timeout=timedelta(milliseconds=200))
    def slow(ctx: cronlab.Context) -> None:
        ctx.tx.execute("INSERT INTO effects VALUES ('slow', 1)")
        time.sleep(30)  # interrupted at 0.2 s (this test runs in the main thread)

    ref = slow.defer()
    started = time.monotonic()
    assert app.run_until_idle()["failed"] == 1
    assert time.monotonic() - started < 15
    assert effects(app) == [] and "TaskTimeout" in (app.store().last_error(ref.id) or "")


def test_a_sync_task_timeout_off_the_main_thread_is_judged_when_it_returns(
    table: cronlab.App,
) -> None:
    app = table
    clock = app.clock
    assert isinstance(clock, FakeClock)

    @app.task(retries=0, timeout=timedelta(seconds=1))
    def slow(ctx: cronlab.Context) -> None:
        ctx.tx.execute("INSERT INTO effects VALUES ('slow', 1)")
        clock.advance(2_000)

    ref = slow.defer()
    out: list[cronlab.RunCounts] = []
    worker = threading.Thread(target=lambda: out.append(app.run_until_idle()))
    worker.start()
    worker.join(30)
    assert out and out[0]["failed"] == 1 and effects(app) == []
    assert "past its timeout of 1 s" in (app.store().last_error(ref.id) or "")


def test_async_tasks_overlap_their_waits_and_their_writes_commit_with_their_acks(
    table: cronlab.App,
) -> None:
    app = cronlab.App(store=table.store())  # the real clock: asyncio sleeps in real time
    calls: list[int] = []
    flight = {"now": 0, "most": 0}

    @app.task(retries=0)
    async def notify(ctx: cronlab.Context, user_id: int) -> None:
        calls.append(user_id)
        flight["now"] += 1
        flight["most"] = max(flight["most"], flight["now"])
        await asyncio.sleep(0.05)
        flight["now"] -= 1
        ctx.tx.execute("INSERT INTO effects VALUES ('notify', ?)", (user_id,))
        if user_id == 7:
            raise RuntimeError("bounced")  # its write is undone; the others stand

    notify.defer_many({"user_id": i} for i in range(200))
    counts = app.run_until_idle(concurrency=50)
    assert counts["ok"] == 199 and counts["failed"] == 1
    assert 1 < flight["most"] <= 50  # they overlap their waits, at most `concurrency` at once
    rows = effects(app)
    assert len(rows) == 199 and ("notify", 7) not in rows
    assert sorted(calls) == list(range(200))  # one failing run re-runs no other


def test_an_async_task_past_its_timeout_fails_and_its_reads_are_refused(
    table: cronlab.App,
) -> None:
    app = cronlab.App(store=table.store())

    @app.task(retries=0, timeout=timedelta(milliseconds=100))
    async def slow(ctx: cronlab.Context) -> None:
        ctx.tx.execute("INSERT INTO effects VALUES ('slow', 1)")
        await asyncio.sleep(5)

    @app.task(retries=0)
    async def reads(ctx: cronlab.Context) -> None:
        ctx.tx.rows("SELECT 1")

    a, b = slow.defer(), reads.defer()
    assert app.run_until_idle()["failed"] == 2
    assert effects(app) == []
    assert "TaskTimeout" in (app.store().last_error(a.id) or "")
    assert "not available to an async task" in (app.store().last_error(b.id) or "")


def test_defer_from_several_threads_on_a_sqlite_file(tmp_path: Path) -> None:
    app = cronlab.App(f"sqlite:///{tmp_path / 'cron.db'}")

    @app.task
    def bill(ctx: cronlab.Context, customer: int) -> None: ...

    errors: list[BaseException] = []

    def defer_some(start: int) -> None:
        try:
            for c in range(start, start + 50):
                bill.defer(customer=c)
        except BaseException as exc:  # pragma: no cover - the failure this test looks for
            errors.append(exc)

    threads = [threading.Thread(target=defer_some, args=(i * 50,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and app.store().counts()["PENDING"] == 200
    assert app.run_until_idle()["ok"] == 200


def test_defer_async_from_async_code(app: cronlab.App) -> None:
    @app.task
    def bill(ctx: cronlab.Context, customer: int) -> None: ...

    # In a thread of its own: a browser test's Playwright may have left this one's loop set.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        ref = pool.submit(asyncio.run, bill.defer_async(customer=1, key="k")).result()
    assert ref.added and app.store().task_by_key("k").id == ref.id


def test_a_task_called_directly_runs_here(app: cronlab.App) -> None:
    @app.task
    def add(ctx: cronlab.Context, a: int, b: int) -> int:
        return a + b

    assert add(None, a=2, b=3) == 5  # type: ignore[arg-type]
    assert add.name.endswith("runs_here.add") and "<cronlab task" in repr(add)


@pytest.mark.parametrize("key", ["schedule:bill:1796443920000", "backfill:bill:1", "trigger:x:1"])
def test_a_key_in_the_engines_own_namespaces_is_refused(app: cronlab.App, key: str) -> None:
    """Failed first: ``defer(key="schedule:bill:…")`` posed as the schedule's occurrence (the
    dispatch planned it, and its real occurrence under that key was a no-op)."""

    @app.task(name="posing")
    def posing(ctx: cronlab.Context) -> None:
        """A user's task."""

    with pytest.raises(ConfigError, match="engine's own"):
        posing.defer(key=key)
    assert app.store().query(app.store().own("SELECT count(*) FROM tasks")) == [(0,)]
