"""The simulator on a real PostgreSQL server: each simulated process has a connection of its
own, and the seed decides whose next statement goes.

A statement is a *point* of the world (``World.point``: a switch, a kill, a pause may happen
there) before it is sent. Once sent, the process waits for the server's answer — for real,
briefly, since nothing else runs meanwhile — unless the server says the statement waits for a
lock another session holds (``pg_stat_activity.wait_event_type = 'Lock'`` with blockers):
then the process is *blocked* (``Proc.waiting_db``) and the others go on. After every
statement that may release locks (COMMIT, ROLLBACK, ROLLBACK TO SAVEPOINT, a session ended,
a statement outside a transaction block: the claim's) each blocked process is settled —
answered, or still blocked — before anyone else runs, so who gets a lock, and when, is a
function of the seed.

The server's own timers run on real time, so the simulator keeps them in simulated time:
sessions run with ``lock_timeout``, ``statement_timeout``, ``idle_in_transaction_session_
timeout`` and (in effect) ``deadlock_timeout`` off, and the world applies them itself — a
scheduler's lock wait past its ``lock_wait`` is cancelled as ``LockNotAvailable``, its
session idle in a transaction past it is terminated, a wait that closes a cycle is cancelled
as ``DeadlockDetected`` (the newest waiter, as PostgreSQL's own detector picks it). A killed
process's session is terminated (``pg_terminate_backend``) and waited for, as a dead
client's is when the server notices. Commit order is recorded per transaction id: the
checker's turns and times come from it.

Faults of the server's own, drawn by ``scenario`` (``SERVER_KINDS``): a session terminated
mid-transaction or between statements; a statement failing with a serialization failure, a
deadlock or a statement timeout (the server really raises it, and aborts the transaction).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import random
import select
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import errors, waiting
from psycopg.rows import TupleRow

from cronlab import urls
from cronlab.exceptions import ConfigError
from cronlab.sim import scenario as sc
from cronlab.sim.run import Outcome, Read, _Run
from cronlab.sim.world import Killed, Proc, SimWakeups, TrueClock, World
from cronlab.stores.postgres import QUERIES, PostgresStore, with_database
from cronlab.stores.postgres import Seams as PgSeams
from cronlab.stores.sql import namespace
from cronlab.urls import redact

OWN = namespace.postgres_schema(None)  # where a scratch database's store keeps its tables
PREFIX = "cronlab_verify_"  # the scratch databases' names: PREFIX + run id + random
RUN_VAR = "CRONLAB_VERIFY_RUN"
# Server faults a statement can be replaced by: the server raises it and aborts the transaction.
RAISED = {"serialization": "40001", "deadlock": "40P01", "statement_timeout": "57014"}
SESSION = (
    "SET lock_timeout = 0",
    "SET statement_timeout = 0",
    "SET idle_in_transaction_session_timeout = 0",
)


class SimCursor(psycopg.Cursor[TupleRow]):
    """A cursor whose statements are the world's points."""

    def execute(self, query: Any, params: Any = None, **kw: Any) -> Any:
        link = _link(self.connection, quiet_too=False)
        if link is not None:
            query = link.before(_text(query), query)
        try:
            return super().execute(query, params, **kw)
        finally:
            if link is not None:
                link.after(_text(query))

    def executemany(self, query: Any, params_seq: Any, **kw: Any) -> None:
        link = _link(self.connection, quiet_too=False)
        if link is not None:
            query = link.before(_text(query), query)
        try:
            super().executemany(query, params_seq, **kw)
        finally:
            if link is not None:
                link.after(_text(query))

    def copy(self, statement: Any, params: Any = None, **kw: Any) -> Any:
        link = _link(self.connection, quiet_too=False)
        if link is not None:
            link.before(_text(statement), statement)
        return super().copy(statement, params, **kw)


class SimConnection(psycopg.Connection[TupleRow]):
    """One simulated process's connection: its waits never block the world."""

    link: Link | None = None

    def wait(self, gen: Any, interval: float = 0.0, timeout: float | None = None) -> Any:
        link = self.link
        if link is None:
            return super().wait(gen, interval, timeout)
        return link.drive(self, gen)

    def transaction(self, savepoint_name: str | None = None, force_rollback: bool = False) -> Any:
        inner = super().transaction(savepoint_name, force_rollback)
        return inner if self.link is None else _Transaction(self.link, inner)


