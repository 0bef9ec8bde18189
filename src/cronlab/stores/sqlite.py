"""The SQLite dialect: one file (or ``:memory:``), no server — the embedded default.

One connection per process, WAL journal, ``busy_timeout`` so writers queue instead of failing,
``BEGIN IMMEDIATE`` for every write so a transaction takes the write lock before it reads (the
fencing check and the claim can then not interleave with another writer). Writers first queue
on an OS file lock (``PATH.writer``), which wakes a waiter the moment the holder lets go.
Id lists go over the wire as JSON arrays (``json_each`` unpacks them).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import sqlite3
import stat
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar

from cronlab.exceptions import BackendBusy, BackendUnavailable, ConfigError
from cronlab.ports import Channel, Clock, Waiter
from cronlab.stores import LOCK_WAIT_S, Fencing, sql
from cronlab.stores.rows import ENVELOPE
from cronlab.stores.sql import dialect as base
from cronlab.stores.sql import namespace
from cronlab.wakeups import unix

T = TypeVar("T")
MEMORY = ":memory:"
QUERIES = namespace.SQLITE.queries(base.queries("sqlite"))


def split_statements(script: str) -> list[str]:
    """A migration script → its statements (SQLite decides where one is complete)."""
    statements, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            statements.append(buf.strip())
            buf = ""
    return [s for s in statements if s.strip(" ;\n")]


def envelopes(tasks: Sequence[tuple[int, int]], now_ms: int, visible_ms: int) -> list[Any]:
    """``(task id, attempts so far)`` pairs → ``enqueue`` rows, ``ENVELOPE`` tasks at most each,
    one attempt number per envelope."""
    by_attempt: dict[int, list[int]] = {}
    for task_id, attempts in tasks:
        by_attempt.setdefault(attempts + 1, []).append(task_id)
    return [
        (json.dumps(ids[i : i + ENVELOPE]), len(ids[i : i + ENVELOPE]), attempt, now_ms, visible_ms)
        for attempt, ids in by_attempt.items()
        for i in range(0, len(ids), ENVELOPE)
    ]


class Seams(NamedTuple):
    """Where the deterministic simulator (``cronlab.sim``) steps in; None: the real thing.

    ``lock``: the writer lock; ``wrap``: the connection's stand-in, given the connection (the
    simulator's runs its hook before each statement, and may switch processes there or kill
    this one: ``sim/world.py`` ``PointedConnection``); ``clock``: whose time judges the
    lease, as a database server's does (None: the caller's); ``wakeups``: the wake-up
    channels between processes (None: Unix sockets for a real file, none in the simulator).
    """

    lock: AbstractContextManager[None] | None = None
    wrap: Callable[[sqlite3.Connection], Any] | None = None
    clock: Clock | None = None
    wakeups: Wakeups | None = None


class Wakeups(Protocol):
    """Wake-up channels between a store's processes (``wakeups/unix.py``'s, or simulated)."""

    def notify(self, channel: Channel) -> None:
        """Tell the waiters on ``channel`` (called after the commit that made the news)."""
        ...

    def waiter(self, channel: Channel) -> Waiter | None: ...


REAL = Seams()


class SqliteDialect:
    """``sql.Dialect`` for one SQLite database file, or a private ``:memory:`` one."""

    name = "sqlite"
    queries = QUERIES
    space = namespace.SQLITE
    resume_scan = False  # a claimed row leaves the partial index at once: nothing to skip

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = True,
        read_only: bool = False,
        seams: Seams | None = None,
        lock_wait_s: float = LOCK_WAIT_S,
        any_thread: bool = False,
    ) -> None:
        self.path = Path(path)
        self.memory = str(path) == MEMORY
        self.read_only = read_only
        self.seams = seams = seams or REAL
        mode = "rwc" if create and not read_only else "rw"
        conn = _connect(str(path), mode, self.memory, lock_wait_s, any_thread)
        if read_only:
            # Not mode=ro: a read-only connection to a WAL file leaves its -wal and -shm
            # behind; a read-write one that writes nothing removes them as it closes.
            conn.execute("PRAGMA query_only = ON")
        self.conn: Any = conn if seams.wrap is None else seams.wrap(conn)
        # A :memory: store's threads take turns on its one connection.
        self._writer: AbstractContextManager[Any] = seams.lock or (
            threading.RLock() if self.memory else _WriterLock(self.path, lock_wait_s)
        )
        self._wal = self.memory
        self._inode = None if self.memory else os.stat(self.path).st_ino
        # Wake-ups between this file's processes (none for :memory: or the simulator's).
        self._wakeups = seams.wakeups
        if self._wakeups is None and not self.memory and seams is REAL:
            self._wakeups = unix.UnixWakeups(unix.directory(self.path))
        self._news: set[Channel] = set()

    def missing(self) -> bool:
        """True once the file this connection opened was deleted or replaced under it."""
        if self._inode is None:
            return False
        try:
            return os.stat(self.path).st_ino != self._inode
        except FileNotFoundError:
            return True

    def transaction(self, fn: Callable[[sql.Conn], T], *, replay: bool = True) -> T:
        """``fn`` in one write transaction (never replayed: no connection to lose)."""
        if self.read_only:  # (never a PRAGMA, a lock file or a write on a file only read)
            raise ConfigError(f"{self.describe()} was opened read-only: nothing was written")
        with self._writer:
            if not self._wal:  # a write: only once the store is known to be ours
                self.conn.execute("PRAGMA journal_mode = WAL")
                self._wal = True
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                busy = "locked" in str(exc) or "busy" in str(exc)
                raise (BackendBusy if busy else BackendUnavailable)(
                    f"sqlite {self.path}: {exc}"
                ) from exc
            self._news.clear()
            try:
                result = fn(self.conn)
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:  # (a COMMIT that failed leaves it open)
                    self.conn.execute("ROLLBACK")
                raise
            news, self._news = self._news, set()
        if self._wakeups is not None:
            for channel in sorted(news):  # after the commit and the lock: the news is visible
                self._wakeups.notify(channel)
        return result

    def notify(self, c: sql.Conn, channel: Channel) -> None:
        self._news.add(channel)

    def waiter(self, channel: Channel) -> Waiter | None:
        return None if self._wakeups is None else self._wakeups.waiter(channel)

    def at_once(self, fn: Callable[[sql.Conn], T]) -> T:
        return self.transaction(fn)

    def read(self, fn: Callable[[sql.Conn], T]) -> T:
        if self.memory:  # one connection shared by threads: never read another's open write
            with self._writer:
                return fn(self.conn)
        return fn(self.conn)

    def canceller(self, c: sql.Conn) -> None:
        """None: a Python signal handler runs only once SQLite's call returns anyway."""
        return None

    def is_connection_error(self, exc: BaseException) -> bool:
        return False  # no connection to lose: every error is the statement's

    def ints(self, values: Iterable[int]) -> str:
        return json.dumps(list(values))

    def ids(self, value: Any) -> list[int]:
        return list(json.loads(value))

    def texts(self, values: Iterable[str]) -> str:
        return json.dumps(list(values))

    def executemany(self, c: sql.Conn, sql: str, rows: Sequence[Mapping[str, Any]]) -> None:
        self.conn.executemany(sql, rows)

    def now(self, c: sql.Conn, caller_ms: int) -> int:
        return caller_ms if self.seams.clock is None else self.seams.clock.now_ms()

    def given_now(self, caller_ms: int) -> int | None:
        return self.now(self.conn, caller_ms)

    def schedules_fired(self, c: sql.Conn, rows: Sequence[Mapping[str, Any]]) -> None:
        self.conn.executemany(QUERIES["schedule_fired"], rows)

    def insert_tasks(self, c: sql.Conn, rows: Sequence[base.TaskRow]) -> int:
        """The rows the statement itself inserted (``rowcount``: what a trigger on the table
        writes is not counted, as ``total_changes`` would)."""
        return int(self.conn.executemany(QUERIES["add_tasks_many"], rows).rowcount)

    def enqueue(
        self, c: sql.Conn, tasks: Sequence[tuple[int, int]], now_ms: int, visible_ms: int
    ) -> None:
        self.conn.executemany(QUERIES["enqueue"], envelopes(tasks, now_ms, visible_ms))

    def add_one(self, c: sql.Conn, task: base.TaskRow) -> tuple[bool, Sequence[Any]] | None:
        added = self.insert_tasks(c, [task]) > 0
        held = c.execute(QUERIES["task_by_key"], {"key": task[0]}).fetchone()
        if held is not None and added:
            self.notify(c, "due")
        return None if held is None else (added, held)

    def enqueue_dispatched(
        self, c: sql.Conn, tasks: Sequence[tuple[int, int]], now_ms: int
    ) -> None:
        self.enqueue(c, tasks, now_ms, 0)
        c.execute(QUERIES["count_dispatched"], {"n": len(tasks)})
        self.notify(c, "queued")

    def run_script(self, c: sql.Conn, script: str) -> None:
        for statement in split_statements(script):
            c.execute(statement)

    def create_namespace(self, c: sql.Conn) -> None:
        """Nothing: the prefix needs no room of its own."""

    def move_beside(self, c: sql.Conn, tables: Iterable[str]) -> None:
        """A store of cronlab before 0.3 (its tables bare, alone in the file) → its tables
        and indexes renamed with the prefix (an index is dropped and made again: SQLite
        cannot rename one)."""
        for bare in tables:
            if self.space.qualified(bare) != bare:  # (cronlab_schema keeps its name)
                c.execute(f"ALTER TABLE {bare} RENAME TO {self.space.qualified(bare)}")
        ours = namespace.objects()
        rows = c.execute(self.queries["indexes"]).fetchall()
        for name, statement in rows:
            if ours.get(name) == "index":
                c.execute(f"DROP INDEX {name}")
                c.execute(self.space.sql(statement))

    def describe(self) -> str:
        return "sqlite :memory:" if self.memory else f"sqlite {str(self.path)!r}"

    def close(self) -> None:
        self.conn.close()
        if isinstance(self._writer, _WriterLock):
            self._writer.close()


