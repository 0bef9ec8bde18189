"""Exactly-once of a handler's ``ctx.tx`` effect under the deliveries real queues make, on every
backend — each test failed before the fix it names (issue 12)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from cronlab import execution
from cronlab.handlers import Context, Registry
from cronlab.ports import Batch, NewTask, Retry, Run
from cronlab.queues.store import StoreQueue

from .conftest import Backend
from .test_store import lead

VISIBILITY = 1_000
DEFAULT_RETRY = Retry()


def effects_table(b: Backend) -> None:
    b.store.write(lambda tx: tx.execute("CREATE TABLE effects (task_id BIGINT NOT NULL)"))


def effects(b: Backend) -> int:
    return int(b.store.query("SELECT count(*) FROM effects")[0][0])


def app(calls: list[str]) -> Registry:
    """``write``: one row through ctx.tx, no unique key; ``boom`` raises. Each call noted.
    ``awrite`` and ``aboom``: the same as async handlers, whose writes are queued."""
    r = Registry()

    @r.handler("awrite")
    async def awrite(ctx: Context, payload: dict[str, Any]) -> None:
        calls.append(ctx.idempotency_key)
        await asyncio.sleep(0)
        sql = "INSERT INTO effects VALUES (?)" if ctx.tx.dialect == "sqlite" else None
        ctx.tx.execute(sql or "INSERT INTO effects VALUES (%s)", (ctx.task_id,))

    @r.handler("aboom")
    async def aboom(ctx: Context, payload: dict[str, Any]) -> None:
        calls.append(ctx.idempotency_key)
        sql = "INSERT INTO effects VALUES (?)" if ctx.tx.dialect == "sqlite" else None
        ctx.tx.execute(sql or "INSERT INTO effects VALUES (%s)", (ctx.task_id,))
        await asyncio.sleep(0)
        raise RuntimeError("boom")

    @r.handler("write")
    def write(ctx: Context, payload: dict[str, Any]) -> None:
        calls.append(ctx.idempotency_key)
        sql = (
            "INSERT INTO effects VALUES (?)"
            if ctx.tx.dialect == "sqlite"
            else ("INSERT INTO effects VALUES (%s)")
        )
        ctx.tx.execute(sql, (ctx.task_id,))

    @r.handler("boom")
    def boom(ctx: Context, payload: dict[str, Any]) -> None:
        calls.append(ctx.idempotency_key)
        raise RuntimeError("boom")

    return r


def due(b: Backend, *handlers: str) -> None:
    now = b.clock.now_ms()
    b.store.add_tasks(
        NewTask(idempotency_key=f"t{i}", task=h, trigger_ms=now, payload=json.dumps({}))
        for i, h in enumerate(handlers)
    )
    b.store.dispatch_due(now, 100, lead(b))


def batch(b: Backend, messages: Any, run: Run, retry: Retry = DEFAULT_RETRY) -> Batch:
    return Batch(worker="w", messages=messages, run=run, retry=retry, now=b.clock.now_ms)


def execute(b: Backend, r: Registry, messages: Any) -> dict[str, int]:
    return execution.execute(batch(b, messages, r.runner(b.clock.now_ms)), b.store)


def test_a_stale_delivery_commits_no_effect(backend: Backend) -> None:
    """Bug 1: A claims, outlives its visibility; B claims and runs; A's run must not commit."""
    effects_table(backend)
    calls: list[str] = []
    due(backend, "write")
    queue = StoreQueue(backend.store, backend.clock)
    a = queue.claim("a", 10, VISIBILITY)
    backend.clock.advance(VISIBILITY + 1)
    b = queue.claim("b", 10, VISIBILITY)
    assert [m.receives for m in a + b] == [1, 2]
    by_b, by_a = execute(backend, app(calls), b), execute(backend, app(calls), a)
    # B's delivery came back: A's run never committed, so it counts as A's failed attempt
    # (LostRun, issue 27) and is retried; A's own delivery is stale and runs nothing.
    assert effects(backend) == 0 and calls == []
    assert (by_b["error"], by_a.get("stale")) == (1, 1)
    backend.clock.advance(DEFAULT_RETRY.delay_ms(1))
    retried = queue.claim("c", 10, VISIBILITY)
    assert [(m.attempt, m.receives) for m in retried] == [(2, 1)]
    assert execute(backend, app(calls), retried)["ok"] == 1
    assert effects(backend) == 1 and calls == ["t0"]
    assert backend.store.queue_depth() == 0


def test_a_message_delivered_twice_runs_once(backend: Backend) -> None:
    """A relay that published an envelope twice: both deliveries are current; one runs."""
    effects_table(backend)
    calls: list[str] = []
    due(backend, "write")
    message = StoreQueue(backend.store, backend.clock).claim("a", 10, VISIBILITY)
    assert execute(backend, app(calls), message + message) == {
        "ok": 1,
        "noop": 0,
        "error": 0,
        "failed": 0,
        "stale": 1,
    }
    again = execute(backend, app(calls), message)
    assert effects(backend) == 1 and calls == ["t0"]
    assert again.get("stale") == 1


