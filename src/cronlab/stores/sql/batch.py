"""A worker batch in ONE transaction: the handlers' effects, the execution records, the task
updates and the acks (``SqlStore.execute``).

* A message runs only while it is *live*: its task is still DISPATCHED at the attempt the
  message carries. The batch's tasks are read (on PostgreSQL: locked) in its own transaction
  before any handler runs, so a delivery that went stale — redelivered after the visibility
  timeout and run by another worker meanwhile, or delivered twice — runs nothing and commits
  nothing: a handler's ``ctx.tx`` effect commits with its task's DONE, once. Copies made by
  ``--election off`` (epoch NULL) are the exception on purpose: cron on every replica runs
  every copy.
* Every message runs in a savepoint of its own (taken at its handler's first statement through
  ``ctx.tx``: one that writes nothing costs none): one that raises is undone alone, and no
  other message runs twice. A batch form runs once for the whole batch, in one savepoint; if it
  raises, each message runs once in its single form instead.
* Async handlers of a batch run at once on the worker's event loop (``Runner.gather``), each
  writing to a ``QueuedTx``; once they are all done, each one's writes run in a savepoint of
  its own, so its effect still commits with its ack, once, or not at all.
* Nobody else receives a batch's messages while it runs, however long its handlers take
  (the visibility heartbeat of a store queue): on SQLite the batch holds the write lock a claim
  needs; on PostgreSQL it first locks its envelopes' rows, which a claim skips (``SKIP
  LOCKED``) until the batch commits or its session dies.
* A worker killed mid-batch commits nothing; its deliveries come back after the visibility
  timeout with ``receives`` one higher, which is how ``report`` counts abandoned runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from cronlab.handlers import QueuedTx
from cronlab.ports import Batch, Ended, Message, NewTask, Retry, Run, Tx
from cronlab.stores.sql.dialect import Conn, fetch

if TYPE_CHECKING:
    from cronlab.stores.sql.store import SqlStore

T = TypeVar("T")
Step = Callable[[Tx], bool]
BatchStep = Callable[[Tx], list[bool]]
OUTCOMES = ("ok", "noop", "error", "failed", "stale")


class SqlTx:
    """The open transaction a handler writes through (``ports.Tx``), committed with its ack.

    ``execute`` takes the dialect's own placeholders (SQLite ``?``/``:name``, PostgreSQL
    ``%s``/``%(name)s``); ``dialect`` says which.
    """

    def __init__(self, c: Conn, store: SqlStore) -> None:
        self._c, self._q, self._d = c, store.q, store.d
        self.dialect = store.d.name
        self.run: Savepoint | None = None  # the savepoint of the run writing now

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
        self._first()
        return int(self._c.execute(sql, params).rowcount)

    def rows(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        self._first()
        return fetch(self._c.execute(sql, params))

    def add_task(self, task: NewTask) -> int:
        self._first()
        added = int(self._c.execute(self._q["add_task"], task._asdict()).rowcount)
        if added:
            self._d.notify(self._c, "due")
        return added

    def _first(self) -> None:
        if self.run is not None and not self.run.taken:
            self._c.execute("SAVEPOINT run")
            self.run.taken = True


class Savepoint:
    """A run's savepoint, taken just before its handler's first statement through ``ctx.tx``:
    a handler that writes nothing costs no statement (on PostgreSQL, two round trips a run)."""

    taken = False


@contextmanager
def savepoint(c: Conn, tx: SqlTx) -> Iterator[None]:
    """A run whose writes through ``tx`` an exception inside undoes alone (``ctx.tx``'s
    first statement takes the savepoint: ``SqlTx._first``)."""
    run = tx.run = Savepoint()
    try:
        yield
    except BaseException:
        if run.taken:
            c.execute("ROLLBACK TO SAVEPOINT run")
            c.execute("RELEASE SAVEPOINT run")
        raise
    finally:
        tx.run = None
    if run.taken:
        c.execute("RELEASE SAVEPOINT run")


def execute(store: SqlStore, work: Batch, relayed: bool) -> dict[str, int]:
    """``Store.execute``; ``relayed``: see ``redis.OutboxStore``."""
    batched = _prepare_batch(work.run, work.messages, store.d.name)
    ready = None if batched is not None else _prepare(work.run, work.messages)

    def steps() -> Sequence[Step]:  # the single forms: prepared here unless a batch form runs
        return ready if ready is not None else _prepare(work.run, work.messages)

    last: list[_Batch] = []  # the attempt that committed (a lost connection retries it)

    def transaction(c: Conn) -> dict[str, int]:
        last[:] = [_Batch(store, c, work, relayed)]
        return last[0].run(work.messages, steps, batched)

    counts = store.d.transaction(transaction)
    if work.observe is not None:
        work.observe(last[0].ended or ())
    return counts


def _prepare(run: Run, messages: Sequence[Message]) -> list[Step]:
    """Work a run can do before the write transaction (``handlers.Runner.prepare``)."""
    prepare: Callable[[Message], Step] | None = getattr(run, "prepare", None)
    if prepare is not None:
        return [prepare(m) for m in messages]
    return [partial(run, m) for m in messages]


def _prepare_batch(run: Run, messages: Sequence[Message], dialect: str) -> BatchStep | None:
    """The whole batch as one step (``handlers.Runner.prepare_batch``), if the run offers it:
    handlers with a batch form then write every message's effect in one statement."""
    prepare: Callable[[Sequence[Message], str], BatchStep] | None = getattr(
        run, "prepare_batch", None
    )
    return prepare(messages, dialect) if prepare is not None else None


