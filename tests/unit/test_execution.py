"""How a batch runs its handlers (``cronlab.execution``), on a recording ``BatchTx`` and no store.

The contract suite runs the same code through SQLite and PostgreSQL transactions
(``tests/contract/test_batch.py``, ``test_exactly_once.py``); here each rule of the worker's
side is checked on its own: which message runs, the batch form's fallback, the retry policy,
and what a lost connection does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest

from cronlab.execution import Plain, execute
from cronlab.ports import (
    Batch,
    BatchTransaction,
    BatchTx,
    Ended,
    Ending,
    Message,
    NewTask,
    Retry,
    Tx,
)

RETRY = Retry(max_attempts=3, base_ms=100)


class Effects:
    """A ``Tx`` whose writes land in a list; a savepoint's are dropped if it is undone."""

    dialect = "sqlite"

    def __init__(self) -> None:
        self.rows: list[str] = []

    def execute(self, sql: str, params: Any = ()) -> int:
        self.rows.append(sql)
        return 1

    def rows(self, sql: str, params: Any = ()) -> list[Any]:
        return []

    def add_task(self, task: NewTask) -> int:
        self.rows.append(task.idempotency_key)
        return 1


class OneTx:
    """A ``BatchStore`` whose batch transaction is the function given."""

    dialect = "sqlite"

    def __init__(self, transaction: BatchTransaction) -> None:
        self.transaction = transaction

    def batch_transaction(self, work: Batch, *, in_store: bool = True) -> BatchTransaction:
        return self.transaction


class Recording:
    """``BatchTx`` in memory: live deliveries given, every call recorded."""

    dialect = "sqlite"

    def __init__(self, live: Sequence[bool] | None = None, lost: type[Exception] | None = None):
        self.tx = Effects()
        self._live, self.lost = live, lost
        self.failures: list[tuple[int, str, bool]] = []
        self.finished: Ending | None = None

    def live(self, messages: Sequence[Message], checked: bool) -> tuple[list[bool], set[int]]:
        return list(self._live or [True] * len(messages)), set()

    def savepoint(self) -> AbstractContextManager[None]:
        @contextmanager
        def undo_on_error() -> Iterator[None]:
            mark = len(self.tx.rows)
            try:
                yield
            except BaseException:
                del self.tx.rows[mark:]
                raise

        return undo_on_error()

    def is_connection_error(self, exc: BaseException) -> bool:
        return self.lost is not None and isinstance(exc, self.lost)

    def failed(self, task_id: int, error: str, final: bool) -> None:
        self.failures.append((task_id, error, final))

    def finish(self, ending: Ending) -> None:
        self.finished = ending


def messages(n: int, attempt: int = 1) -> list[Message]:
    return [Message(1, i, f"k{i}", "h", "{}", 0, 1, attempt) for i in range(n)]


def run(
    batch: list[Message],
    step: Callable[[Message, Tx], bool],
    tx: Recording,
    retry: Retry = RETRY,
) -> tuple[dict[str, int], list[Ended]]:
    seen: list[Ended] = []
    work = Batch(
        worker="w",
        messages=batch,
        run=step if isinstance(step, Plain) else Plain(step),
        retry=retry,
        now=lambda: 1_000,
        observe=seen.extend,
    )
    counts = execute(work, OneTx(lambda attempt: attempt(tx)))
    return counts, seen


def writes(m: Message, tx: Tx) -> bool:
    tx.execute(f"effect {m.task_id}")
    return True


def test_every_live_message_runs_once_and_is_acked() -> None:
    tx = Recording()
    counts, seen = run(messages(3), writes, tx)
    assert tx.tx.rows == ["effect 0", "effect 1", "effect 2"]
    assert counts["ok"] == 3 and [e.outcome for e in seen] == ["ok"] * 3
    assert tx.finished is not None and len(tx.finished.acks) == 3


