"""The SQL store's side of a worker batch (``ports.BatchTx``): ONE transaction holding
the handlers' effects, the execution records, the task updates and the acks
(``SqlStore.batch_transaction``; which message runs and how is ``execution.py``'s).

* A message is *live* while its task is still DISPATCHED at the attempt the message carries.
  The batch's tasks are marked (on PostgreSQL: locked) in its own transaction before any
  handler runs, so a delivery that went stale — redelivered after the visibility timeout and
  run by another worker meanwhile, or delivered twice — runs nothing and commits nothing: a
  handler's ``ctx.tx`` effect commits with its task's DONE, once. Copies made by ``--election
  off`` (epoch NULL) are the exception on purpose: cron on every replica runs every copy.
* A run's savepoint is taken at its handler's first statement through ``ctx.tx``: one that
  writes nothing costs none.
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
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from cronlab import deadlines
from cronlab.core import occurrences
from cronlab.ports import Batch, BatchTransaction, BatchTx, Ending, Message, NewTask
from cronlab.stores.rows import TaskRead
from cronlab.stores.sql import placeholders
from cronlab.stores.sql.dialect import Conn, Dialect, fetch

if TYPE_CHECKING:
    from cronlab.stores.sql.queue import SqlQueue


class SqlTx:
    """The open transaction a handler writes through (``ports.Tx``), committed with its ack.

    ``execute`` and ``rows`` take ``?`` (values in a sequence) and ``:name`` (a mapping) on
    both stores, and each driver's own style too (PostgreSQL ``%s``/``%(name)s``:
    ``placeholders``); ``dialect`` says which store it is.
    """

    def __init__(self, c: Conn, db: Dialect) -> None:
        self._c, self._queries, self._db = c, db.queries, db
        self.dialect = db.name
        self.run: Savepoint | None = None  # the savepoint of the run writing now
        self._cancel = db.canceller(c)

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
        self._first()
        with deadlines.statement(self._cancel):
            return int(self._c.execute(self._portable(sql, params), params).rowcount)

    def rows(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        self._first()
        with deadlines.statement(self._cancel):
            return fetch(self._c.execute(self._portable(sql, params), params))

    def _portable(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> str:
        return placeholders.for_psycopg(sql, params) if self.dialect == "postgresql" else sql

    def add_task(self, task: NewTask) -> int:
        self._first()
        with deadlines.statement(self._cancel):
            added = int(self._c.execute(self._queries["add_task"], task._asdict()).rowcount)
        if added:
            self._db.notify(self._c, "due")
        return added

    def holder(self, key: str) -> tuple[int, str, str, int] | None:
        self._first()
        with deadlines.statement(self._cancel):
            row = self._c.execute(self._queries["task_by_key"], {"key": key}).fetchone()
        if row is None:
            return None
        held = TaskRead._make(row)
        return int(held.id), held.task, held.payload, int(held.trigger_ms)

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


def transaction(queue: SqlQueue, work: Batch, in_store: bool) -> BatchTransaction:
    """``Store.batch_transaction``: a function's run in one of the store's transactions, as a
    ``SqlBatch``. Never replayed after a lost connection: the handlers would run again
    uncounted (a handler whose SQL ended its own session would run for ever). The messages
    come back through the queue instead, each lost run counted (``execution``, LostRun)."""

    def run(attempt: Callable[[BatchTx], dict[str, int]]) -> dict[str, int]:
        return queue.db.transaction(
            lambda c: attempt(SqlBatch(queue, c, work, in_store)), replay=False
        )

    return run


class SqlBatch:
    """``ports.BatchTx`` on an open transaction of the SQL store."""

    def __init__(self, queue: SqlQueue, c: Conn, work: Batch, in_store: bool):
        self.queue, self.c, self.queries, self.db = queue, c, queue.queries, queue.db
        self.dialect = queue.db.name
        self.tx = SqlTx(c, queue.db)
        self.worker, self.now, self.in_store = work.worker, work.now, in_store

    def savepoint(self) -> AbstractContextManager[None]:
        return savepoint(self.c, self.tx)

    def is_connection_error(self, exc: BaseException) -> bool:
        return self.db.is_connection_error(exc)

    def live(self, messages: Sequence[Message], checked: bool) -> tuple[list[bool], set[int]]:
        """Mark DONE, in this transaction, the tasks still DISPATCHED at the attempt their
        message carries (on PostgreSQL this locks them: a second worker with the same task
        waits, then finds it DONE). A message runs if that marked its task; a copy of
        ``--election off`` always runs. A failing run sets its task back (``failed``)."""
        at_once = self.queries.get("batch_hold_start") if checked and self.in_store else None
        if at_once is not None and len({m.attempt for m in messages}) == 1:
            held, started = self._hold_start(at_once, messages)
            return self._live(messages, held, started)
        held = {m.id for m in messages}
        if self.in_store and (hold := self.queries.get("queue_hold")):
            found = self.c.execute(hold, {"ids": self.db.ints(sorted(held))}).fetchall()
            held = {int(r[0]) for r in found}  # an envelope another batch holds is not ours
        if not checked:  # the --fencing off anti-pattern: every delivery runs, as a naive
            return [True] * len(messages), {m.task_id for m in messages}  # consumer runs it
        by_attempt: dict[int, set[int]] = {}
        for m in messages:
            if m.id in held:
                by_attempt.setdefault(m.attempt - 1, set()).add(m.task_id)
        marked: dict[int, int] = {}
        for before, tasks in sorted(by_attempt.items()):  # mostly one: every attempt is the 1st
            args = {"ids": self.db.ints(sorted(tasks)), "before": before}
            marked.update(self.c.execute(self.queries["batch_start"], args).fetchall())
        return self._live(messages, held, marked)

    def _hold_start(self, sql: str, messages: Sequence[Message]) -> tuple[set[int], dict[int, int]]:
        """``batch_hold_start``: the envelopes held, and the tasks started with their
        attempts, in one statement (every message carries the same attempt)."""
        args = {
            "envelopes": self.db.ints(sorted({m.id for m in messages})),
            "envelope_of": self.db.ints(m.id for m in messages),
            "ids": self.db.ints(m.task_id for m in messages),
            "before": messages[0].attempt - 1,
        }
        held: set[int] = set()
        started: dict[int, int] = {}
        for kind, key, attempts in self.c.execute(sql, args).fetchall():
            if kind == "held":
                held.add(int(key))
            else:
                started[int(key)] = int(attempts)
        return held, started

    def _live(
        self, messages: Sequence[Message], held: set[int], started: dict[int, int]
    ) -> tuple[list[bool], set[int]]:
        """Which messages run: each one whose envelope is ``held`` and whose task ``started``
        at its attempt (once a task), or whose task is a copy of ``--election off``."""
        if len(started) == len(messages):
            return [True] * len(messages), set()  # each message's own task, at its attempt
        copies: set[int] = set()
        missing = {m.task_id for m in messages if m.id in held} - started.keys()
        if missing:
            ids = {"ids": self.db.ints(sorted(missing))}
            copies = {r[0] for r in self.c.execute(self.queries["batch_copies"], ids)}
        live, seen = [], set()
        for m in messages:
            ok = m.id in held and (
                m.task_id in copies
                or (started.get(m.task_id) == m.attempt and m.task_id not in seen)
            )
            if ok:
                seen.add(m.task_id)
            live.append(ok)
        return live, copies

    def failed(self, task_id: int, error: str, final: bool) -> None:
        args = {"error": error, "id": task_id}
        self.c.execute(self.queries["task_failed" if final else "task_error"], args)

    def finish(self, ending: Ending) -> None:
        record: dict[str, str] | None = None  # the records, written with the acks
        if ending.records:
            ends = [[m.task_id, m.id, m.receives, m.attempt, end, outcome, error, began]
                    for m, began, end, outcome, error in ending.records]  # fmt: skip
            record = {"rows": json.dumps(ends), "worker": self.worker}
            if not (self.in_store and "queue_ack_whole_recording" in self.queries):
                self.c.execute(self.queries["execution_insert"], record)
                record = None
        finished = [
            m.task_id
            for m, _, _, outcome, _ in ending.records
            if outcome != "error" and m.idempotency_key.startswith(occurrences.PLANNED)
        ]
        shift = self._shift() if finished or ending.retries else 0
        if finished:  # an occurrence's end — its batch's commit, when others see it end — on
            # the store's clock: the next occurrence's overlap is judged by it
            end = self.now() + shift
            rows = [{"id": task_id, "end": end} for task_id in finished]
            self.db.executemany(self.c, self.queries["task_finished"], rows)
        if ending.done:  # copies of --election off (the others were marked as they started)
            self.c.execute(self.queries["task_done"], {"ids": self.db.ints(ending.done)})
        retries = [(m, at + shift) for m, at in ending.retries]
        if self.in_store:
            self.queue.settle(self.c, ending.acks, retries, self.now() + shift, record)
        else:  # settled on the queue elsewhere; a retry waits in the outbox for the relay
            for m, at in retries:
                self.queue.enqueue(self.c, [(m.task_id, m.attempt)], self.now() + shift, at)

    def _shift(self) -> int:
        """How far the store's clock is ahead of the worker's: a retry's due instant and a
        run's end are written on the store's clock, which judges visibility and overlap (a
        worker whose clock jumped a minute ahead would otherwise hide its retries a minute)."""
        mine = self.now()
        return self.db.now(self.c, mine) - mine