class _Transaction:
    """psycopg's transaction block with the world's points at BEGIN, COMMIT and ROLLBACK."""

    def __init__(self, link: Link, inner: Any) -> None:
        self.link, self.inner = link, inner

    def __enter__(self) -> Any:
        self.link.point("BEGIN")
        found = self.inner.__enter__()
        self.link.in_transaction = True
        return found

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> Any:
        if kind is None:
            try:
                xid = self.link.committing()
            except BaseException as failed:  # killed, or the server gone, at COMMIT
                return self._roll_back(type(failed), failed, failed.__traceback__, reraise=True)
            try:
                done = self.inner.__exit__(None, None, None)
            finally:
                self.link.ended()
            self.link.committed(xid)
            return done
        return self._roll_back(kind, exc, tb)

    def _roll_back(self, kind: Any, exc: Any, tb: Any, reraise: bool = False) -> Any:
        killed: Killed | None = None
        try:
            self.link.point("ROLLBACK")
        except Killed as k:  # killed right there: its transaction rolls back all the same
            killed = k
        try:
            done = self.inner.__exit__(kind, exc, tb)
        finally:
            self.link.ended()
            self.link.sim.settle()
        if killed is not None:
            raise killed
        if reraise:
            raise exc
        return done


@dataclass(eq=False)
class Link:
    """A simulated process's session: its connection, its server pid, its emulated timers."""

    sim: PgSim
    proc: Proc
    conn: SimConnection
    pid: int
    lock_wait_ms: int | None  # lock_timeout and idle-in-transaction, as ``lock_wait_s`` sets
    idle_ms: int | None = None  # an idle-in-transaction limit of the server's own (``idle``)
    in_transaction: bool = False
    cancel_as: type[Exception] | None = None  # what a cancel the world sent stands for
    quiet: bool = False  # the simulator's own statement: not a point
    statement: str = ""  # the newest one sent

    def point(self, label: str) -> None:
        self.proc.idle_deadline_ms = None
        self.sim.world.point(label)

    def before(self, text: str, query: Any) -> Any:
        """The point before a statement; the statement, or the server fault replacing it."""
        self.point(text)
        self.statement = text
        fault = self.sim.server_fault(self.proc)
        if fault is not None:
            self.proc.faulted = True  # what its transaction loses is the fault's doing
            self.sim.world.log(f"{self.proc.name}: the server raises {fault} at {text[:40]}")
            code = RAISED[fault]
            return f"DO $$BEGIN RAISE EXCEPTION 'simulated {fault}' USING ERRCODE = '{code}'; END$$"
        return query

    def after(self, text: str) -> None:
        """A statement answered (or failed): idle in its transaction from now on. A leader
        that has just read the schedules it plans lets the operators' commands waiting for
        that moment run first (``PgRun._operator``)."""
        if text.startswith("ROLLBACK") or not self.in_transaction:
            self.sim.settle()  # (outside a transaction block a statement commits as it ends)
        self._idle()
        if text == QUERIES["schedules_get_many"] and self.sim.waiting_ops:
            self.sim.mid_dispatch(self.proc)

    def committing(self) -> int | None:
        """The point before COMMIT; the transaction's id (None: it wrote nothing)."""
        self.point("COMMIT")
        self.proc.idle_deadline_ms = None
        self.quiet = True
        try:
            found = self.conn.execute("SELECT txid_current_if_assigned()").fetchone()
        finally:
            self.quiet = False
        return None if found is None or found[0] is None else int(found[0])

    def committed(self, xid: int | None) -> None:
        if xid is not None:
            self.sim.commits[xid] = (self.sim.run._turn(), self.sim.world.now_ms)
        self.sim.settle()

    def ended(self) -> None:
        self.in_transaction = False
        self.proc.idle_deadline_ms = None

    def _idle(self) -> None:
        limits = [x for x in (self.lock_wait_ms, self.idle_ms) if x is not None]
        if self.in_transaction and limits:
            self.proc.idle_deadline_ms = self.sim.world.now_ms + min(limits)

    def drive(self, conn: SimConnection, gen: Any) -> Any:
        """psycopg's generator of one exchange with the server, driven without blocking the
        world: a statement that waits for a lock blocks this process alone."""
        fileno = conn.pgconn.socket
        try:
            state = next(gen)
            while True:
                state = gen.send(self._ready(fileno, state))
        except StopIteration as done:
            # Answered: a cancel sent for it came too late (its lock was granted first, by a
            # commit between its timeout and the cancel) and the server dropped it, so none is
            # pending — left set, it would hide this session's next lock wait for ever
            # (PostgreSQL seed 4 hung so once the claim became a statement of its own).
            self.cancel_as = None
            return done.value
        except errors.QueryCanceled as exc:
            cancel_as, self.cancel_as = self.cancel_as, None
            if cancel_as is None:
                raise
            raise cancel_as(f"{exc} (simulated: {cancel_as.__name__})") from None

    def _ready(self, fileno: int, state: int) -> int:
        want_r, want_w = state & waiting.WAIT_R, state & waiting.WAIT_W
        while True:
            r, w, _ = select.select(
                [fileno] if want_r else [], [fileno] if want_w else [], [], 0.002
            )
            if r or w:
                return (waiting.READY_R if r else 0) | (waiting.READY_W if w else 0)
            if want_r and self.cancel_as is None and self.sim.lock_blocked(self.pid):
                self._blocked()

    def _blocked(self) -> None:
        """This statement waits for a lock: the others run until it is settled."""
        proc, world = self.proc, self.sim.world
        proc.waiting_db, proc.timed_out = True, False
        proc.lock_deadline_ms = (
            None if self.lock_wait_ms is None else world.now_ms + self.lock_wait_ms
        )
        world.log(f"  {proc.name} waits for a lock at {' '.join(self.statement.split())[:60]}")
        if self.sim.closes_cycle(self):
            world.log(f"  {proc.name}'s wait closes a cycle: the server cancels it (deadlock)")
            self.cancel_as = errors.DeadlockDetected
            self.sim.cancel(self.pid)
            proc.waiting_db = False
            return
        try:
            world.wait_blocked(proc)
        except Killed:
            self.sim.terminate(self)
            raise
        finally:
            proc.lock_deadline_ms = None
        if proc.timed_out:
            proc.timed_out = False
            self.cancel_as = errors.LockNotAvailable
            self.sim.cancel(self.pid)


