"""A worker batch in ONE transaction: the handlers' effects, the execution records, the task
updates and the acks (``SqlStore.execute``).

Fast path: every run in one transaction. If a run raises, that transaction is rolled back and
the batch runs again with a savepoint per message, so one failing handler does not undo the
others' effects. A worker killed mid-batch commits nothing; its deliveries come back after the
visibility timeout with ``receives`` one higher, which is how ``report`` counts abandoned runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from cronlab.ports import Message, NewTask, Retry, Run, Tx
from cronlab.stores.sql.dialect import Conn, fetch, task_args

if TYPE_CHECKING:
    from cronlab.stores.sql.store import SqlStore

T = TypeVar("T")
Step = Callable[[Tx], bool]
BatchStep = Callable[[Tx], list[bool]]


class SqlTx:
    """The open transaction a handler writes through (``ports.Tx``), committed with its ack.

    ``execute`` takes the dialect's own placeholders (SQLite ``?``/``:name``, PostgreSQL
    ``%s``/``%(name)s``); ``dialect`` says which.
    """

    def __init__(self, c: Conn, store: SqlStore) -> None:
        self._c, self._q = c, store.q
        self.dialect = store.d.name

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
        return int(self._c.execute(sql, params).rowcount)

    def rows(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        return fetch(self._c.execute(sql, params))

    def add_task(self, task: NewTask) -> int:
        return int(self._c.execute(self._q["add_task"], task_args(task)).rowcount)


def execute(
    store: SqlStore,
    worker: str,
    messages: Sequence[Message],
    run: Run,
    retry: Retry,
    now: Callable[[], int],
    relayed: bool,
) -> dict[str, int]:
    """``Store.execute``; ``relayed``: see ``redis.OutboxStore``."""
    start = now()
    batched = _prepare_batch(run, messages, store.d.name)
    steps = [] if batched else _prepare(run, messages)

    def fast(c: Conn) -> dict[str, int]:
        b = _Batch(store, c, worker, start, retry, now, relayed)
        return b.run_batch(messages, batched) if batched else b.run_all(steps, isolate=False)

    def isolated(c: Conn) -> dict[str, int]:
        b = _Batch(store, c, worker, start, retry, now, relayed)
        return b.run_all(steps or _prepare(run, messages), isolate=True)

    try:
        return store.d.transaction(fast)
    except _HandlerFailed:
        return store.d.transaction(isolated)


def _prepare(run: Run, messages: Sequence[Message]) -> list[tuple[Message, Step]]:
    """Work a run can do before the write transaction (``handlers.Runner.prepare``)."""
    prepare: Callable[[Message], Step] | None = getattr(run, "prepare", None)
    if prepare is not None:
        return [(m, prepare(m)) for m in messages]
    return [(m, partial(run, m)) for m in messages]


def _prepare_batch(run: Run, messages: Sequence[Message], dialect: str) -> BatchStep | None:
    """The whole batch as one step (``handlers.Runner.prepare_batch``), if the run offers it:
    handlers with a batch form then write every message's effect in one statement."""
    prepare: Callable[[Sequence[Message], str], BatchStep] | None = getattr(
        run, "prepare_batch", None
    )
    return prepare(messages, dialect) if prepare is not None else None


class _HandlerFailed(Exception):
    """A run raised on the fast path: redo the batch with a savepoint per message."""


class _Batch:
    """One batch inside an open transaction: runs, execution ends, task updates, acks."""

    def __init__(
        self,
        store: SqlStore,
        c: Conn,
        worker: str,
        start_ms: int,
        retry: Retry,
        now: Callable[[], int],
        relayed: bool,
    ) -> None:
        self.store, self.c, self.q, self.d = store, c, store.q, store.d
        self.worker, self.start_ms, self.retry, self.now = worker, start_ms, retry, now
        self.relayed = relayed
        self.ends: list[list[Any]] = []  # [task, message, receive, attempt, end, outcome, error]
        self.done: list[int] = []
        self.acks: list[Message] = []
        self.retries: list[tuple[Message, int]] = []
        self.counts = {"ok": 0, "noop": 0, "error": 0, "failed": 0}

    def run_all(self, steps: Sequence[tuple[Message, Step]], *, isolate: bool) -> dict[str, int]:
        tx = SqlTx(self.c, self.store)
        for m, step in steps:
            if not isolate:
                self._succeeded(m, self._guard(step, tx))
            elif (error := self._run_isolated(m, step, tx)) is not None:
                self._failed(m, error)
        self._flush()
        return self.counts

    def run_batch(self, messages: Sequence[Message], batched: BatchStep) -> dict[str, int]:
        """Fast path with one step for all messages; it raising means redo per message. The
        batch commits as one, so its runs share one end instant."""
        applied = self._guard(batched, SqlTx(self.c, self.store))
        end = self.now()
        outcomes = ["ok" if a else "noop" for a in applied]
        self.ends = [
            [m.task_id, m.id, m.receives, m.attempt, end, o, None]
            for m, o in zip(messages, outcomes, strict=True)
        ]
        self.done = [m.task_id for m in messages]
        self.acks = list(messages)
        self.counts["ok"] = outcomes.count("ok")
        self.counts["noop"] = len(outcomes) - self.counts["ok"]
        self._flush()
        return self.counts

    def _guard(self, step: Callable[[Tx], T], tx: SqlTx) -> T:
        try:
            return step(tx)
        except Exception as exc:
            if self.d.is_connection_error(exc):
                raise  # the connection, not the handler: the whole transaction is retried
            raise _HandlerFailed from exc

    def _run_isolated(self, m: Message, step: Step, tx: SqlTx) -> Exception | None:
        try:
            with self.d.savepoint(self.c):
                applied = step(tx)
        except Exception as exc:
            if self.d.is_connection_error(exc):
                raise
            return exc
        self._succeeded(m, applied)
        return None

    def _succeeded(self, m: Message, applied: bool) -> None:
        outcome = "ok" if applied else "noop"
        self.counts[outcome] += 1
        self.ends.append([m.task_id, m.id, m.receives, m.attempt, self.now(), outcome, None])
        self.done.append(m.task_id)
        self.acks.append(m)

    def _failed(self, m: Message, exc: BaseException) -> None:
        error, now = f"{type(exc).__name__}: {exc}", self.now()
        final = m.attempt >= self.retry.max_attempts
        outcome = "failed" if final else "error"
        self.counts[outcome] += 1
        self.ends.append([m.task_id, m.id, m.receives, m.attempt, now, outcome, error])
        self.c.execute(
            self.q["task_failed" if final else "task_error"], {"error": error, "id": m.task_id}
        )
        if final:
            self.acks.append(m)
        else:
            self.retries.append((m, now + self.retry.delay_ms(m.attempt)))

    def _flush(self) -> None:
        if not self.ends:
            return
        rows = {"rows": json.dumps(self.ends), "worker": self.worker, "start": self.start_ms}
        self.c.execute(self.q["execution_insert"], rows)
        self.c.execute(self.q["task_done"], {"ids": self.d.ints(self.done)})
        if self.relayed:  # settled on the stream; a retry waits in the outbox for the relay
            for m, at in self.retries:
                self.store.enqueue(self.c, [(m.task_id, m.attempt)], self.now(), at)
        else:
            self.store.settle(self.c, self.acks, self.retries, self.now())
