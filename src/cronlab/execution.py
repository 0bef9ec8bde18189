"""How a worker batch runs its handlers inside the store's ONE transaction (``execute``).

The worker's side of a batch, for any store: which message runs, the batch form and its
fallback, the async handlers, each run's outcome and the retry policy. The store's side — its
transaction, which deliveries are live, the savepoints and the writes — is a ``BatchTx``
(``stores/sql/batch.py``), as a job executor sits above a database driver.

* A message runs only while it is *live* (``BatchTx.live``): a stale delivery runs nothing and
  is settled without running.
* Every message runs in a savepoint of its own: one that raises is undone alone, and no other
  message runs twice. A batch of one message takes none (on PostgreSQL two round trips a run):
  if it raises, the whole transaction rolls back, and a second one records its failure — the
  same writes, at the same attempt, as its savepoint's rollback would have left. A batch form
  runs once for the whole batch, in one savepoint; if it raises, each message runs once in its
  single form instead.
* Async handlers of a batch run at once on the worker's event loop (``Runner.gather``), each
  writing to a ``QueuedTx``; once they are all done, each one's writes run in a savepoint of
  its own, so its effect still commits with its ack, once, or not at all.
* An error that is the connection's, not the handler's, is not a failed run: it propagates and
  the whole transaction is rolled back (and retried by the store).
* A handler that raises ``asyncio.CancelledError``, ``SystemExit`` or ``KeyboardInterrupt``
  fails its own run like any error (a poison task cannot kill its batch, or every worker that
  receives it). A request to stop is honoured once the batch has committed: the first
  ``SystemExit``/``KeyboardInterrupt`` a handler raised is raised again by ``execute``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from cronlab.handlers import STOPS, AsyncStep, QueuedTx, handler_failure
from cronlab.ports import (
    RUN_ENDINGS,
    Batch,
    BatchStore,
    BatchTx,
    Ended,
    Ending,
    Message,
    Queue,
    Record,
    Retry,
    Run,
    Tx,
)

T = TypeVar("T")
Step = Callable[[Tx], bool]
BatchStep = Callable[[Tx], list[bool]]


def execute(work: Batch, store: BatchStore, queue: Queue | None = None) -> dict[str, int]:
    """Run ``work`` in ONE transaction the store opens (``Store.batch_transaction``), then
    tell ``queue`` it committed (a queue elsewhere acks the deliveries then; None: the store's
    own queue, which the transaction settled); the outcome counts. Work that needs no
    transaction (decoding, a batch form's preparation) is done before it."""
    in_store = queue is None or queue.in_store
    batched = work.run.prepare_batch(work.messages, store.dialect)  # (every task a batch form)
    ready = None if batched is not None else _prepare(work.run, work.messages)

    def steps() -> Sequence[Step]:  # the single forms: prepared here unless a batch form runs
        return ready if ready is not None else _prepare(work.run, work.messages)

    last: list[_Runs] = []  # the attempt that committed
    alone: list[_Alone] = []  # the sole run that failed, rolling its transaction back

    def attempt(b: BatchTx) -> dict[str, int]:
        last[:] = [_Runs(work, b, alone[0] if alone else None)]
        return last[0].run(steps, batched)

    run = store.batch_transaction(work, in_store=in_store)
    try:
        counts = run(attempt)
    except _Alone as failed:
        alone.append(failed)
        counts = run(attempt)  # its failure recorded, the handler not run again
    if queue is not None:
        queue.committed(work.messages)
    if work.observe is not None:
        work.observe([Ended(m, began, end, o, e) for m, began, end, o, e in last[0].records])
    if work.failed is not None and (counts["error"] or counts["failed"]):
        failures = [Ended(*r) for r in last[0].records if r[3] in ("error", "failed")]
        work.failed(failures)
    if last[0].stop is not None:  # committed: now stop, as a handler asked
        raise last[0].stop
    return counts


@dataclass(frozen=True)
class Plain:
    """A bare ``fn(message, tx) -> bool`` as a ``ports.Run``: the worker's retry policy,
    nothing done before the write lock, no batch form, no async steps."""

    fn: Callable[[Message, Tx], bool]

    def __call__(self, m: Message, tx: Tx) -> bool:
        return self.fn(m, tx)

    def retry(self, task: str, default: Retry) -> Retry:
        return default

    def prepare(self, m: Message) -> Step:
        return partial(self.fn, m)

    def prepare_batch(self, messages: Sequence[Message], dialect: str) -> BatchStep | None:
        return None

    def gather(self, runs: Sequence[tuple[Any, Tx]]) -> list[bool | BaseException]:
        raise AssertionError("a plain run makes no async step")


def _prepare(run: Run, messages: Sequence[Message]) -> list[Step]:
    """Work a run can do before the write transaction (``Run.prepare``)."""
    return [run.prepare(m) for m in messages]


class LostRun(Exception):
    """A run whose delivery came back: it never committed (its worker died or was stopped, its
    connection was lost or its session ended, or its transaction failed)."""

    def __init__(self, receives: int) -> None:
        super().__init__(
            f"delivered {receives} times: the run of an earlier delivery never finished (its "
            "worker died, or its transaction was lost); counted as a failed attempt"
        )


class _Undone(Exception):
    """A handler raised ``error``; its savepoint was rolled back."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class _Alone(Exception):
    """The sole run of a batch raised ``error`` (``_Undone``) with no savepoint to roll back:
    its whole transaction rolls back, and ``execute`` records the failure in a second one."""

    def __init__(self, undone: _Undone, began: int) -> None:
        super().__init__(str(undone))
        self.error, self.began = undone.error, began


class _Runs:
    """One attempt at a batch inside an open transaction: its runs and what they ended in.
    ``alone``: the batch's sole run already failed in a transaction rolled back — it is not
    run again; its failure is recorded."""

    def __init__(self, work: Batch, b: BatchTx, alone: _Alone | None = None):
        self.work, self.b, self.now, self.alone = work, b, work.now, alone
        self.records: list[Record] = []
        self.done: list[int] = []  # copies that ran
        self.acks: list[Message] = []
        self.retries: list[tuple[Message, int]] = []
        self.counts = dict.fromkeys(RUN_ENDINGS, 0)
        self.copies: set[int] = set()
        self.stop: BaseException | None = None  # a SystemExit/KeyboardInterrupt a run raised

    def run(self, steps: Callable[[], Sequence[Step]], batched: BatchStep | None) -> dict[str, int]:
        messages = self.work.messages
        live, self.copies = self.b.live(messages, self.work.checked)
        began = self.now()
        runs = [ok and not self._lost(m) for m, ok in zip(messages, live, strict=True)]
        applied = self._whole(batched) if batched is not None and all(runs) else None
        if applied is not None:
            self._all_succeeded(messages, applied, began)
        else:
            prepared = steps()
            began = self.now()
            ran = self._run_async(prepared, runs)
            for i, (m, step, is_live) in enumerate(zip(messages, prepared, live, strict=True)):
                if i in ran:
                    self._settle_async(m, *ran[i], began)
                elif is_live and not runs[i]:
                    self._failed(m, LostRun(m.receives), began)
                else:
                    self._run_one(m, step, is_live)
        self.b.finish(Ending(self.records, self.done, self.acks, self.retries))
        return self.counts

    def _lost(self, m: Message) -> bool:
        """A delivery received before (``receives`` > 1): the run of that earlier delivery
        never committed. It counts as a failed attempt, and this one does not run: a handler
        that kills its worker or its connection runs as often as its attempts allow, no more
        (``--fencing off`` copies excepted: that anti-pattern runs every delivery)."""
        return m.receives > 1 and self.work.checked and m.task_id not in self.copies

    def _run_async(
        self, steps: Sequence[Step], live: Sequence[bool]
    ) -> dict[int, tuple[bool | BaseException, QueuedTx]]:
        """The live async steps, run at once; by index, each one's result and queued writes."""
        todo = [(i, s) for i, s in enumerate(steps) if live[i] and isinstance(s, AsyncStep)]
        if not todo:
            return {}
        queued = [QueuedTx(self.b.dialect) for _ in todo]
        results = self.work.run.gather([(s, q) for (_, s), q in zip(todo, queued, strict=True)])
        return {i: (r, q) for (i, _), r, q in zip(todo, results, queued, strict=True)}

    def _settle_async(
        self, m: Message, result: bool | BaseException, queued: QueuedTx, began: int
    ) -> None:
        """An async run's end: its queued writes in a savepoint of their own, then its ack.
        Async runs start together: ``began`` is when they did."""
        if isinstance(result, BaseException):
            if isinstance(result, STOPS) and self.stop is None:
                self.stop = result
            self._failed(m, result, began)
            return
        try:
            with self.b.savepoint():
                self._handler(queued.apply)
        except _Undone as undone:
            self._failed(m, undone.error, began)
            return
        self._succeeded(m, result, began, self.now())

    def _whole(self, batched: BatchStep) -> list[bool] | None:
        """The batch form, once, in a savepoint; None if it raised (then each message runs
        once in its single form)."""
        try:
            with self.b.savepoint():
                return self._handler(batched)
        except _Undone:
            return None

    def _run_one(self, m: Message, step: Step, live: bool) -> None:
        """One message in a savepoint of its own — or, the batch's only one, in none (``_Alone``
        if it fails); a stale one is settled without running."""
        if not live:
            self.counts["stale"] += 1
            self.acks.append(m)
            return
        if self.alone is not None:  # it ran and failed; its transaction was rolled back
            if isinstance(self.alone.error, STOPS) and self.stop is None:
                self.stop = self.alone.error
            self._failed(m, self.alone.error, self.alone.began)
            return
        began = self.now()
        try:
            if len(self.work.messages) == 1:
                applied = self._handler(step)
            else:
                with self.b.savepoint():
                    applied = self._handler(step)
        except _Undone as undone:
            if len(self.work.messages) == 1:
                raise _Alone(undone, began) from undone.error
            self._failed(m, undone.error, began)
            return
        self._succeeded(m, applied, began, self.now())

    def _handler(self, step: Callable[[Tx], T]) -> T:
        """Run a handler's step; its failure becomes ``_Undone``, which rolls its savepoint
        back. Anything else — the connection, or the savepoint's own statements failing (its
        effect then may not be undone) — propagates, and the whole transaction is rolled
        back: a message is never recorded as failed while its effect stays (sim seed 13560)."""
        try:
            return step(self.b.tx)
        except BaseException as exc:
            if not handler_failure(exc) or self.b.is_connection_error(exc):
                raise  # the connection or the process, not the handler: all rolled back
            if isinstance(exc, STOPS) and self.stop is None:
                self.stop = exc
            raise _Undone(exc) from exc

    def _all_succeeded(
        self, messages: Sequence[Message], applied: Sequence[bool], began: int
    ) -> None:
        """The batch form ran every message; the batch commits as one, so its runs share one
        start and one end instant."""
        end = self.now()
        outcomes = ["ok" if ok else "noop" for ok in applied]
        self.records += [(m, began, end, o, None) for m, o in zip(messages, outcomes, strict=True)]
        self.counts["ok"] += outcomes.count("ok")
        self.counts["noop"] += outcomes.count("noop")
        self.done += [m.task_id for m in messages if m.task_id in self.copies]
        self.acks += messages

    def _succeeded(self, m: Message, applied: bool, began: int, end_ms: int) -> None:
        outcome = "ok" if applied else "noop"
        self.counts[outcome] += 1
        self.records.append((m, began, end_ms, outcome, None))
        if m.task_id in self.copies:
            self.done.append(m.task_id)
        self.acks.append(m)

    def _failed(self, m: Message, exc: BaseException, began: int) -> None:
        error, now = f"{type(exc).__name__}: {exc}", self.now()
        retry = self._retry(m.task)
        final = m.attempt >= retry.max_attempts
        outcome = "failed" if final else "error"
        self.counts[outcome] += 1
        self.records.append((m, began, now, outcome, error))
        self.b.failed(m.task_id, error, final)
        if final:
            self.acks.append(m)
        else:
            self.retries.append((m, now + retry.delay_ms(m.attempt)))

    def _retry(self, handler: str) -> Retry:
        """The handler's own retry policy (``Runner.retry``), or the worker's."""
        return self.work.run.retry(handler, self.work.retry)