@dataclass(eq=False)
class PgSim:
    """The server side of one simulated run: its sessions, and an admin session of its own."""

    world: World
    run: Any  # sim.run._PgRun: turn(), server_fault()
    url: str
    admin: psycopg.Connection[TupleRow]
    links: list[Link] = field(default_factory=list)
    commits: dict[int, tuple[int, int]] = field(default_factory=dict)  # xid: (turn, at ms)
    spares: list[SimConnection] = field(default_factory=list)  # idle sessions to take over
    waiting_ops: list[Callable[[], None]] = field(default_factory=list)  # mid_dispatch

    def connect(self, proc: Proc, lock_wait_ms: int | None, idle_ms: int | None = None) -> Link:
        """A new session for ``proc`` (a point; refused during an outage)."""
        self.world.point("CONNECT")
        if self.world.in_outage():
            raise psycopg.OperationalError("simulated outage: connection refused")
        conn = self._session()
        link = Link(sim=self, proc=proc, conn=conn, pid=conn.info.backend_pid,
                    lock_wait_ms=lock_wait_ms, idle_ms=idle_ms)  # fmt: skip
        conn.link = link
        self.links.append(link)
        return link

    def mid_dispatch(self, leader: Proc) -> None:
        """Start the waiting operators' commands now, and let them run before ``leader`` goes
        on (it sleeps a millisecond): a deploy, pause or backfill lands in the middle of the
        leader's planning, between its read of the schedules and its writes."""
        starts, self.waiting_ops = self.waiting_ops, []
        self.world.log(f"  {len(starts)} operator command(s) land in {leader.name}'s planning")
        for start in starts:
            start()
        leader.wake_ms = self.world.now_ms + 1
        self.world.wait_blocked(leader)

    def _session(self) -> SimConnection:
        """An idle session a process that ended left (as a new one: none of its state
        matters), or a new one — a backend's start costs milliseconds, a seed makes dozens."""
        while self.spares:
            conn = self.spares.pop()
            if not conn.closed and not conn.broken:
                return conn
        conn = SimConnection.connect(
            self.url, cursor_factory=SimCursor, prepare_threshold=None, autocommit=True
        )
        for setting in SESSION:
            conn.execute(setting)
        return conn

    def give_back(self, link: Link) -> None:
        """``link``'s process ended with its session idle: another may take it over."""
        link.conn.link = None
        link.proc.idle_deadline_ms = None
        self.links.remove(link)
        self.spares.append(link.conn)

    def server_fault(self, proc: Proc) -> str | None:
        found: str | None = self.run.server_fault(proc)
        return found

    def lock_blocked(self, pid: int) -> bool:
        row = self.admin.execute(
            "SELECT wait_event_type = 'Lock' AND cardinality(pg_blocking_pids(pid)) > 0 "
            "FROM pg_stat_activity WHERE pid = %s",
            (pid,),
        ).fetchone()
        return bool(row and row[0])

    def settle(self) -> None:
        """Each blocked session, answered or still blocked, before anyone runs again."""
        for link in self._live():
            if not link.proc.waiting_db:
                continue
            fileno = link.conn.pgconn.socket
            while True:
                r, _, _ = select.select([fileno], [], [], 0.001)
                if r:
                    link.proc.waiting_db = False
                    break
                if self.lock_blocked(link.pid):
                    break

    def closes_cycle(self, link: Link) -> bool:
        """Does ``link``'s wait close a cycle of waits (a deadlock)?"""
        by_pid = {x.pid: x for x in self._live() if x.proc.waiting_db or x is link}
        edges: dict[int, list[int]] = {}
        for pid in by_pid:
            row = self.admin.execute("SELECT pg_blocking_pids(%s)", (pid,)).fetchone()
            edges[pid] = [b for b in (row[0] if row else []) if b in by_pid]
        seen, todo = set(), list(edges.get(link.pid, []))
        while todo:
            pid = todo.pop()
            if pid == link.pid:
                return True
            if pid not in seen:
                seen.add(pid)
                todo += edges.get(pid, [])
        return False

    def cancel(self, pid: int) -> None:
        self.admin.execute("SELECT pg_cancel_backend(%s)", (pid,))

    def terminate(self, link: Link) -> None:
        """End ``link``'s session on the server, as a dead client's is ended (its transaction
        rolled back, its locks released), and wait until it is gone. A session the server
        already ended (a process killed in a lock wait after ``terminate_all``) is left."""
        if link.conn.closed or link not in self.links:
            return
        link.proc.faulted = True  # what its transaction loses is the fault's doing
        self.admin.execute("SELECT pg_terminate_backend(%s)", (link.pid,))
        while self.admin.execute(
            "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (link.pid,)
        ).fetchone():
            select.select([], [], [], 0.001)
        link.proc.idle_deadline_ms = None
        self.links.remove(link)  # the client finds out at its next read: the server is gone
        # A statement blocked in a lock wait is answered now — its socket closed — as a real
        # client's is at once: once out of ``links`` no settle looks at it again, and the
        # process waited for ever (PostgreSQL seed 1974: an App-API defer blocked when an
        # outage ended every session, the run stuck behind it to its horizon).
        link.proc.waiting_db = False
        self.settle()

    def terminate_all(self) -> None:
        for link in list(self.links):
            self.terminate(link)

    def idle_timeout(self, proc: Proc) -> None:
        """A session idle in its transaction past its deadline: the server ends it."""
        for link in [x for x in self.links if x.proc is proc]:
            self.world.log(f"{proc.name}: the server ends its session idle in a transaction")
            self.terminate(link)

    def _live(self) -> list[Link]:
        return list(self.links)