class SqliteStore(sql.SqlStore):
    """The SQL store on a SQLite file (``sqlite:///PATH``)."""

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = True,
        read_only: bool = False,
        fencing: Fencing = "lease",
        seams: Seams | None = None,
        lock_wait_s: float = LOCK_WAIT_S,
        any_thread: bool = False,
    ) -> None:
        """``create=False``: a missing file is a ConfigError; ``read_only``: the file is
        opened read-only and never changed (no journal mode, lock file or migration);
        ``any_thread``: its connection may be closed from another thread."""
        self.path = Path(path)
        self.sqlite = SqliteDialect(
            path,
            create=create,
            read_only=read_only,
            seams=seams,
            lock_wait_s=lock_wait_s,
            any_thread=any_thread,
        )
        super().__init__(self.sqlite, create=create, read_only=read_only, fencing=fencing)


class _WaitExpired(Exception):
    """The writer lock's wait ran out (raised by the SIGALRM handler)."""


def _expired(signum: int, frame: object) -> None:
    raise _WaitExpired


class _WriterLock:
    """Writers queue on an OS file lock (``PATH.writer``) before ``BEGIN IMMEDIATE``.

    SQLite's busy handler polls: a writer that finds the lock taken sleeps 1, 2, 5 … up to
    100 ms between tries, so with several processes the lock often sits free while they all
    sleep. ``flock`` blocks in the kernel and wakes a waiter the moment the holder lets go.
    The kernel drops the lock of a process that dies, so a SIGKILLed writer never wedges the
    store. SQLite's own lock stays the guarantee; this only orders the writers.
    """

    def __init__(self, db: Path, wait_s: float) -> None:
        self.db, self.wait_s = db, wait_s
        self._opened: int | None = None  # at the first write: a refused store gets no file
        self._opening = threading.Lock()

    @property
    def _fd(self) -> int:
        with self._opening:
            if self._opened is None:
                self._opened = self._open()
            return self._opened

    def _open(self) -> int:
        try:
            return os.open(f"{self.db}.writer", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:  # (a read-only disk, a directory the user may not write)
            why = "the store is read-only" if exc.errno in (errno.EROFS, errno.EACCES) else ""
            raise ConfigError(
                f"sqlite {self.db}: cannot create its lock file {self.db.name}.writer "
                f"({exc.strerror}){': ' + why if why else ''}; nothing was written"
            ) from None

    def __enter__(self) -> None:
        """Take the lock, waiting at most ``wait_s``: a writer paused or stuck inside its
        transaction must not hang every other process (a standby would never even ask for the
        lease). Free: at once. Taken: in the main thread, a blocking ``flock`` (woken by the
        kernel the moment the holder lets go) cut short by a ``SIGALRM`` timer; in other
        threads (the lab's in-process engine), polled every 0.5 ms doubling to 2 ms."""
        if self._try():
            return
        if threading.current_thread() is threading.main_thread():
            self._block()
        else:
            self._poll()

    def _block(self) -> None:
        previous = signal.signal(signal.SIGALRM, _expired)
        signal.setitimer(signal.ITIMER_REAL, self.wait_s)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except _WaitExpired:
            raise self._busy() from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    def _poll(self) -> None:
        deadline, delay = time.monotonic() + self.wait_s, 0.0005
        while not self._try():
            if time.monotonic() >= deadline:
                raise self._busy()
            time.sleep(delay)
            delay = min(0.002, delay * 2)

    def _busy(self) -> BackendBusy:
        return BackendBusy(
            f"sqlite {self.db}: the write lock was not free within {self.wait_s:g} s "
            "(a writer paused or stuck inside its transaction)"
        )

    def _try(self) -> bool:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._opened is not None:
            os.close(self._opened)
            self._opened = None


def _connect(
    path: str, mode: str, memory: bool, wait_s: float, any_thread: bool = False
) -> sqlite3.Connection:
    """A connection to ``path`` in SQLite's ``mode`` (``rwc`` or ``rw``); one that only its
    own thread may use, unless ``memory`` (shared, behind a lock) or ``any_thread``."""
    if not memory:
        _check_file(path, create=mode == "rwc")
    try:
        conn = sqlite3.connect(
            MEMORY if memory else uri(path, mode),
            uri=not memory,
            isolation_level=None,
            timeout=wait_s,
            check_same_thread=not (memory or any_thread),
        )
        conn.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
        conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot open store {path!r}: {exc}") from exc
    return conn


def uri(path: str, mode: str) -> str:
    """The ``file:`` URI of ``path``: every character a URI gives a meaning to (``?``, ``#``,
    ``%``) percent-encoded, so SQLite opens the file named and no other. An absolute path
    gets an empty authority (``file:///…``): ``//x`` is then a path, not a host."""
    quoted = urllib.parse.quote(path, safe="/")
    return f"file://{quoted}?mode={mode}" if path.startswith("/") else f"file:{quoted}?mode={mode}"


def _check_file(path: str, *, create: bool) -> None:
    """ConfigError for a store that is missing (unless ``create``) or is not a regular file
    (``/dev/null``, a directory, a FIFO): nothing is created beside it."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        if create:
            return
        raise ConfigError(f"no store at {path!r} (file does not exist)") from None
    except OSError as exc:
        raise ConfigError(f"cannot open store {path!r}: {exc.strerror}") from None
    if not stat.S_ISREG(found.st_mode):
        raise ConfigError(f"store {path!r} is not a regular file: nothing was written")