def test_one_failing_message_runs_no_other_twice(backend: Backend) -> None:
    """Bug 2: four messages, one raises: four handler calls, three effects (was eight calls)."""
    effects_table(backend)
    calls: list[str] = []
    due(backend, "write", "write", "boom", "write")
    messages = StoreQueue(backend.store, backend.clock).claim("w", 10, VISIBILITY)
    counts = execute(backend, app(calls), messages)
    assert (counts["ok"], counts["error"]) == (3, 1)
    assert sorted(calls) == ["t0", "t1", "t2", "t3"]
    assert effects(backend) == 3


def test_async_handlers_each_run_once_and_commit_their_writes_with_their_acks(
    backend: Backend,
) -> None:
    """Async runs of a batch overlap on the worker's loop; each one's queued writes commit in a
    savepoint of its own: a failing one is undone alone and no run is repeated, and a stale or
    doubled delivery runs nothing."""
    effects_table(backend)
    calls: list[str] = []
    due(backend, "awrite", "write", "aboom", "awrite")
    queue = StoreQueue(backend.store, backend.clock)
    messages = queue.claim("w", 10, VISIBILITY)
    counts = execute(backend, app(calls), messages + messages[:1])
    assert (counts["ok"], counts["error"], counts["stale"]) == (3, 1, 1)
    assert sorted(calls) == ["t0", "t1", "t2", "t3"]
    assert effects(backend) == 3  # t2's write went with its failure
    backend.clock.advance(VISIBILITY + 1)
    (retry,) = queue.claim("w2", 10, VISIBILITY)  # only the failed one comes back, once
    assert (retry.idempotency_key, retry.attempt) == ("t2", 2)
    assert execute(backend, app(calls), messages)["stale"] == 4 and effects(backend) == 3


def test_a_retried_message_runs_again_and_its_stale_first_delivery_does_not(
    backend: Backend,
) -> None:
    effects_table(backend)
    calls: list[str] = []
    r = Registry()
    fails = iter([True, False])

    @r.handler("flaky")
    def flaky(ctx: Context, payload: dict[str, Any]) -> None:
        calls.append(f"attempt {ctx.attempt}")
        if next(fails):
            raise RuntimeError("once")

    due(backend, "flaky")
    queue = StoreQueue(backend.store, backend.clock)
    first = queue.claim("w", 10, VISIBILITY)
    retry = Retry(base_ms=10)
    assert (
        execution.execute(
            batch(backend, first, r.runner(backend.clock.now_ms), retry), backend.store
        )["error"]
        == 1
    )
    backend.clock.advance(10)
    second = queue.claim("w", 10, VISIBILITY)
    assert [m.attempt for m in second] == [2]
    run = r.runner(backend.clock.now_ms)
    assert execution.execute(batch(backend, first, run, retry), backend.store)["stale"] == 1
    assert execution.execute(batch(backend, second, run, retry), backend.store)["ok"] == 1
    assert calls == ["attempt 1", "attempt 2"] and backend.status(1) == "DONE"