class SimPool:
    """``postgres.Pool`` for one simulated process: its one session, opened again after it
    was lost."""

    def __init__(
        self, sim: PgSim, proc: Proc, lock_wait_ms: int | None, idle_ms: int | None = None
    ) -> None:
        self.sim, self.proc, self.lock_wait_ms, self.idle_ms = sim, proc, lock_wait_ms, idle_ms
        self.link: Link | None = None

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        link = self.link
        if link is None or link not in self.sim.links or link.conn.closed or link.conn.broken:
            self.close()
            link = self.link = self.sim.connect(self.proc, self.lock_wait_ms, self.idle_ms)
        yield link.conn

    def close(self) -> None:
        link, self.link = self.link, None
        if link is None:
            return
        idle = psycopg.pq.TransactionStatus.IDLE
        if (
            link in self.sim.links
            and not link.conn.broken
            and link.conn.info.transaction_status == idle
        ):
            self.sim.give_back(link)
            return
        if link in self.sim.links:
            self.sim.terminate(link)
        link.conn.link = None
        with contextlib.suppress(psycopg.Error):
            link.conn.close()


class Scratch:
    """A scratch database for one OS process's runs: made once (migrated, with the checker's
    tables), emptied back to that state before each run, dropped at the end."""

    def __init__(self, admin_url: str, setup_sql: str) -> None:
        self.admin_url = admin_url
        self.name = f"{PREFIX}{os.environ.get(RUN_VAR, 'x')}_{uuid.uuid4().hex[:12]}"
        try:
            with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as c:
                c.execute(f'CREATE DATABASE "{self.name}"')
        except psycopg.Error as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ConfigError(
                f"cronlab verify --store {redact(admin_url)}: cannot create a scratch database "
                f"({urls.scrub(reason, admin_url)})"
            ) from None
        self.url = with_database(admin_url, self.name)
        self.spares: list[SimConnection] = []  # sessions the runs share (PgSim.spares)
        self._make(setup_sql)

    def _make(self, setup_sql: str) -> None:
        PostgresStore(self.url, time_source="caller").close()  # migrated as a process would
        with psycopg.connect(self.url, autocommit=True) as c:
            c.execute(setup_sql)
            self.tables = [
                f'"{r[0]}"."{r[1]}"'
                for r in c.execute(
                    "SELECT schemaname, tablename FROM pg_tables"
                    " WHERE schemaname IN ('public', %s) ORDER BY 1, 2",
                    (OWN.name,),
                )
            ]
            for t in self.tables:  # VACUUM at random times would reorder rows: never
                c.execute(f"ALTER TABLE {t} SET (autovacuum_enabled = false)")
            # A scratch database outlives no crash: its commits need not wait for the disk
            # (locks, visibility and ordering are the same).
            c.execute(f'ALTER DATABASE "{self.name}" SET synchronous_commit = off')
            self.rows = {t: c.execute(f"SELECT * FROM {t}").fetchall() for t in self.tables}

    def reset(self) -> None:
        """Every table as it was made; sequences from 1."""
        with psycopg.connect(self.url, autocommit=True) as c, c.transaction():
            listed = ", ".join(self.tables)
            c.execute(f"TRUNCATE {listed} RESTART IDENTITY")
            for t, rows in self.rows.items():
                if rows:
                    marks = ", ".join(["%s"] * len(rows[0]))
                    c.cursor().executemany(f"INSERT INTO {t} VALUES ({marks})", rows)

    def drop(self) -> None:
        for conn in self.spares:
            with contextlib.suppress(psycopg.Error):
                conn.close()
        with psycopg.connect(self.admin_url, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def _link(conn: Any, quiet_too: bool = True) -> Link | None:
    """The session's link; None for a connection the simulator does not drive, or (unless
    ``quiet_too``) for the simulator's own statements on it."""
    found: Link | None = getattr(conn, "link", None)
    if found is not None and found.quiet and not quiet_too:
        return None
    return found


def _text(query: Any) -> str:
    if isinstance(query, bytes):
        return query.decode(errors="replace")
    return query if isinstance(query, str) else str(query)


# -- one run on the server -----------------------------------------------------------------

SETUP_SQL = OWN.sql("""
CREATE TABLE sim_effects (
  key TEXT, task_id BIGINT, attempt INTEGER, inv INTEGER, at_ms BIGINT, true_ms BIGINT, task TEXT,
  due_ms BIGINT, row_no BIGINT
);
CREATE TABLE sim_rows (row_no BIGSERIAL PRIMARY KEY, task_id BIGINT);
CREATE FUNCTION sim_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO sim_rows (task_id) VALUES (NEW.id); RETURN NEW; END $$;
CREATE TRIGGER sim_row AFTER INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION sim_row();
CREATE FUNCTION sim_effect_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  NEW.row_no := (SELECT max(row_no) FROM sim_rows WHERE task_id = NEW.task_id); RETURN NEW; END $$;
CREATE TRIGGER sim_effect_row BEFORE INSERT ON sim_effects FOR EACH ROW
  EXECUTE FUNCTION sim_effect_row();
CREATE TABLE sim_failures (key TEXT, task_id BIGINT, outcome TEXT, error TEXT, attempt INTEGER);
CREATE FUNCTION sim_failure() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO sim_failures VALUES ((SELECT idempotency_key FROM tasks WHERE id = NEW.task_id),
    NEW.task_id, NEW.outcome, NEW.error, NEW.attempt);
  RETURN NEW; END $$;
CREATE TRIGGER sim_failure AFTER INSERT ON executions FOR EACH ROW
  WHEN (NEW.outcome IN ('error', 'failed')) EXECUTE FUNCTION sim_failure();
CREATE TABLE sim_dropped (key TEXT, trigger_ms BIGINT, xid BIGINT);
CREATE FUNCTION sim_drop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO sim_dropped VALUES (OLD.idempotency_key, OLD.trigger_ms, txid_current());
  RETURN OLD; END $$;
CREATE TRIGGER sim_drop AFTER DELETE ON tasks FOR EACH ROW
  WHEN (OLD.status = 'PENDING') EXECUTE FUNCTION sim_drop();
CREATE TABLE sim_pruned (key TEXT, status TEXT, trigger_ms BIGINT, xid BIGINT, row_no BIGINT);
CREATE FUNCTION sim_prune() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO sim_pruned VALUES (OLD.idempotency_key, OLD.status, OLD.trigger_ms,
    txid_current(), (SELECT max(row_no) FROM sim_rows WHERE task_id = OLD.id));
  RETURN OLD; END $$;
CREATE TRIGGER sim_prune AFTER DELETE ON tasks FOR EACH ROW
  WHEN (OLD.status <> 'PENDING') EXECUTE FUNCTION sim_prune();
CREATE TABLE sim_alerts (schedule TEXT, kind TEXT, subject TEXT, xid BIGINT);
CREATE FUNCTION sim_alert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO sim_alerts VALUES (NEW.schedule, NEW.kind, NEW.subject, txid_current());
  RETURN NEW; END $$;
CREATE TRIGGER sim_alert AFTER INSERT ON alerts FOR EACH ROW EXECUTE FUNCTION sim_alert();
CREATE TABLE sim_dispatched (key TEXT, xid BIGINT);
CREATE FUNCTION sim_dispatch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO sim_dispatched VALUES (NEW.idempotency_key, txid_current()); RETURN NEW; END $$;
CREATE TRIGGER sim_dispatch AFTER UPDATE OF status ON tasks FOR EACH ROW
  WHEN (OLD.status = 'PENDING' AND NEW.status = 'DISPATCHED') EXECUTE FUNCTION sim_dispatch();
""")
_SCRATCH: dict[str, Scratch] = {}


def simulate(s: Any, store: str) -> Any:
    """``run.simulate`` on the PostgreSQL server ``store`` names (a scratch database of its
    own per OS process, emptied before each run)."""
    scratch = _SCRATCH.get(store)
    if scratch is None:
        scratch = _SCRATCH[store] = Scratch(store, SETUP_SQL)
    return PgRun(s, scratch).go()


def drop_scratch() -> None:
    """Drop this process's scratch databases."""
    for scratch in _SCRATCH.values():
        with contextlib.suppress(psycopg.Error):
            scratch.drop()
    _SCRATCH.clear()


@contextlib.contextmanager
def scratch_run(admin_url: str | None) -> Iterator[None]:
    """Around a ``cronlab verify`` run: the scratch databases its processes make carry one
    run id (``RUN_VAR``), and every one of them is dropped at the end, whatever became of the
    process that made it."""
    if admin_url is None:
        yield
        return
    run_id = uuid.uuid4().hex[:8]
    os.environ[RUN_VAR] = run_id
    try:
        yield
    finally:
        drop_scratch()
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as c:
            names = c.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s",
                (f"{PREFIX}{run_id}_%",),
            ).fetchall()
            for (name,) in names:
                c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class PgRun(_Run):
    """``run._Run`` on a PostgreSQL server: a server always judges by its own clock."""

    HOLD_POINT = "BEGIN"  # a transaction block's start (a claim is a statement of its own)

    def __init__(self, s: sc.Scenario, scratch: Scratch) -> None:
        super().__init__(dataclasses.replace(s, server_clock=True), None)  # type: ignore[arg-type]
        if self.wakeups is None:  # a server's processes always have LISTEN/NOTIFY wake-ups
            lossless = sc.Wakeups(lose=0.0, delay_ms=0, twice=0.0)
            self.wakeups = SimWakeups(self.world, lossless, s.seed)
        # Sessions interleave statement by statement: a seed switches processes at a point
        # with a probability of its own (the SQLite runs keep 0.3, so their seeds replay)
        interleave = random.Random(f"{s.seed}:interleave")
        self.world.switch_p = interleave.choice((0.3, 0.6, 0.9))
        self.world.favour = interleave.choice((None, 0.5, 0.9))
        # In half the seeds an operator's command (a redeploy, pause, resume, backfill, an App
        # sync) lands in the middle of the leader's planning, the race of bugs 3 and 4
        self.mid_dispatch = interleave.random() < 0.5
        self.scratch = scratch
        self.pg: PgSim | None = None
        self.world.outage_error = lambda: psycopg.OperationalError(
            "simulated outage: the server is unreachable"
        )
        self.world.on_idle_timeout = self._idle_timeout
        self.world.renames.append((scratch.name, "cronlab_verify"))
        self.world.quiet.add(QUERIES["queue_any_visible"])

    def _idle_timeout(self, proc: Proc) -> None:
        assert self.pg is not None
        self.pg.idle_timeout(proc)

    def server_fault(self, proc: Proc) -> str | None:
        found: str | None = self.world.due_fault(proc)
        return found

    def _operator(self, what: str, act: Callable[[Any], None], again: bool = False) -> None:
        """As ``_Run._operator``; with ``mid_dispatch``, a command that changes schedules
        starts as the leader has just read the schedules it plans (or after 2 s without one)."""
        moving = what.split()[0] in ("redeploy", "pause", "resume", "backfill", "api")
        if again or not self.mid_dispatch or not moving or self.pg is None:
            super()._operator(what, act, again)
            return
        self.operators += 1  # (counted now: the run's end waits for it)
        started: list[bool] = []

        def start() -> None:
            if not started:
                started.append(True)
                super(PgRun, self)._operator(what, act, True)

        self.pg.waiting_ops.append(start)
        self.world.at(self.world.now_ms + 2_000, start)

    def _arm(self, f: sc.Fault) -> None:
        """A redeploy drawn on a whole second comes as one of the schedule's occurrences falls
        due (when the leader plans it: the race of bug 4); elsewhere as drawn."""
        every = self.s.every_s * 1000
        if f.kind == "redeploy" and f.at_ms % 1000 == 0:
            f = dataclasses.replace(f, at_ms=f.at_ms - f.at_ms % every)
        super()._arm(f)

    def _terminate(self, name: str) -> None:
        assert self.pg is not None
        proc = self._live(name)
        if proc is None:
            return
        for link in [x for x in self.pg.links if x.proc is proc]:
            self.world.log(f"the server ends the session of {name}")
            self.pg.terminate(link)

    def _setup_store(self) -> None:
        self.scratch.reset()
        admin = psycopg.connect(self.scratch.url, autocommit=True)
        self.pg = PgSim(
            world=self.world,
            run=self,
            url=self.scratch.url,
            admin=admin,
            spares=self.scratch.spares,
        )
        store = PostgresStore(self.scratch.url, time_source="caller", create=False)
        self._populate(store)
        if any(f.kind == "switch" for f in self.s.faults):
            era = PostgresStore(self.scratch.url, time_source="caller", fencing="epoch")
            era.dispatch_due(self._t0() - 60_000, 1, 5_000)
            era.close()
        store.close()

    def _t0(self) -> int:
        return self.t0

    def _open(self, proc: Proc) -> Any:
        assert self.pg is not None
        lock_wait = sc.TTL_MS // 2 if proc.name.startswith("scheduler") else None
        idle = self.s.idle_ms if proc.name.startswith("worker") else None
        pool = SimPool(self.pg, proc, lock_wait, idle)
        seams = PgSeams(pool=pool, clock=TrueClock(self.world), wakeups=self.wakeups)
        try:
            return PostgresStore(self.scratch.url, seams=seams)
        except BaseException:
            pool.close()
            raise

    def _close(self, store: Any) -> None:
        with contextlib.suppress(psycopg.Error):
            store.close()

    def _outage(self, f: Any) -> None:
        super()._outage(f)
        assert self.pg is not None
        self.pg.terminate_all()  # a server that goes away takes its sessions with it

    def _admin(self) -> Any:
        raise AssertionError("the SQLite admin connection is not used on PostgreSQL")

    def _sql(self, sql: str, params: Any = ()) -> list[Any]:
        assert self.pg is not None
        cur = self.pg.admin.execute(OWN.sql(sql), params)
        return cur.fetchall() if cur.description is not None else []

    def _lose(self, n: int) -> None:
        self._sql(
            "DELETE FROM queue WHERE id IN "
            "(SELECT id FROM queue ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED)",
            (n,),
        )
        self.world.log(f"queue lost {n} envelope(s)")

    def _duplicate(self) -> None:
        self._sql(
            "INSERT INTO queue (task_ids, size, attempt, enqueued_ms) "
            "SELECT task_ids, size, attempt, enqueued_ms FROM queue ORDER BY id LIMIT 1"
        )
        self.world.log("queue delivers an envelope twice")

    def _settled(self) -> bool:
        if self.world.timers or self.ledger.removed_ms is None:
            return False
        open_tasks = self._sql(
            "SELECT count(*) FROM tasks WHERE status IN ('PENDING', 'DISPATCHED')"
        )[0][0]
        queued = self._sql("SELECT count(*) FROM queue")[0][0]
        return bool(open_tasks == 0 and queued == 0)

    def go(self) -> Any:
        quiet = logging.getLogger("psycopg")  # a rollback on a session the server ended
        level, quiet.level = quiet.level, logging.ERROR
        try:
            return super().go()
        finally:
            quiet.setLevel(level)
            if self.pg is not None:
                self.pg.terminate_all()
                self.pg.admin.close()

    def _outcome(self, deadlock: str | None) -> Outcome:
        assert self.pg is not None
        self.pg.terminate_all()
        commits = self.pg.commits

        def turn(xid: int) -> int:
            return commits.get(int(xid), (0, self.t0))[0]

        def at(xid: int) -> int:
            return commits.get(int(xid), (0, self.t0))[1]

        tasks = self._sql("SELECT idempotency_key, status, trigger_ms, last_error FROM tasks")
        effects = self._sql(
            "SELECT key, inv, at_ms, true_ms, task, row_no, due_ms FROM sim_effects"
        )
        dropped = [(k, t, at(x)) for k, t, x in self._sql("SELECT * FROM sim_dropped")]
        pruned = [
            (k, st, t, turn(x), i) for k, st, t, x, i in self._sql("SELECT * FROM sim_pruned")
        ]
        failures = dict(self._sql("SELECT key, count(*) FROM sim_failures GROUP BY key"))
        self._failed_alone(self._sql("SELECT key, attempt FROM sim_failures"))
        alerts = [(a, b, c, at(x)) for a, b, c, x in self._sql("SELECT * FROM sim_alerts")]
        dispatched: dict[str, int] = {}
        dispatched_at: dict[str, int] = {}
        for key, xid in self._sql("SELECT key, xid FROM sim_dispatched"):
            t, when = turn(xid), at(xid)
            dispatched[key] = min(dispatched.get(key, t), t)
            dispatched_at[key] = min(dispatched_at.get(key, when), when)
        rows = [tuple(r) for r in tasks], [tuple(r) for r in effects], dropped, pruned, alerts
        failed = {k: int(n) for k, n in failures.items()}
        return self._ended(Read(*rows, dispatched, dispatched_at, failed), deadlock)
