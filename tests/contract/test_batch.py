"""Batch handlers on every store: the lab's ``invoice`` batch form (one INSERT … RETURNING for a
whole worker batch) has exactly the single form's semantics — one applied run per
(customer, period), the rest no-op duplicates — and a failing run still falls back per message."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cronlab import execution
from cronlab.handlers import Context, Registry
from cronlab.lab import invoices as lab
from cronlab.ports import Batch, NewTask, Retry
from cronlab.queues.store import StoreQueue

from .conftest import Backend
from .test_store import lead


@pytest.fixture
def sql(backend: Backend) -> Backend:
    lab.app.start(backend.store)  # the invoices table, as an engine process creates it
    return backend


def single_form() -> Registry:
    """The same handlers without batch forms: the reference the batch form must match."""
    r = Registry()
    r.handler("invoice")(lambda ctx, payload: lab.invoice(ctx, **payload))
    r.handler("fail")(lambda ctx, payload: lab.fail(ctx, **payload))
    return r


def seed(b: Backend, customers: list[str], handler: str = "invoice") -> None:
    now = b.clock.now_ms()
    b.store.add_tasks(
        NewTask(
            idempotency_key=f"{handler}/{i}/{c}",
            task=handler,
            trigger_ms=now,
            payload=json.dumps({"customer": c, "period": "2026-11"}),
        )
        for i, c in enumerate(customers)
    )
    b.store.dispatch_due(now, 1_000, lead(b))


def run(b: Backend, registry: Registry = lab.app.registry) -> dict[str, int]:
    messages = StoreQueue(b.store, b.clock).claim("w", 1_000, 30_000)
    return execution.execute(
        Batch(
            worker="w",
            messages=messages,
            run=registry.runner(b.clock.now_ms),
            retry=Retry(),
            now=b.clock.now_ms,
        ),
        b.store,
    )


def invoices(b: Backend) -> list[Any]:
    return sorted(r[0] for r in b.store.query("SELECT customer FROM invoices"))


def noop_tasks(b: Backend) -> list[Any]:
    sql = b.store.own("SELECT count(*) FROM executions WHERE outcome = 'noop'")
    return [b.store.query(sql)[0][0]]


# c0 twice in the same batch; c4 already invoiced by an earlier batch.
EARLIER, BATCH = ["c4"], ["c0", "c1", "c0", "c2", "c3", "c4"]


@pytest.mark.parametrize("form", ["batch", "single"])
def test_each_invoice_key_applied_once_the_rest_noop(sql: Backend, form: str) -> None:
    registry = lab.app.registry if form == "batch" else single_form()
    seed(sql, EARLIER, "invoice")
    assert run(sql, registry)["ok"] == 1
    seed(sql, BATCH)
    assert run(sql, registry) == {"ok": 4, "noop": 2, "error": 0, "failed": 0, "stale": 0}
    assert invoices(sql) == ["c0", "c1", "c2", "c3", "c4"]
    assert noop_tasks(sql) == [2] and sql.store.counts()["DONE"] == 7
    assert sql.store.queue_depth() == 0


def test_without_idempotency_every_run_writes_a_row(sql: Backend) -> None:
    lab.set_idempotency(sql.store, False)
    seed(sql, EARLIER)
    run(sql)
    seed(sql, BATCH)
    assert run(sql) == {"ok": 6, "noop": 0, "error": 0, "failed": 0, "stale": 0}
    assert invoices(sql) == ["c0", "c0", "c1", "c2", "c3", "c4", "c4"]


def test_a_failing_run_in_a_batch_falls_back_per_message(sql: Backend) -> None:
    seed(sql, ["c0", "c1"])
    seed(sql, ["x"], "fail")
    assert run(sql) == {"ok": 2, "noop": 0, "error": 1, "failed": 0, "stale": 0}
    assert invoices(sql) == ["c0", "c1"] and sql.store.queue_depth() == 1


def test_a_bad_payload_fails_only_its_own_message(sql: Backend) -> None:
    now = sql.clock.now_ms()
    bad = NewTask(idempotency_key="bad", task="invoice", trigger_ms=now, payload="{}")
    sql.store.add_tasks([bad])
    seed(sql, ["c0", "c1"])
    assert run(sql) == {"ok": 2, "noop": 0, "error": 1, "failed": 0, "stale": 0}
    assert invoices(sql) == ["c0", "c1"]


def test_a_batch_form_needs_its_single_form() -> None:
    r = Registry()
    with pytest.raises(Exception, match="no handler named 'x'"):
        r.batch_handler("x")(lab.invoice_batch)


def test_batch_contexts_carry_the_transaction(sql: Backend) -> None:
    r = Registry()
    seen: list[bool] = []

    @r.handler("one")
    def one(ctx: Context, payload: dict[str, Any]) -> None:
        raise AssertionError("the batch form runs instead")

    @r.batch_handler("one")
    def many(items: Any, tx: Any) -> list[bool]:
        seen.extend(ctx.tx is tx for ctx, _ in items)
        return [ctx.defer("follow") for ctx, _ in items]

    seed(sql, ["a", "b"], "one")
    assert run(sql, r)["ok"] == 2 and seen == [True, True]
    assert sql.store.counts()["PENDING"] == 2


def writes_then_booms(ctx: Context, payload: dict[str, Any]) -> None:
    """A handler that writes its invoice through ``ctx.tx``, then raises for "boom"."""
    row = (payload["customer"], payload["period"], ctx.task_id)
    ctx.tx.execute(lab.INSERT[ctx.tx.dialect], row)
    if payload["customer"] == "boom":
        raise RuntimeError("after its write")


def test_a_run_takes_its_savepoint_only_when_its_handler_writes(sql: Backend) -> None:
    """A handler that writes nothing through ``ctx.tx`` costs no SAVEPOINT (on PostgreSQL two
    round trips a run); one that writes gets its savepoint at its first statement, so a
    failing run still undoes its own writes alone (counted on SQLite's statement trace)."""
    r = Registry()

    @r.handler("quiet")
    def quiet(ctx: Context, payload: dict[str, Any]) -> None:
        return None

    r.handler("writes")(writes_then_booms)

    seed(sql, ["q1", "q2", "q3"], "quiet")
    seed(sql, ["w1", "boom", "w2"], "writes")
    seen: list[str] = []
    traced = sql.name != "postgres"
    if traced:
        sql.store.db.conn.set_trace_callback(seen.append)
    counts = run(sql, r)
    if traced:
        sql.store.db.conn.set_trace_callback(None)
    assert (counts["ok"], counts["error"]) == (5, 1)
    rows = sorted(c for (c,) in sql.store.query("SELECT customer FROM invoices"))
    assert rows == ["w1", "w2"]  # the failing run's write undone alone
    if traced:
        assert sum(s.startswith("SAVEPOINT") for s in seen) == 3  # the runs that wrote


def test_a_batch_of_one_run_takes_no_savepoint_and_still_undoes_a_failing_write(
    sql: Backend,
) -> None:
    """A batch of one message runs its handler with no savepoint (on PostgreSQL two round
    trips a run): one that writes and then raises is undone by the whole transaction's
    rollback, and a second transaction records its failure — the attempt counted, the error
    kept, the task back to be retried — as the savepoint's rollback left it. One that succeeds
    commits its write with its ack (SQLite's statement trace: no SAVEPOINT either time)."""
    r = Registry()

    r.handler("writes")(writes_then_booms)

    seen: list[str] = []
    traced = sql.name != "postgres"
    if traced:
        sql.store.db.conn.set_trace_callback(seen.append)
    seed(sql, ["boom"], "writes")
    failed = run(sql, r)
    seed(sql, ["fine"], "writes")
    ok = run(sql, r)
    if traced:
        sql.store.db.conn.set_trace_callback(None)
        assert not any(s.startswith("SAVEPOINT") for s in seen), seen
    assert (failed["error"], failed["ok"], ok["ok"]) == (1, 0, 1)
    assert invoices(sql) == ["fine"]  # the failing run's write undone, the other committed
    boom = sql.store.task_by_key("writes/0/boom")
    assert (boom.status, boom.attempts) == ("DISPATCHED", 1)  # to be retried, once counted
    assert sql.store.last_error(boom.id) == "RuntimeError: after its write"
    runs = sql.store.own("SELECT outcome, error FROM executions WHERE task_id = ?")
    if sql.name == "postgres":
        runs = runs.replace("?", "%s")
    assert sql.store.query(runs, (boom.id,)) == [("error", "RuntimeError: after its write")]