@pytest.mark.parametrize("inside_a_loop", [False, True], ids=["plain", "inside-a-loop"])
def test_an_async_handler_runs_to_its_end(backend: Backend, inside_a_loop: bool) -> None:
    """Bug 7: an ``async def`` handler was recorded ok without running; then, called where an
    event loop already ran (after the browser tests), it failed with "another loop is
    running"."""
    effects_table(backend)
    r = Registry()

    @r.handler("write")
    async def write(ctx: Context, payload: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        sql = (
            "INSERT INTO effects VALUES (?)"
            if ctx.tx.dialect == "sqlite"
            else ("INSERT INTO effects VALUES (%s)")
        )
        ctx.tx.execute(sql, (ctx.task_id,))

    due(backend, "write")
    messages = StoreQueue(backend.store, backend.clock).claim("w", 10, VISIBILITY)
    if inside_a_loop and not _a_loop_runs():  # the worker called from async code

        async def from_async_code() -> dict[str, int]:
            assert _a_loop_runs()
            return execute(backend, r, messages)

        counts = asyncio.run(from_async_code())
    else:  # (after the browser tests, Playwright's loop already runs in this thread)
        counts = execute(backend, r, messages)
    assert counts["ok"] == 1
    assert effects(backend) == 1


def _a_loop_runs() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_a_step_run_twice_defers_the_same_follow_up_keys(backend: Backend) -> None:
    """Bug 9: a transaction retried (a lost connection) numbered its follow-ups on from the
    first try, so a later duplicate added a second follow-up."""
    r = Registry()

    @r.handler("chain")
    def chain(ctx: Context, payload: dict[str, Any]) -> None:
        ctx.defer("next", {})

    keys: list[str] = []

    class Tx:
        dialect = "sqlite"

        def add_task(self, task: NewTask) -> int:
            keys.append(task.idempotency_key)
            return 1

    due(backend, "chain")
    (message,) = StoreQueue(backend.store, backend.clock).claim("w", 10, VISIBILITY)
    step = r.runner(backend.clock.now_ms).prepare(message)
    step(Tx())  # type: ignore[arg-type]
    step(Tx())  # type: ignore[arg-type]
    assert keys == ["t0/then/next/1", "t0/then/next/1"]


def poison(kind: str) -> Registry:
    """``write`` as in ``app``; ``poison`` writes, then raises ``kind`` (a BaseException)."""
    r, raised = (
        app([]),
        {
            "CancelledError": asyncio.CancelledError,
            "SystemExit": SystemExit,
            "KeyboardInterrupt": KeyboardInterrupt,
        }[kind],
    )

    def write(ctx: Context) -> None:
        mark = "?" if ctx.tx.dialect == "sqlite" else "%s"
        ctx.tx.execute(f"INSERT INTO effects VALUES ({mark})", (ctx.task_id,))

    if kind == "CancelledError":

        @r.handler("poison")
        async def apoison(ctx: Context, payload: dict[str, Any]) -> None:
            write(ctx)
            await asyncio.sleep(0)
            raise raised()
    else:

        @r.handler("poison")
        def spoison(ctx: Context, payload: dict[str, Any]) -> None:
            write(ctx)
            raise raised()

    return r


@pytest.mark.parametrize("kind", ["CancelledError", "SystemExit", "KeyboardInterrupt"])
def test_a_handler_raising_a_base_exception_fails_its_own_run_alone(
    backend: Backend, kind: str
) -> None:
    """Failed first (issue 27, bug 2): only ``Exception`` was caught, so the BaseException went
    through the batch: nothing committed, the worker died, and every restart died the same way
    while the batch's ordinary tasks never finished. Now the run fails (its write undone, its
    attempt counted, retried), the others commit, and a request to stop (SystemExit,
    KeyboardInterrupt) is honoured once the batch has committed."""
    effects_table(backend)
    due(backend, "write", "poison", "write")
    messages = StoreQueue(backend.store, backend.clock).claim("w", 10, VISIBILITY)
    run = poison(kind).runner(backend.clock.now_ms)
    if kind == "CancelledError":
        counts = execution.execute(batch(backend, messages, run), backend.store)
    else:
        with pytest.raises((SystemExit, KeyboardInterrupt)):
            execution.execute(batch(backend, messages, run), backend.store)
        counts = {"ok": 2, "error": 1}
    assert (counts["ok"], counts["error"]) == (2, 1)
    assert effects(backend) == 2  # the poison's own write went with its failure
    assert [backend.status(i) for i in (1, 2, 3)] == ["DONE", "DISPATCHED", "DONE"]
    assert (backend.last_error(2) or "").startswith(kind)
    backend.clock.advance(VISIBILITY + 1)
    (retry,) = StoreQueue(backend.store, backend.clock).claim("w", 10, VISIBILITY)
    assert (retry.idempotency_key, retry.attempt) == ("t1", 2)


def test_a_stale_delivery_never_runs_the_task_that_took_its_id(backend: Backend) -> None:
    """Found by ``cronlab verify --seed 22794`` (the search at 7cd0f4b): a worker paused
    holding a delivery; another delivery ran the task, the retention deleted it, and SQLite
    gave its id to the next task added. The paused worker's message (that id, attempt 1) then
    matched the new task, DISPATCHED at attempt 0, and ran the old task's handler and payload
    as it, marking it DONE: one task run twice, the other never. A task's id is never given
    to another task (SQLite: AUTOINCREMENT, migration 016), so the stale message runs
    nothing."""
    effects_table(backend)
    calls: list[str] = []
    due(backend, "write")
    queue = StoreQueue(backend.store, backend.clock)
    paused = queue.claim("a", 10, VISIBILITY)
    backend.clock.advance(VISIBILITY + 1)
    execute(backend, app(calls), queue.claim("b", 10, VISIBILITY))  # LostRun: attempt 1
    backend.clock.advance(DEFAULT_RETRY.delay_ms(1))
    assert execute(backend, app(calls), queue.claim("c", 10, VISIBILITY))["ok"] == 1
    assert backend.store.prune_history(1, backend.clock.now_ms() + 10, 100, lead(backend)) > 0
    now = backend.clock.now_ms()
    backend.store.add_tasks([NewTask(idempotency_key="new", task="write", trigger_ms=now)])
    backend.store.dispatch_due(now, 100, lead(backend))
    (new_id,) = [int(r[0]) for r in backend.store.query(backend.store.own("SELECT id FROM tasks"))]
    assert new_id != paused[0].task_id
    (fresh,) = queue.claim("d", 10, VISIBILITY)  # then its worker dies
    assert fresh.id != paused[0].id  # nor an envelope's (the stale ack would delete it)
    assert execute(backend, app(calls), paused).get("stale") == 1
    assert calls == ["t0"] and effects(backend) == 1
    assert backend.status(new_id) == "DISPATCHED"
    backend.clock.advance(VISIBILITY + 1)
    (back,) = queue.claim("e", 10, VISIBILITY)
    assert (back.task_id, back.receives) == (new_id, 2)