def test_a_stale_delivery_is_acked_without_running() -> None:
    tx = Recording(live=[True, False])
    counts, seen = run(messages(2), writes, tx)
    assert tx.tx.rows == ["effect 0"]
    assert counts["stale"] == 1 and counts["ok"] == 1
    assert tx.finished is not None and [m.task_id for m in tx.finished.acks] == [0, 1]
    assert [e.message.task_id for e in seen] == [0]  # a stale delivery is no run


def test_a_failing_run_is_undone_alone_then_retried_with_backoff() -> None:
    def second_fails(m: Message, tx: Tx) -> bool:
        tx.execute(f"effect {m.task_id}")
        if m.task_id == 1:
            raise ValueError("boom")
        return True

    tx = Recording()
    counts, _ = run(messages(3), second_fails, tx)
    assert tx.tx.rows == ["effect 0", "effect 2"]
    assert counts["error"] == 1 and tx.failures == [(1, "ValueError: boom", False)]
    assert tx.finished is not None
    ((retried, due),) = tx.finished.retries
    assert retried.task_id == 1 and due == 1_000 + 100


def test_the_last_attempt_fails_for_good_and_is_acked() -> None:
    def fails(m: Message, tx: Tx) -> bool:
        raise RuntimeError("no")

    tx = Recording()
    counts, seen = run(messages(1, attempt=3), fails, tx)
    assert counts["failed"] == 1 and tx.failures == [(0, "RuntimeError: no", True)]
    assert tx.finished is not None and len(tx.finished.acks) == 1 and not tx.finished.retries
    assert seen[0].outcome == "failed"


class Lost(Exception):
    """The connection went away (not the handler's failure)."""


def test_a_lost_connection_is_not_a_failed_run() -> None:
    def loses(m: Message, tx: Tx) -> bool:
        raise Lost

    tx = Recording(lost=Lost)
    with pytest.raises(Lost):
        run(messages(1), loses, tx)
    assert tx.failures == [] and tx.finished is None


@dataclass(frozen=True)
class Both(Plain):
    """A run with a batch form (as ``handlers.Runner`` has) that may raise."""

    batch_raises: bool = False
    single: list[int] = field(default_factory=list)

    def __call__(self, m: Message, tx: Tx) -> bool:
        self.single.append(m.task_id)
        return writes(m, tx)

    def prepare(self, m: Message) -> Callable[[Tx], bool]:
        return partial(self, m)

    def prepare_batch(self, batch: Sequence[Message], dialect: str) -> Callable[[Tx], list[bool]]:
        def step(tx: Tx) -> list[bool]:
            tx.execute("whole batch")
            if self.batch_raises:
                raise ValueError("batch form")
            return [m.task_id != 1 for m in batch]

        return step


def test_a_batch_form_runs_once_for_the_batch() -> None:
    tx, both = Recording(), Both(writes, batch_raises=False)
    counts, seen = run(messages(3), both, tx)
    assert tx.tx.rows == ["whole batch"] and both.single == []
    assert counts["ok"] == 2 and counts["noop"] == 1
    assert {e.start_ms for e in seen} == {1_000}


def test_a_batch_form_that_raises_falls_back_to_each_message_once() -> None:
    tx, both = Recording(), Both(writes, batch_raises=True)
    counts, _ = run(messages(3), both, tx)
    assert tx.tx.rows == ["effect 0", "effect 1", "effect 2"]  # the batch's write undone
    assert both.single == [0, 1, 2] and counts["ok"] == 3


def test_observe_sees_only_the_attempt_that_committed() -> None:
    tx = Recording()
    attempts: list[int] = []

    def transaction(attempt: Callable[[BatchTx], dict[str, int]]) -> dict[str, int]:
        attempts.append(1)
        attempt(Recording())  # an attempt whose commit was lost: run again
        return attempt(tx)

    seen: list[Ended] = []
    work = Batch(
        worker="w", messages=messages(2), run=Plain(writes), retry=Retry(), now=lambda: 5,
        observe=seen.extend,
    )  # fmt: skip
    execute(work, OneTx(transaction))
    assert len(seen) == 2 and attempts == [1]
