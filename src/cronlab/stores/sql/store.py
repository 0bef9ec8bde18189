"""The SQL store, written once for SQLite and PostgreSQL: ``SqlStore`` opens one ``Dialect``,
migrates it, and answers every port the engine uses through one part per port, each a small
class over that dialect:

======================  =====================================================  ===============
part                    what it keeps                                          port
======================  =====================================================  ===============
``tasks.SqlTasks``      the task rows: insert, read by id or key, count        ``Store``
``dispatch``            the leader's fenced dispatch and its reconcile         ``Store``
``queue.SqlQueue``      envelopes claimed, settled, released; the outbox       ``QueueTable``
``lease.SqlLease``      the lease row and the fence every leader write checks  ``LeaseTable``
``schedules``           schedules and their next occurrence                    ``ScheduleStore``
``history``             runs, events, samples, and their retention             ``Store``
``processes``           the process registry and heartbeats                    ``Store``
``alerts``              the alerts and what alerting reads                     (``Alerter``)
``control``             an operator's cancel and retry of one task             ``TaskControl``
======================  =====================================================  ===============

Every public write is ONE transaction of the dialect's. Worker batches: ``batch.py`` (over
the queue); migrations: ``migrate.py``; what a database does its own way: ``dialect.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from cronlab.core import lease as rules
from cronlab.core.policy import Schedule
from cronlab.ports import (
    Backfill,
    Batch,
    BatchTransaction,
    Channel,
    Event,
    Message,
    NewTask,
    ProcessInfo,
    RunQuery,
    RunRecord,
    ScheduleInfo,
    StoredTask,
    SyncReport,
    TaskInfo,
    Waiter,
)
from cronlab.stores import Fencing
from cronlab.stores.sql import batch, migrate, placeholders
from cronlab.stores.sql.alerting import SqlAlerts
from cronlab.stores.sql.dialect import Dialect, fetch
from cronlab.stores.sql.dispatch import SqlDispatch
from cronlab.stores.sql.history import SqlHistory
from cronlab.stores.sql.lease import SqlLease
from cronlab.stores.sql.operations import SqlTaskControl
from cronlab.stores.sql.processes import SqlProcesses
from cronlab.stores.sql.queue import SqlQueue
from cronlab.stores.sql.schedules import SqlSchedules
from cronlab.stores.sql.tasks import SqlTasks

T = TypeVar("T")


class SqlStore:
    """``ports.Store`` + ``LeaseTable`` + ``QueueTable`` + ``ScheduleStore`` + ``TaskControl``
    on one database, each method one line into its part.

    ``fencing="lease"``: a dispatch must carry the epoch of the unexpired lease row in this
    store. ``"epoch"``: the lease lives elsewhere (etcd); a dispatch must carry an epoch no
    lower than the highest one seen (``SqlLease``).
    ``create=False`` refuses a database with no store; ``read_only`` also never migrates one
    (a store that needs a migration is refused, nothing written).
    """

    def __init__(
        self,
        dialect: Dialect,
        *,
        create: bool = True,
        read_only: bool = False,
        fencing: Fencing = "lease",
    ):
        self.db, self.queries = dialect, dialect.queries
        try:
            migrate.migrate(dialect, create, read_only=read_only)
        except BaseException:
            dialect.close()
            raise
        self.tasks = SqlTasks(dialect)
        self.lease = SqlLease(dialect, fencing)
        self.queue = SqlQueue(dialect)
        self.dispatch = SqlDispatch(dialect, self.lease, self.queue)
        self.schedules = SqlSchedules(dialect, self.tasks)
        self.history = SqlHistory(dialect, self.lease)
        self.registry = SqlProcesses(dialect)
        self.alerts = SqlAlerts(dialect, self.lease)
        self.control = SqlTaskControl(dialect, self.schedules)

    def close(self) -> None:
        self.db.close()

    def missing(self) -> bool:
        """True when the database was deleted or replaced under this store (a SQLite file)."""
        return self.db.missing()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.db.describe()}>"

    def schema_versions(self) -> list[int]:
        """Applied migration numbers, ascending."""
        rows = self.query(self.own(f"SELECT version FROM {migrate.TABLE} ORDER BY version"))
        return [int(r[0]) for r in rows]

    @property
    def dialect(self) -> str:
        return self.db.name

    # -- reads for reports, tests and apps --------------------------------------------------

    def own(self, sql: str) -> str:
        """``sql`` with cronlab's own tables, named bare (``tasks``, ``queue``), qualified to
        where this store keeps them beside the application's (``namespace``): how tests, the
        lab and the simulator read cronlab's tables. An application's SQL (``query``,
        ``write``, ``ctx.tx``) is never rewritten."""
        return self.db.space.sql(sql)

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        """Read-only SQL with bound parameters: ``?`` or ``:name`` on both stores, or the
        driver's own style (``placeholders``)."""
        if self.db.name == "postgresql":
            sql = placeholders.for_psycopg(sql, params)
        return self.db.read(lambda c: fetch(c.execute(sql, params)))

    def named(self, name: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """A named read query of the dialect (the report's, for instance)."""
        return self.query(self.queries[name], params or {})

    def write(self, fn: Callable[[batch.SqlTx], T]) -> T:
        """``fn`` in one write transaction, through a handler's ``Tx`` (apps' own tables)."""
        return self.db.transaction(lambda c: fn(batch.SqlTx(c, self.db)))

    # -- tasks (SqlTasks) and the leader's dispatch (SqlDispatch) ---------------------------

    def task(self, task_id: int) -> StoredTask:
        return self.tasks.get(task_id)

    def task_by_key(self, key: str) -> StoredTask:
        return self.tasks.by_key(key)

    def last_error(self, task_id: int) -> str | None:
        return self.tasks.last_error(task_id)

    def add_tasks(self, tasks: Iterable[NewTask], *, conflicts: bool = False) -> int:
        """``SqlTasks.add_many`` (which also reports progress, chunk by chunk)."""
        return self.tasks.add_many(tasks, conflicts=conflicts)

    def add_task(self, new: NewTask) -> tuple[bool, StoredTask]:
        return self.tasks.add_one(new)

    def next_due_ms(self, after_ms: int) -> int | None:
        return self.tasks.next_due_ms(after_ms)

    def pending_due(self, now_ms: int) -> int:
        return self.tasks.pending_due(now_ms)

    def counts(self) -> dict[str, int]:
        return self.tasks.counts()

    def dispatch_due(
        self, now_ms: int, limit: int, epoch: int, *, clock: Callable[[], int] | None = None
    ) -> int:
        return self.dispatch.dispatch_due(now_ms, limit, epoch, clock=clock)

    def reconcile(self, now_ms: int, epoch: int, *, queued_elsewhere: Collection[int] = ()) -> int:
        return self.dispatch.reconcile(now_ms, epoch, queued_elsewhere=queued_elsewhere)

    def waiter(self, channel: Channel) -> Waiter | None:
        """A subscription to ``channel`` on this store's database (None: no wake-ups)."""
        return self.db.waiter(channel)

    def batch_transaction(self, work: Batch, *, in_store: bool = True) -> BatchTransaction:
        """A worker batch's ONE transaction with its execution records, task updates and acks
        (``batch.transaction``)."""
        return batch.transaction(self.queue, work, in_store)

    # -- lease row (SqlLease) ---------------------------------------------------------------

    def lease_cas(self, owner: str, now_ms: int, ttl_ms: int) -> rules.LeaseState | None:
        return self.lease.cas(owner, now_ms, ttl_ms)

    def lease_release(self, owner: str) -> None:
        self.lease.release(owner)

    def lease_read(self) -> rules.LeaseState:
        return self.lease.read()

    # -- queue (SqlQueue) -------------------------------------------------------------------

    def queue_claim(
        self, worker: str, limit: int, visibility_ms: int, now_ms: int
    ) -> list[Message]:
        return self.queue.claim(worker, limit, visibility_ms, now_ms)

    def queue_ack(self, messages: Sequence[Message]) -> int:
        return self.queue.ack(messages)

    def queue_release(self, messages: Sequence[Message]) -> int:
        return self.queue.release(messages)

    def queue_depth(self) -> int:
        return self.queue.depth()

    # -- schedules (SqlSchedules) -----------------------------------------------------------

    def put_schedule(
        self,
        schedule: Schedule,
        now_ms: int,
        *,
        replace: bool,
        clock: Callable[[], int] | None = None,
    ) -> bool:
        return self.schedules.put_schedule(schedule, now_ms, replace=replace, clock=clock)

    def sync_schedules(
        self,
        app: str,
        wanted: Sequence[Schedule],
        now_ms: int,
        *,
        clock: Callable[[], int] | None = None,
    ) -> SyncReport:
        return self.schedules.sync_schedules(app, wanted, now_ms, clock=clock)

    def get_schedule(self, name: str) -> ScheduleInfo:
        return self.schedules.get_schedule(name)

    def list_schedules(self) -> list[ScheduleInfo]:
        return self.schedules.list_schedules()

    def pause_schedule(
        self,
        name: str,
        now_ms: int,
        note: str | None = None,
        *,
        clock: Callable[[], int] | None = None,
    ) -> bool:
        return self.schedules.pause_schedule(name, now_ms, note, clock=clock)

    def resume_schedule(
        self, name: str, now_ms: int, *, clock: Callable[[], int] | None = None
    ) -> bool:
        return self.schedules.resume_schedule(name, now_ms, clock=clock)

    def remove_schedule(
        self, name: str, now_ms: int, *, clock: Callable[[], int] | None = None
    ) -> None:
        self.schedules.remove_schedule(name, now_ms, clock=clock)

    def trigger_schedule(self, name: str, now_ms: int) -> str:
        return self.schedules.trigger_schedule(name, now_ms)

    def backfill_schedule(self, name: str, from_ms: int, to_ms: int, now_ms: int) -> Backfill:
        return self.schedules.backfill_schedule(name, from_ms, to_ms, now_ms)

    # -- processes (SqlProcesses), run history, events and samples (SqlHistory) -------------

    def register_process(self, info: ProcessInfo) -> None:
        self.registry.register(info)

    def process_exited(self, owner: str, now_ms: int) -> None:
        self.registry.exited(owner, now_ms)

    def processes(self) -> list[ProcessInfo]:
        return self.registry.all()

    def heartbeat(self, info: ProcessInfo, now_ms: int) -> None:
        self.registry.heartbeat(info, now_ms)

    def runs(self, query: RunQuery, now_ms: int) -> list[RunRecord]:
        return self.history.runs(query, now_ms)

    def prune_history(self, keep_ms: int, now_ms: int, limit: int, epoch: int) -> int:
        return self.history.prune(keep_ms, now_ms, limit, epoch)

    def record_event(self, event: Event) -> None:
        self.history.record_event(event)

    def events(self) -> list[Event]:
        return self.history.events()

    def record_sample(self, now_ms: int, depth: int) -> None:
        self.history.record_sample(now_ms, depth)

    # -- an operator's actions on one task (SqlTaskControl) ---------------------------------

    def task_info(self, task_id: int) -> TaskInfo:
        return self.control.task_info(task_id)

    def cancel_task(self, task_id: int, now_ms: int, *, by: str) -> TaskInfo:
        return self.control.cancel_task(task_id, now_ms, by=by)

    def retry_task(self, task_id: int, now_ms: int, *, by: str) -> TaskInfo:
        return self.control.retry_task(task_id, now_ms, by=by)
