"""The PostgreSQL dialect (``--store postgresql://user@host:port/db``): the SQL store on a
server, for replicas and workers on several machines.

* psycopg 3 with a connection pool; every write is one transaction, retried with backoff when
  the connection drops (a server restart), ``BackendUnavailable`` after ``retry_s``.
* Claims use ``FOR UPDATE SKIP LOCKED`` in large batches; claim and mark are one statement. A
  dispatch first locks the fence row, so two leaders' dispatches serialise.
* ``time_source="server"`` (default): lease expiry is judged by the server's clock, never by a
  replica's, so clock skew between hosts cannot elect two leaders. ``"caller"`` takes the
  time the caller passes (the contract tests drive a fake clock that way).
* Id lists go over the wire as array literals (``{1,2,3}``), several times cheaper to build and
  send than psycopg's adaptation of a list; bulk inserts use COPY, and up to ``FEW_TASKS``
  rows one INSERT from arrays (one round trip where COPY takes four).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, NamedTuple, Protocol, TypedDict, TypeVar, Unpack, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from cronlab import urls
from cronlab.clock import SystemClock
from cronlab.exceptions import BackendBusy, BackendUnavailable, ConfigError, SessionLost
from cronlab.ports import Channel, Clock, Waiter
from cronlab.stores import Fencing, TimeSource, sql
from cronlab.stores.rows import ENVELOPE
from cronlab.stores.sql import dialect as base
from cronlab.stores.sql import namespace
from cronlab.urls import redact

try:
    import psycopg
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ConfigError(
        "postgresql:// stores need the postgres extra: pip install 'cronlab[postgres]'"
    ) from exc
from cronlab.wakeups import postgres as wakeups  # (needs psycopg)

T = TypeVar("T")
SCHEMES = ("postgresql", "postgres")
# Tasks inserted from arrays in one statement; more go through COPY, which is faster from
# between 300 and 1,000 rows on (bench/pg_add_tasks.py: arrays 1.5x COPY at 300, 0.89x at 1,000).
FEW_TASKS = 500
BARE = base.queries("postgresql")
QUERIES = namespace.postgres_schema(None).queries(BARE)  # in the default schema


CONFLICT_TRIES = 3
# Admin/crash shutdown, cannot connect now; a session ended for idling in its transaction.
_SHUTDOWN = frozenset({"57P01", "57P02", "57P03", "25P03"})
_CONFLICT = frozenset({"40001", "40P01"})  # serialization failure, deadlock


def error_kind(exc: BaseException) -> Literal["connection", "conflict", "busy", "statement"]:
    """What an error says about the server: ``connection`` (SQLSTATE class 08, a shutdown, or a
    client-side loss with no SQLSTATE: retried until the backend is back), ``conflict``
    (40001, 40P01: retried a few times), ``busy`` (55P03: a lock not free within the session's
    ``lock_timeout``; outside a handler, the store is busy), or ``statement`` (``QueryCanceled``,
    ``LockNotAvailable``, a constraint...: the statement's own failure, a handler's if it ran
    one; never retried as the backend's)."""
    if not isinstance(exc, psycopg.Error):
        return "statement"
    state = exc.sqlstate
    if state is None:
        return "connection" if isinstance(exc, psycopg.OperationalError) else "statement"
    if state.startswith("08") or state in _SHUTDOWN:
        return "connection"
    if state == "55P03":  # lock_not_available: this session's lock_timeout
        return "busy"
    return "conflict" if state in _CONFLICT else "statement"


class Pool(Protocol):
    """Where a dialect's transactions get their connection (``psycopg_pool.ConnectionPool``)."""

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...

    def close(self) -> None: ...


class Seams(NamedTuple):
    """Where the deterministic simulator (``sim/postgres.py``) steps in; None: the real thing.

    ``pool``: one simulated process's connection (its statements become the simulator's
    points); ``clock``: the server's clock, and the clock a lost connection's retries wait
    on; ``wakeups``: the wake-up channels between simulated processes (None: no wake-ups —
    the ``NOTIFY`` statements still run, so commits serialise on the server as they do).
    """

    pool: Pool
    clock: Clock
    wakeups: Wakeups | None = None


class Wakeups(Protocol):
    """Wake-up channels between simulated processes (``sim/world.py`` ``SimWakeups``)."""

    def notify(self, channel: Channel) -> None: ...

    def waiter(self, channel: Channel) -> Waiter | None: ...


class PostgresDialect:
    """``sql.Dialect`` for one PostgreSQL database."""

    name = "postgresql"
    resume_scan = True  # claimed rows' index entries stay until VACUUM: start past them

    def __init__(
        self,
        url: str,
        *,
        time_source: TimeSource = "server",
        pool_size: int = 2,
        connect_timeout_s: float = 5.0,
        retry_s: float = 60.0,
        lock_wait_s: float | None = None,
        seams: Seams | None = None,
    ) -> None:
        """``lock_wait_s`` (a scheduler's, half its TTL): the session's ``lock_timeout`` and
        ``idle_in_transaction_session_timeout``, so a leader paused inside its transaction
        loses its session and its locks before a standby's lease is due."""
        url, self.space = split_schema(url)
        self.queries = _queries(self.space)
        self.url, self.time_source, self.retry_s = url, time_source, retry_s
        self.seams = seams
        self._clock: Clock = SystemClock() if seams is None else seams.clock
        self._pool: Pool = (
            _open_pool(url, pool_size, connect_timeout_s, lock_wait_s)
            if seams is None
            else seams.pool
        )
        self._news: set[Channel] = set()

    def transaction(self, fn: Callable[[sql.Conn], T], *, replay: bool = True) -> T:
        """``fn`` in one transaction. A lost connection (or a server shutting down) is retried
        with backoff for ``retry_s``, then ``BackendUnavailable``; a serialization failure or
        deadlock is retried ``CONFLICT_TRIES`` times; any other error is raised at once.
        ``replay=False`` (a worker's batch: ``fn`` runs handlers, whose outside effects must
        not repeat uncounted): neither is retried here, both are ``BackendUnavailable``."""
        return self._retrying(fn, block=True, replay=replay)

    def read(self, fn: Callable[[sql.Conn], T]) -> T:
        """``fn`` with each statement on its own (the connections are in autocommit): at READ
        COMMITTED a transaction block would give its statements no common snapshot anyway,
        and a one-statement read costs one round trip instead of three (BEGIN, COMMIT)."""
        return self._retrying(fn, block=False, replay=True)

    def at_once(self, fn: Callable[[sql.Conn], T]) -> T:
        """In autocommit, as ``read``: a single statement is its own transaction."""
        return self._retrying(fn, block=False, replay=True)

    def _retrying(self, fn: Callable[[sql.Conn], T], *, block: bool, replay: bool) -> T:
        deadline_ms, delay, conflicts = self._clock.monotonic_ms() + self.retry_s * 1000, 0.1, 0
        while True:
            reached = False  # the server gave this attempt a session
            try:
                self._news.clear()
                with self._pool.connection() as conn:
                    reached = True
                    if not block:
                        return fn(cast(sql.Conn, conn))
                    with conn.transaction():
                        result = fn(cast(sql.Conn, conn))
                self._delivered()
                return result
            except psycopg.Error as exc:
                kind = error_kind(exc)
                if not replay and kind in ("connection", "conflict"):
                    reason = urls.scrub((str(exc).strip().splitlines() or [kind])[0], self.url)
                    lost = SessionLost if reached or kind == "conflict" else BackendUnavailable
                    raise lost(
                        f"postgresql {redact(self.url)}: {reason} (the batch was rolled back; "
                        "its messages come back through the queue)"
                    ) from exc
                if kind == "conflict" and conflicts < CONFLICT_TRIES:
                    conflicts += 1
                    self._clock.sleep(0.01 * conflicts)
                    continue
                if kind == "busy":
                    raise BackendBusy(
                        f"postgresql {redact(self.url)}: a lock was not free in time"
                    ) from exc
                if kind != "connection":
                    raise
                if self._clock.monotonic_ms() + delay * 1000 > deadline_ms:
                    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    reason = urls.scrub(reason, self.url)
                    raise BackendUnavailable(f"postgresql {redact(self.url)}: {reason}") from exc
                self._clock.sleep(delay)
                delay = min(2.0, delay * 2)

    def _delivered(self) -> None:
        """After a commit: the simulated processes' wake-ups (real ones went with NOTIFY)."""
        news, self._news = self._news, set()
        if self.seams is not None and self.seams.wakeups is not None:
            for channel in sorted(news):
                self.seams.wakeups.notify(channel)

    def notify(self, c: sql.Conn, channel: Channel) -> None:
        c.execute(wakeups.notify_sql(channel))
        self._news.add(channel)

    def waiter(self, channel: Channel) -> Waiter | None:
        if self.seams is not None:
            return None if self.seams.wakeups is None else self.seams.wakeups.waiter(channel)
        return wakeups.PostgresWaiter(self.url, channel)

    def canceller(self, c: sql.Conn) -> Callable[[], None]:
        """The server cancels the statement (a new connection sends the request)."""
        return cast("psycopg.Connection[Any]", c).cancel_safe

    def is_connection_error(self, exc: BaseException) -> bool:
        return error_kind(exc) == "connection"

    def ints(self, values: Iterable[int]) -> str:
        return "{" + ",".join(map(str, values)) + "}"

    def ids(self, value: Any) -> list[int]:
        return list(value)

    def texts(self, values: Iterable[str]) -> list[str]:
        return list(values)

    def executemany(self, c: sql.Conn, sql: str, rows: Sequence[Mapping[str, Any]]) -> None:
        with cast("psycopg.Connection[Any]", c).cursor() as cur:
            cur.executemany(sql, rows)

    def now(self, c: sql.Conn, caller_ms: int) -> int:
        given = self.given_now(caller_ms)
        return (
            given if given is not None else int(c.execute(self.queries["server_ms"]).fetchone()[0])
        )

    def given_now(self, caller_ms: int) -> int | None:
        if self.time_source == "caller":
            return caller_ms
        if self.seams is not None:
            return self.seams.clock.now_ms()  # the simulated server's clock
        return None

    def schedules_fired(self, c: sql.Conn, rows: Sequence[Mapping[str, Any]]) -> None:
        """One statement for the batch (a round trip a schedule cost 10,000 schedules due in
        one second 0.7 s): the rows of one schedule folded first, as applied in order."""
        c.execute(self.queries["schedules_fired"], {"rows": json.dumps(_fold_fired(rows))})

    def insert_tasks(self, c: sql.Conn, rows: Sequence[base.TaskRow]) -> int:
        """Up to ``FEW_TASKS``: one INSERT from arrays (a ``defer``, a tick's occurrences);
        more: COPY into a temporary table, then insert from it. Duplicate keys skipped."""
        conn = cast("psycopg.Connection[Any]", c)
        if not rows:
            return 0
        if len(rows) <= FEW_TASKS:
            args = {
                "keys": [r[0] for r in rows],
                "tasks": [r[1] for r in rows],
                "payloads": [r[2] for r in rows],
                "triggers": self.ints(r[3] for r in rows),
                "schedules": [r[4] for r in rows],
            }
            return int(conn.execute(self.queries["add_tasks_unnest"], args).rowcount)
        conn.execute(self.queries["add_tasks_tmp"])
        with conn.cursor() as cur:
            with cur.copy(self.queries["add_tasks_copy"]) as copy:
                for row in rows:
                    copy.write_row(row)
            inserted = cur.execute(self.queries["add_tasks_from_tmp"]).rowcount
            cur.execute(self.queries["add_tasks_truncate"])
        return inserted

    def enqueue(
        self, c: sql.Conn, tasks: Sequence[tuple[int, int]], now_ms: int, visible_ms: int
    ) -> None:
        args = {**self._envelopes(tasks, now_ms), "visible": visible_ms}
        c.execute(self.queries["enqueue"], args)

    def _envelopes(self, tasks: Sequence[tuple[int, int]], now_ms: int) -> dict[str, Any]:
        """The arguments ``enqueue`` and ``enqueue_dispatched`` share."""
        return {
            "ids": self.ints(t[0] for t in tasks),
            "attempts": self.ints(t[1] for t in tasks),
            "envelope": ENVELOPE,
            "now": now_ms,
        }

    def add_one(self, c: sql.Conn, task: base.TaskRow) -> tuple[bool, Sequence[Any]] | None:
        """One statement (``add_one_at_once``), its own transaction under ``at_once``: five
        round trips a ``defer`` were one. The holder is read in the statement's snapshot, so
        a key taken by a transaction that committed after it began, or freed by the
        retention, reads as None: the caller tries again with a fresh snapshot."""
        key, name, payload, trigger_ms, schedule = task
        args = {"key": key, "task": name, "payload": payload, "trigger": trigger_ms,
                "schedule": schedule}  # fmt: skip
        row = c.execute(self.queries["add_one_at_once"], args).fetchone()
        if row is None:
            return None
        if row[0]:
            self._news.add("due")
        return bool(row[0]), row[1:-1]  # (the last column: the NOTIFYs sent)

    def enqueue_dispatched(
        self, c: sql.Conn, tasks: Sequence[tuple[int, int]], now_ms: int
    ) -> None:
        """One statement (``enqueue_dispatched``): three round trips a dispatch were one."""
        args = {**self._envelopes(tasks, now_ms), "n": len(tasks)}
        c.execute(self.queries["enqueue_dispatched"], args)
        self._news.add("queued")

    def run_script(self, c: sql.Conn, script: str) -> None:
        if any(not line.lstrip().startswith("--") for line in script.splitlines() if line.strip()):
            c.execute(script)  # (one of comments alone records a step: nothing to run)

    def create_namespace(self, c: sql.Conn) -> None:
        """cronlab's schema, if the database has none of that name yet (one a DBA made for a
        role without CREATE on the database is used as it is)."""
        if c.execute(self.queries["schema_exists"], {"schema": self.space.name}).fetchone():
            return
        c.execute(f"CREATE SCHEMA {self.space.name}")  # a checked plain name

    def move_beside(self, c: sql.Conn, tables: Iterable[str]) -> None:
        """A store of cronlab before 0.3 (its tables in the connection's current schema,
        alone in the database) → its tables (their sequences and indexes go with them) and
        its trigger function moved into this store's schema; the function, written then
        with bare names, reads them there by its own search path."""
        schema = self.space.name  # a checked plain name (namespace.postgres_schema)
        self.create_namespace(c)
        for bare in tables:
            c.execute(f"ALTER TABLE {bare} SET SCHEMA {schema}")
        c.execute(f"ALTER FUNCTION cronlab_list_pending() SET SCHEMA {schema}")
        c.execute(f"ALTER FUNCTION {schema}.cronlab_list_pending() SET search_path = {schema}")

    def describe(self) -> str:
        return f"postgresql {redact(self.url)}"

    def server_ms(self) -> int:
        """The server's clock, epoch milliseconds (what lease expiry is judged by)."""
        if self.seams is not None:
            return self.seams.clock.now_ms()
        return self.read(lambda c: int(c.execute(self.queries["server_ms"]).fetchone()[0]))

    def missing(self) -> bool:
        """A server's database does not vanish under a session (a dropped one is an error)."""
        return False

    def close(self) -> None:
        self._pool.close()


class Options(TypedDict, total=False):
    """``PostgresDialect``'s keyword arguments, as ``PostgresStore`` passes them on."""

    time_source: TimeSource
    pool_size: int
    connect_timeout_s: float
    retry_s: float
    lock_wait_s: float | None
    seams: Seams | None


class PostgresStore(sql.SqlStore):
    """The SQL store on a PostgreSQL database."""

    def __init__(
        self,
        url: str,
        *,
        create: bool = True,
        read_only: bool = False,
        fencing: Fencing = "lease",
        **options: Unpack[Options],
    ) -> None:
        self.url = url
        self.postgres = PostgresDialect(url, **options)
        super().__init__(self.postgres, create=create, read_only=read_only, fencing=fencing)

    def server_ms(self) -> int:
        """The server's clock, epoch milliseconds."""
        return self.postgres.server_ms()


def _open_pool(
    url: str, size: int, timeout_s: float, lock_wait_s: float | None
) -> ConnectionPool[Any]:
    """A pool whose first connection is up, or a one-line ``BackendUnavailable``."""
    _probe(url, timeout_s)  # says why (refused, unknown database …) instead of a pool timeout
    kwargs: dict[str, Any] = {"connect_timeout": max(1, int(timeout_s)), "autocommit": True}
    if lock_wait_s is not None:
        ms = max(1, int(lock_wait_s * 1000))
        kwargs["options"] = f"-c lock_timeout={ms} -c idle_in_transaction_session_timeout={ms}"
    pool: ConnectionPool[Any] = ConnectionPool(
        url, min_size=1, max_size=max(1, size), timeout=timeout_s, kwargs=kwargs, open=False
    )
    try:
        pool.open(wait=True, timeout=timeout_s)
    except (PoolTimeout, psycopg.Error) as exc:
        pool.close()
        raise BackendUnavailable(
            f"postgresql {redact(url)} unreachable within {timeout_s:g} s ({type(exc).__name__})"
        ) from exc
    return pool


def _probe(url: str, timeout_s: float) -> None:
    """libpq's own reason, with whatever of the URL it echoes redacted: a URL it cannot
    parse (ProgrammingError) is the user's mistake, a server that does not answer is not."""
    try:
        psycopg.connect(url, connect_timeout=max(1, int(timeout_s))).close()
    except psycopg.Error as exc:
        text = str(exc).strip()
        reason = urls.scrub(text.splitlines()[0], url) if text else type(exc).__name__
        if isinstance(exc, psycopg.ProgrammingError):
            why = reason.partition(" in URI: ")[0]  # the URL again, already shown
            raise ConfigError(f"malformed PostgreSQL URL {redact(url)!r}: {why}") from None
        raise BackendUnavailable(f"postgresql {redact(url)} unreachable: {reason}") from exc


def split_schema(url: str) -> tuple[str, namespace.Namespace]:
    """``url`` without cronlab's own ``schema`` parameter (libpq knows no such name), and
    the namespace it chooses (``cronlab`` without one). Given twice: a ConfigError."""
    try:
        parts = urlsplit(url)
    except ValueError:  # (a malformed URL: libpq's own probe says why, redacted)
        return url, namespace.postgres_schema(None)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    chosen = [value for key, value in pairs if key == "schema"]
    if not chosen:
        return url, namespace.postgres_schema(None)
    if len(chosen) > 1:
        raise ConfigError(f"schema is given {len(chosen)} times in {redact(url)!r}: give it once")
    rest = urlencode([(k, v) for k, v in pairs if k != "schema"])
    return urlunsplit(parts._replace(query=rest)), namespace.postgres_schema(chosen[0])


@functools.cache
def _queries(space: namespace.Namespace) -> dict[str, str]:
    return space.queries(BARE)


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` instead (host, port, user and options kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _fold_fired(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``schedule_fired`` rows, one per schedule, with the effect of applying them in order:
    the latest fire, the last next fire and reason given, the counts summed."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        was = out.get(r["name"])
        if was is None:
            out[r["name"]] = dict(r)
            continue
        was["fire"] = max(was["fire"], r["fire"])
        was["next"] = r["next"]
        was["reason"] = r["reason"] if r["reason"] is not None else was["reason"]
        was["missed"] += r["missed"]
        was["skipped"] += r["skipped"]
    return list(out.values())