class _Undone(Exception):
    """A handler raised ``error``; its savepoint was rolled back."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class _Batch:
    """One batch inside an open transaction: runs, execution ends, task updates, acks."""

    def __init__(self, store: SqlStore, c: Conn, work: Batch, relayed: bool):
        self.store, self.c, self.q, self.d = store, c, store.q, store.d
        self.worker, self.retry, self.now, self.runs = work.worker, work.retry, work.now, work.run
        self.checked = work.checked
        self.relayed = relayed
        # [task, message, receive, attempt, end, outcome, error, start]
        self.ends: list[list[Any]] = []
        self.ended: list[Ended] | None = [] if work.observe is not None else None
        self.done: list[int] = []  # copies that ran
        self.acks: list[Message] = []
        self.retries: list[tuple[Message, int]] = []
        self.counts = dict.fromkeys(OUTCOMES, 0)
        self.copies: set[int] = set()

    def run(
        self,
        messages: Sequence[Message],
        steps: Callable[[], Sequence[Step]],
        batched: BatchStep | None,
    ) -> dict[str, int]:
        live = self._live(messages)
        tx = SqlTx(self.c, self.store)
        began = self.now()
        applied = self._whole(batched, tx) if batched is not None and all(live) else None
        if applied is not None:
            self._all_succeeded(messages, applied, began)
        else:
            prepared = steps()
            began = self.now()
            ran = self._run_async(prepared, live)
            for i, (m, step, is_live) in enumerate(zip(messages, prepared, live, strict=True)):
                if i in ran:
                    self._settle_async(m, *ran[i], tx, began)
                else:
                    self._run_one(m, step, is_live, tx)
        self._flush()
        return self.counts

    def _run_async(
        self, steps: Sequence[Step], live: Sequence[bool]
    ) -> dict[int, tuple[bool | BaseException, QueuedTx]]:
        """The live async steps, run at once; by index, each one's result and queued writes."""
        gather = getattr(self.runs, "gather", None)
        todo = [(i, s) for i, s in enumerate(steps) if live[i] and hasattr(s, "start")]
        if gather is None or not todo:
            return {}
        queued = [QueuedTx(self.d.name) for _ in todo]
        results = gather([(s, q) for (_, s), q in zip(todo, queued, strict=True)])
        return {i: (r, q) for (i, _), r, q in zip(todo, results, queued, strict=True)}

    def _settle_async(
        self, m: Message, result: bool | BaseException, queued: QueuedTx, tx: SqlTx, began: int
    ) -> None:
        """An async run's end: its queued writes in a savepoint of their own, then its ack.
        Async runs start together: ``began`` is when they did."""
        if isinstance(result, BaseException):
            self._failed(m, result, began)
            return
        try:
            with savepoint(self.c, tx):
                self._handler(queued.apply, tx)
        except _Undone as undone:
            self._failed(m, undone.error, began)
            return
        self._succeeded(m, result, began, self.now())

    def _live(self, messages: Sequence[Message]) -> list[bool]:
        """Mark DONE, in this transaction, the tasks still DISPATCHED at the attempt their
        message carries (on PostgreSQL this locks them: a second worker with the same task
        waits, then finds it DONE). A message runs if that marked its task; a copy of
        ``--election off`` always runs. A failing run sets its task back (``_failed``)."""
        if not self.relayed and (hold := self.q.get("queue_hold")):
            self.c.execute(hold, {"ids": self.d.ints(sorted({m.id for m in messages}))})
        if not self.checked:  # the --fencing off anti-pattern: every delivery runs, as a
            self.copies = {m.task_id for m in messages}  # naive consumer would run it
            return [True] * len(messages)
        by_attempt: dict[int, set[int]] = {}
        for m in messages:
            by_attempt.setdefault(m.attempt - 1, set()).add(m.task_id)
        started: dict[int, int] = {}
        for before, tasks in sorted(by_attempt.items()):  # mostly one: every attempt is the 1st
            args = {"ids": self.d.ints(sorted(tasks)), "before": before}
            started.update(self.c.execute(self.q["batch_start"], args).fetchall())
        if len(started) == len(messages):
            return [True] * len(messages)  # each message's own task, marked at its attempt
        missing = {m.task_id for m in messages} - started.keys()
        if missing:
            ids = {"ids": self.d.ints(sorted(missing))}
            self.copies = {r[0] for r in self.c.execute(self.q["batch_copies"], ids)}
        live, seen = [], set()
        for m in messages:
            ok = m.task_id in self.copies or (
                started.get(m.task_id) == m.attempt and m.task_id not in seen
            )
            if ok:
                seen.add(m.task_id)
            live.append(ok)
        return live

    def _whole(self, batched: BatchStep, tx: SqlTx) -> list[bool] | None:
        """The batch form, once, in a savepoint; None if it raised (then each message runs
        once in its single form)."""
        try:
            with savepoint(self.c, tx):
                return self._handler(batched, tx)
        except _Undone:
            return None

    def _run_one(self, m: Message, step: Step, live: bool, tx: SqlTx) -> None:
        """One message in a savepoint of its own; a stale one is settled without running."""
        if not live:
            self.counts["stale"] += 1
            self.acks.append(m)
            return
        began = self.now()
        try:
            with savepoint(self.c, tx):
                applied = self._handler(step, tx)
        except _Undone as undone:
            self._failed(m, undone.error, began)
            return
        self._succeeded(m, applied, began, self.now())

    def _handler(self, step: Callable[[Tx], T], tx: SqlTx) -> T:
        """Run a handler's step; its failure becomes ``_Undone``, which rolls its savepoint
        back. Anything else — the connection, or the savepoint's own statements failing (its
        effect then may not be undone) — propagates, and the whole transaction is rolled
        back: a message is never recorded as failed while its effect stays (sim seed 13560)."""
        try:
            return step(tx)
        except Exception as exc:
            if self.d.is_connection_error(exc):
                raise  # the connection, not the handler: the whole transaction is retried
            raise _Undone(exc) from exc

    def _all_succeeded(
        self, messages: Sequence[Message], applied: Sequence[bool], began: int
    ) -> None:
        """The batch form ran every message; the batch commits as one, so its runs share one
        start and one end instant."""
        end = self.now()
        outcomes = ["ok" if ok else "noop" for ok in applied]
        self.ends += [
            [m.task_id, m.id, m.receives, m.attempt, end, o, None, began]
            for m, o in zip(messages, outcomes, strict=True)
        ]
        if self.ended is not None:
            self.ended += [Ended(m, began, end, o) for m, o in zip(messages, outcomes, strict=True)]
        self.counts["ok"] += outcomes.count("ok")
        self.counts["noop"] += outcomes.count("noop")
        self.done += [m.task_id for m in messages if m.task_id in self.copies]
        self.acks += messages

    def _succeeded(self, m: Message, applied: bool, began: int, end_ms: int) -> None:
        outcome = "ok" if applied else "noop"
        self.counts[outcome] += 1
        self._ended(m, began, end_ms, outcome, None)
        if m.task_id in self.copies:
            self.done.append(m.task_id)
        self.acks.append(m)

    def _ended(self, m: Message, began: int, end: int, outcome: str, error: str | None) -> None:
        self.ends.append([m.task_id, m.id, m.receives, m.attempt, end, outcome, error, began])
        if self.ended is not None:
            self.ended.append(Ended(m, began, end, outcome))

    def _failed(self, m: Message, exc: BaseException, began: int) -> None:
        error, now = f"{type(exc).__name__}: {exc}", self.now()
        retry = self._retry(m.handler)
        final = m.attempt >= retry.max_attempts
        outcome = "failed" if final else "error"
        self.counts[outcome] += 1
        self._ended(m, began, now, outcome, error)
        args = {"error": error, "id": m.task_id}
        self.c.execute(self.q["task_failed" if final else "task_error"], args)
        if final:
            self.acks.append(m)
        else:
            self.retries.append((m, now + retry.delay_ms(m.attempt)))

    def _retry(self, handler: str) -> Retry:
        """The handler's own retry policy (``Runner.retry``), or the worker's."""
        of: Callable[[str, Retry], Retry] | None = getattr(self.runs, "retry", None)
        return self.retry if of is None else of(handler, self.retry)

    def _flush(self) -> None:
        if self.ends:
            rows = {"rows": json.dumps(self.ends), "worker": self.worker}
            self.c.execute(self.q["execution_insert"], rows)
        if self.done:  # copies of --election off (the others were marked as they started)
            self.c.execute(self.q["task_done"], {"ids": self.d.ints(self.done)})
        if self.relayed:  # settled on the stream; a retry waits in the outbox for the relay
            for m, at in self.retries:
                self.store.enqueue(self.c, [(m.task_id, m.attempt)], self.now(), at)
        else:
            self.store.settle(self.c, self.acks, self.retries, self.now())
