"""What a database must provide to the SQL store (``Dialect``), and the helpers both use."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from cronlab.core.planning import TaskRow as TaskRow
from cronlab.ports import Channel, NewTask, Waiter

if TYPE_CHECKING:
    from cronlab.stores.sql.namespace import Namespace

T = TypeVar("T")


class Conn(Protocol):
    """An open connection inside a transaction (``sqlite3`` and ``psycopg`` both fit)."""

    def execute(self, sql: Any, params: Any = ..., /) -> Any: ...


class Dialect(Protocol):
    """What one database does its own way; the rest of the store is written once."""

    @property
    def name(self) -> str:
        """``"sqlite"`` or ``"postgresql"``: what a handler's SQL can pick its flavour by."""
        ...

    @property
    def queries(self) -> Mapping[str, str]:
        """The named queries (``stores/sql/<name>/queries.sql``), same names and parameters."""
        ...

    @property
    def space(self) -> Namespace:
        """Where this store keeps cronlab's tables beside the application's: ``queries``
        are qualified to it."""
        ...

    @property
    def resume_scan(self) -> bool:
        """The due scan resumes after its last full batch (MVCC keeps dead index entries)."""
        ...

    def transaction(self, fn: Callable[[Conn], T], *, replay: bool = True) -> T:
        """``fn`` in one write transaction: committed when it returns, rolled back if it raises.
        ``replay``: after a lost connection, ``fn`` may run again on a new one (False: never —
        ``BackendUnavailable`` instead, for a batch whose handlers must not run again uncounted)."""
        ...

    def read(self, fn: Callable[[Conn], T]) -> T:
        """``fn`` on a connection that sees committed data, without taking the write lock."""
        ...

    def at_once(self, fn: Callable[[Conn], T]) -> T:
        """``fn``'s ONE statement, a transaction by itself (PostgreSQL: no BEGIN and COMMIT
        round trips); retried as ``transaction`` is."""
        ...

    def notify(self, c: Conn, channel: Channel) -> None:
        """Wake ``channel``'s waiters once the transaction ``c`` is in commits (not before,
        not if it rolls back)."""
        ...

    def waiter(self, channel: Channel) -> Waiter | None:
        """A subscription to ``channel`` on this database (None: it has no wake-ups)."""
        ...

    def canceller(self, c: Conn) -> Callable[[], None] | None:
        """How to cancel, from a signal handler, the statement ``c`` is running (None: none)."""
        ...

    def is_connection_error(self, exc: BaseException) -> bool:
        """True when ``exc`` means the connection failed, not the statement."""
        ...

    def ints(self, values: Iterable[int]) -> Any:
        """An id list as the queries take it (``:ids``); ``ids`` reads a stored one back."""
        ...

    def ids(self, value: Any) -> list[int]: ...

    def texts(self, values: Iterable[str]) -> Any:
        """A list of strings as the queries take it (``:names``)."""
        ...

    def executemany(self, c: Conn, sql: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """``sql`` once per row of named parameters, in order, in ``c``'s transaction."""
        ...

    def now(self, c: Conn, caller_ms: int) -> int:
        """The instant lease expiry is judged by (the caller's, or the server's clock)."""
        ...

    def given_now(self, caller_ms: int) -> int | None:
        """What ``now`` would return when it needs no statement; None: the server's clock,
        which a statement reads itself."""
        ...

    def insert_tasks(self, c: Conn, rows: Sequence[TaskRow]) -> int:
        """Insert a chunk of ``task_row``s (duplicate keys ignored); how many went in."""
        ...

    def schedules_fired(self, c: Conn, rows: Sequence[Mapping[str, Any]]) -> None:
        """``schedule_fired`` for each row, in order (a planned batch's schedules)."""
        ...

    def enqueue(
        self, c: Conn, tasks: Sequence[tuple[int, int]], now_ms: int, visible_ms: int
    ) -> None:
        """``(task id, attempts so far)`` → envelopes of ``rows.ENVELOPE`` tasks at most, one
        attempt number each, visible at ``visible_ms``."""
        ...

    def add_one(self, c: Conn, task: TaskRow) -> tuple[bool, Sequence[Any]] | None:
        """One try at inserting ``task`` PENDING unless its key is taken: whether it went in,
        and the ``task_by_key`` row that holds the key now; None when that row was gone once
        looked for (the retention deleted it after the insert ran into it: the key is free, try
        again). Wakes ``due``'s waiters, once committed, if it went in. One statement on
        PostgreSQL (``add_one_at_once``): run it with ``at_once``."""
        ...

    def enqueue_dispatched(self, c: Conn, tasks: Sequence[tuple[int, int]], now_ms: int) -> None:
        """``enqueue`` visible at once, counted as dispatched (``count_dispatched``), and the
        ``queued`` channel's waiters woken once ``c``'s transaction commits."""
        ...

    def run_script(self, c: Conn, script: str) -> None:
        """Run a migration file's statements (qualified already)."""
        ...

    def create_namespace(self, c: Conn) -> None:
        """Make room for cronlab's tables (a schema), if the database needs it."""
        ...

    def move_beside(self, c: Conn, tables: Sequence[str]) -> None:
        """Move a store whose ``tables`` stand alone, under their bare names, to where
        ``space`` keeps them (``migrate``)."""
        ...

    def describe(self) -> str:
        """The store for messages, without secrets."""
        ...

    def missing(self) -> bool:
        """True when the database was deleted or replaced under the open connection."""
        ...

    def close(self) -> None: ...


@cache
def sql_files(dialect: str) -> dict[str, str]:
    """The named-query file and the migrations of ``dialect``, by file name."""
    folder = resources.files("cronlab.stores.sql") / dialect
    return {f.name: f.read_text() for f in folder.iterdir() if f.name.endswith(".sql")}


def queries(dialect: str) -> dict[str, str]:
    """The named queries of ``dialect``: ``shared/queries*.sql``, then its own files' (each
    folder's ``queries.sql`` first, then the others named ``queries_*.sql`` in name order)."""
    found: dict[str, str] = {}
    for folder in ("shared", dialect):
        files = sql_files(folder)
        for name in sorted(n for n in files if n.startswith("queries")):
            found.update(parse_queries(files[name]))
    return found


def parse_queries(text: str) -> dict[str, str]:
    """``-- name: X`` blocks → {X: sql}; comment lines inside a block are dropped."""
    queries: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith("-- name:"):
            name = line.removeprefix("-- name:").strip()
            queries[name] = ""
        elif name and not line.lstrip().startswith("--"):
            queries[name] += line + "\n"
    return {k: v.strip() for k, v in queries.items()}


def task_row(t: NewTask) -> TaskRow:
    """A task as a positional row (the bulk inserts)."""
    return (t.idempotency_key, t.task, t.payload, t.trigger_ms, t.schedule)


def fetch(cursor: Any) -> list[Any]:
    """The rows a statement produced; none for one that produces no rows."""
    return list(cursor.fetchall()) if cursor.description is not None else []
