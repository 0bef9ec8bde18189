"""One seed, one run: the real scheduler, worker, election, handler runner and SQL store code on
a SQLite file, as simulated processes in a ``World``, with the scenario's faults.

What the checker needs is kept as the run goes (``Ledger``): every handler invocation and what
became of it, every dispatch with the epoch it carried, and — through triggers on the task
table — every PENDING row that was ever dropped, and when.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from cronlab import deadlines
from cronlab.core.policy import Schedule
from cronlab.election.store import StoreElector
from cronlab.exceptions import BackendUnavailable, ConfigError, ConflictError
from cronlab.handlers import Registry
from cronlab.ports import LeaseElector, NewTask, Retry
from cronlab.queues.store import StoreQueue
from cronlab.runtime import alerts, cluster
from cronlab.runtime.retention import Retention
from cronlab.runtime.scheduler import Duty, Scheduler, SchedulerConfig
from cronlab.runtime.worker import WOKEN_IDLE_MS, Worker, WorkerConfig
from cronlab.sim import scenario as sc
from cronlab.sim.tasks import (
    API_SCHEDULE,
    SimTasks,
    api_app,
    api_call,
    api_definition,
    handler_of,
    poison_rows,
    seeded_keys,
)
from cronlab.sim.world import (
    Deadlock,
    Killed,
    PointedConnection,
    Proc,
    SimClock,
    SimLock,
    SimWakeups,
    TrueClock,
    World,
)
from cronlab.stores.sql import SqlStore, namespace
from cronlab.stores.sqlite import QUERIES, Seams, SqliteStore

T0 = sc.T0  # where runs start (2026-01-01T00:00:00Z), but the dst kind's (Scenario.t0_ms)
SCHEDULE = "tick"
SETUP_SQL = namespace.SQLITE.sql("""
CREATE TABLE sim_effects (
  key TEXT, task_id INTEGER, attempt INTEGER, inv INTEGER, at_ms INTEGER, true_ms INTEGER,
  task TEXT, due_ms INTEGER
);
CREATE TABLE sim_failures (key TEXT, task_id INTEGER, outcome TEXT, error TEXT, attempt INTEGER);
CREATE TRIGGER sim_failure AFTER INSERT ON executions WHEN new.outcome IN ('error', 'failed')
BEGIN INSERT INTO sim_failures VALUES ((SELECT idempotency_key FROM tasks WHERE id = new.task_id),
  new.task_id, new.outcome, new.error, new.attempt); END;
CREATE TABLE sim_dropped (key TEXT, trigger_ms INTEGER, at_ms INTEGER);
CREATE TRIGGER sim_drop AFTER DELETE ON tasks WHEN old.status = 'PENDING'
BEGIN INSERT INTO sim_dropped VALUES (old.idempotency_key, old.trigger_ms, sim_now()); END;
CREATE TABLE sim_rows (row_no INTEGER PRIMARY KEY AUTOINCREMENT, task_id INTEGER);
CREATE TRIGGER sim_row AFTER INSERT ON tasks
BEGIN INSERT INTO sim_rows (task_id) VALUES (new.id); END;
CREATE TABLE sim_effect_rows (effect INTEGER, row_no INTEGER);
CREATE TRIGGER sim_effect_row AFTER INSERT ON sim_effects BEGIN INSERT INTO sim_effect_rows
  VALUES (new.rowid, (SELECT max(row_no) FROM sim_rows WHERE task_id = new.task_id)); END;
CREATE TABLE sim_pruned (key TEXT, status TEXT, trigger_ms INTEGER, turn INTEGER, row_no INTEGER);
CREATE TRIGGER sim_prune AFTER DELETE ON tasks WHEN old.status != 'PENDING' BEGIN
INSERT INTO sim_pruned VALUES (old.idempotency_key, old.status, old.trigger_ms, sim_turn(),
  (SELECT max(row_no) FROM sim_rows WHERE task_id = old.id)); END;
CREATE TABLE sim_alerts (schedule TEXT, kind TEXT, subject TEXT, at_ms INTEGER);
CREATE TRIGGER sim_alert AFTER INSERT ON alerts
BEGIN INSERT INTO sim_alerts VALUES (new.schedule, new.kind, new.subject, sim_now()); END;
CREATE TABLE sim_dispatched (key TEXT, turn INTEGER, at_ms INTEGER);
CREATE TRIGGER sim_dispatch AFTER UPDATE OF status ON tasks
WHEN old.status = 'PENDING' AND new.status = 'DISPATCHED'
BEGIN INSERT INTO sim_dispatched VALUES (new.idempotency_key, sim_turn(), sim_now()); END;
""")


class OwnConnection(sqlite3.Connection):
    """A connection whose statements name cronlab's tables bare (``namespace``)."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return super().execute(namespace.SQLITE.sql(sql), parameters)


@dataclass
class Invocation:
    """One call of the handler: by whom, on which attempt, and how it ended."""

    id: int
    key: str
    attempt: int
    proc: str
    at_ms: int
    completed: bool = False  # returned normally: its outside effect (an e-mail) happened
    undone_by_engine: bool = False  # completed, then rolled back with no fault to blame
    alone: bool = False  # ... by the ROLLBACK of a transaction that ran it alone
    follow_up: str | None = None  # the key of the follow-up it deferred (ctx.defer)


@dataclass
class Ledger:
    invocations: list[Invocation] = field(default_factory=list)
    dispatches: list[tuple[str, int, int, int]] = field(default_factory=list)  # proc, epoch, n, at
    # Per schedule: (since ms by the authority's clock, the turn it committed at, the definition
    # in force from then on; None while paused or once removed), in the order they committed
    definitions: dict[str, list[tuple[int, int, Schedule | None]]] = field(default_factory=dict)
    # (schedule, from ms, to ms, the turn it committed at) of every backfill
    backfills: list[tuple[str, int, int, int]] = field(default_factory=list)
    # (true ms, the authority clock's offset from then on): where a jump moved it
    offsets: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])
    removed_ms: int | None = None


@dataclass
class Outcome:
    """What a run left: the ledger, the final rows, the trace."""

    scenario: sc.Scenario
    ledger: Ledger
    tasks: list[tuple[str, str, int, str | None]]  # key, status, trigger_ms, last_error
    effects: list[tuple[str, int, int, int, str, int, int]]  # key, inv, at_ms (authority),
    # true_ms, the task that ran, its row, its row's due time (trigger_ms). A row is one
    # insert of a task, numbered by the simulator (``sim_rows``): SQLite gives a deleted
    # row's id to the next insert, so an id names several tasks over a run (seed 5126).
    dropped: list[tuple[str, int, int]]  # key, trigger_ms, dropped at
    pruned: list[tuple[str, str, int, int, int]]  # key, status, trigger_ms, turn, row:
    # finished tasks the retention deleted
    alerts: list[tuple[str, str, str, int]]  # schedule, kind, subject, raised at
    dispatched: dict[str, int]  # key: the turn of its first dispatch
    trace: list[tuple[int, str]]
    end_ms: int
    deadlock: str | None = None
    failures: dict[str, int] = field(default_factory=dict)  # key: its failed attempts
    dispatched_at: dict[str, int] = field(default_factory=dict)  # key: its first dispatch


class Read(NamedTuple):
    """What the checker's tables held at a run's end (``Outcome``'s fields of the same names)."""

    tasks: list[Any]
    effects: list[Any]
    dropped: list[Any]
    pruned: list[Any]
    alerts: list[Any]
    dispatched: dict[str, int]
    dispatched_at: dict[str, int]
    failures: dict[str, int]


def simulate(s: sc.Scenario, store: str | None = None) -> Outcome:
    """Run ``s`` to the end; deterministic for a given scenario. ``store``: a PostgreSQL
    server's URL to run it there (``sim/postgres.py``); None: a SQLite file."""
    real, deadlines.ALARMS.real = deadlines.ALARMS.real, False  # (PostgreSQL seed 15 with
    # rekey: a worker's real alarm struck the App API actor, which runs on the same thread)
    folder = None
    try:
        if store is not None:
            from cronlab.sim import postgres

            found: Outcome = postgres.simulate(s, store)
            return found
        folder = Path(tempfile.mkdtemp(prefix="cronlab-sim-", dir=_fast_tmp()))
        return _Run(s, folder / "sim.db").go()
    finally:
        deadlines.ALARMS.real = real
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def judged(store: Any, asked_ms: int, read: Reading | None = None) -> int:
    """The instant ``store`` judged its last change by (``SqlSchedules.changing``, once it
    held the locks): its server clock's last reading, else the caller's clock as ``read``
    then, else the caller's ``asked_ms``."""
    clock = store.db.seams.clock
    if isinstance(clock, TrueClock) and clock.read_ms is not None:
        return clock.read_ms
    return asked_ms if read is None or read.last is None else read.last


class Reading:
    """The caller's clock handed to a schedule change (``clock=``), keeping its last reading:
    the instant the change was judged by once it held the locks."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock: Callable[[], int] = clock
        self.last: int | None = None

    def __call__(self) -> int:
        read = self.last = self.clock()
        return read


class _Run:
    """One run. The lab's runs (``lab/simulated.py``) change what the hooks below return: the
    processes' configs, the elector, when a dead process comes back, how long the run lasts."""

    # The point where a process holds no lock and is about to write (``Fault.unlocked``):
    # just before SQLite's one write lock is taken.
    HOLD_POINT = "LOCK"

    def __init__(self, s: sc.Scenario, path: Path) -> None:
        self.s, self.path = s, path
        self.world = World(s.seed, s.t0_ms)
        self.t0 = s.t0_ms
        self.ledger = Ledger()
        self.tx_invs: dict[str, list[Invocation]] = {}
        self.restarts = 0
        self.operators = 0  # operator commands under way
        self.turns = 0  # commits the checker orders (sim_turn)
        self.defined: dict[str, Schedule] = {}  # the definition each schedule has now
        self.paused: set[str] = set()
        self.removed: set[str] = set()
        self.wakeups: SimWakeups | None = (
            None if s.wakeups is None else SimWakeups(self.world, s.wakeups, s.seed)
        )
        self.stopping = False
        self.tasks = SimTasks(self)
        self.world.on_point.append(self._watch_transactions)
        self.world.quiet.add(QUERIES["queue_any_visible"])

    # -- setup -------------------------------------------------------------------------------

    def go(self) -> Outcome:
        with seeded_keys(self.s.seed):
            return self._go()

    def _go(self) -> Outcome:
        self._setup_store()
        for i in range(self.s.replicas):
            self._start(f"scheduler-{i}", self._scheduler_body(i))
        for i in range(self.s.workers):
            self._start(f"worker-{i}", self._worker_body(i))
        for fault in self.s.faults:
            self._arm(fault)
        if self.s.api is not None:
            for i, call in enumerate(self.s.api.calls):
                self.world.at(self.t0 + call.at_ms, partial(self._api_call, call, i))
        self._plan_operator()
        deadlock = None
        try:
            self._run_until_settled()
        except Deadlock as exc:  # a stuck world is a finding, not a crash
            deadlock = str(exc)
        self.stopping = True
        self.world.shutdown()
        return self._outcome(deadlock)

    def _plan_operator(self) -> None:
        for name in self.s.schedule_names():
            self.world.at(self.t0 + sc.WORK_END_MS + 500, partial(self._remove_schedule, name))

    def make_scheduler(self, cfg: SchedulerConfig, **parts: Any) -> Scheduler:
        """The engine's scheduler, as ``cronlab scheduler`` runs it (the lab runs its own)."""
        return Scheduler(cfg, **parts)

    def scheduler_config(self, index: int) -> SchedulerConfig:
        return SchedulerConfig(replica=index, ttl_ms=sc.TTL_MS, scan_ms=sc.SCAN_MS, batch=50)

    def worker_config(self, index: int) -> WorkerConfig:
        retry = Retry(max_attempts=sc.MAX_ATTEMPTS, base_ms=500)
        return WorkerConfig(index=index, batch=8, visibility_ms=sc.VISIBILITY_MS, retry=retry)

    def elector(self, store: SqliteStore, clock: SimClock) -> LeaseElector:
        return StoreElector(store, clock)

    def restart_ms(self, name: str) -> int | None:
        """How long the supervisor waits to start a dead process again (None: never)."""
        return sc.RESTART_MS

    def horizon_ms(self) -> int:
        return sc.horizon_ms(self.s)

    def _setup_store(self) -> None:
        self.path.write_bytes(_template())
        store = SqliteStore(self.path)
        conn = store.sqlite.conn
        conn.create_function("sim_now", 0, self._authority, deterministic=False)
        conn.create_function("sim_turn", 0, self._turn, deterministic=False)
        self._populate(store)
        if any(f.kind == "switch" for f in self.s.faults):
            self._earlier_etcd_era(store)
        store.close()

    def _populate(self, store: SqlStore) -> None:
        """The scenario's jobs and schedules, written before any process starts."""
        store.add_tasks(
            NewTask(j.key, handler_of(j), self.t0 + j.due_ms, json.dumps(j.payload()))
            for j in self.s.jobs
        )
        if self.s.poison:
            store.add_tasks(poison_rows(self.t0 + 1_000))
        if self.s.api is not None:
            api_app(store, lambda: self.t0, 1).sync(store)
            self.defined[API_SCHEDULE] = api_definition(1)
            self._note(API_SCHEDULE, self.t0, 0)
        rules = [
            sc.Rule(
                name=SCHEDULE,
                every_s=self.s.every_s,
                catchup=self.s.catchup,
                overlap=self.s.overlap,
            ),
            *self.s.rules,
        ]
        for rule in rules:
            self.defined[rule.name] = self._definition(rule.every_s, rule)
            store.put_schedule(self.defined[rule.name], self.t0, replace=True)
            self._note(rule.name, self.t0, 0)

    def _earlier_etcd_era(self, store: SqliteStore) -> None:
        """What a leader elected by etcd leaves in the store: a fence raised to its revision."""
        era = SqliteStore(self.path, fencing="epoch")
        era.sqlite.conn.create_function("sim_now", 0, self._authority)
        era.sqlite.conn.create_function("sim_turn", 0, self._turn)
        era.dispatch_due(self.t0 - 60_000, 1, 5_000)
        era.close()
        del store

    def _definition(self, every_s: int, rule: sc.Rule | None = None) -> Schedule:
        """A schedule's definition (the tick's by default) firing every ``every_s`` seconds."""
        rule = rule or sc.Rule(
            name=SCHEDULE, every_s=every_s, catchup=self.s.catchup, overlap=self.s.overlap
        )
        duties = self.s.duties
        extra: dict[str, Any] = {}
        if duties is not None:
            extra = {
                "catchup_window_ms": duties.window_ms,
                "alert_after_ms": duties.alert_after_ms,
                "alert_on_failures": duties.failures,
            }
        if self.s.follow_ms is not None:
            extra["payload"] = {"follow_ms": self.s.follow_ms}
        return Schedule(
            name=rule.name,
            cron=f"* {self.s.hours} * * * */{every_s}",  # seconds last (hours: ``dst``)
            tz=self.s.tz,
            task="effect",
            catchup=rule.catchup,  # type: ignore[arg-type]
            overlap=rule.overlap,  # type: ignore[arg-type]
            **extra,
        )

    def _note(self, name: str, since_ms: int, turn: int) -> None:
        """The ledger's record that schedule ``name`` changed at ``since_ms``, committed at
        ``turn``: its definition, or None while paused or once removed."""
        gone = name in self.paused or name in self.removed
        entry = (since_ms, turn, None if gone else self.defined[name])
        self.ledger.definitions.setdefault(name, []).append(entry)

    def _turn(self) -> int:
        """The next number in the true order of commits (several fall on one millisecond)."""
        self.turns += 1
        return self.turns

    def _authority(self) -> int:
        """The time due-ness is judged by: a database server's clock (true time), or the one
        machine's clock (SQLite), which cron follows wherever it is set."""
        return self.world.now_ms + (0 if self.s.server_clock else self.world.machine_offset_ms)

    # -- processes ---------------------------------------------------------------------------

    def _start(self, name: str, body: Callable[[Proc], None]) -> Proc:
        """With a database server's clock, each host's clock is its own (skewed, jumping);
        on one machine (SQLite) a clock fault moves every process's clock together."""
        skews = [f.amount for f in self.s.faults if f.kind == "skew" and f.target == name]
        if not self.s.server_clock:
            self.world.machine_offset_ms = sum(f.amount for f in self.s.faults if f.kind == "skew")
            self.ledger.offsets[0] = (0, self.world.machine_offset_ms)
            skews = []
        return self.world.spawn(name, body, offset_ms=sum(skews))

    def _open(self, proc: Proc) -> SqliteStore:
        server = TrueClock(self.world) if self.s.server_clock else None
        wait_ms = sc.TTL_MS // 2  # as a scheduler's (cronlab scheduler: TTL / 2)
        lock = SimLock(self.world, wait_ms)
        seams = Seams(lock=lock, wrap=self._pointed, clock=server, wakeups=self.wakeups)
        return SqliteStore(self.path, seams=seams)

    def _pointed(self, conn: sqlite3.Connection) -> PointedConnection:
        """The store's connection, watched, with the checker's SQL functions."""
        conn.create_function("sim_now", 0, self._authority)
        conn.create_function("sim_turn", 0, self._turn)
        return PointedConnection(conn, self.world.point)

    def _scheduler_body(self, index: int) -> Callable[[Proc], None]:
        def body(proc: Proc) -> None:
            clock = SimClock(self.world, proc)
            store = None
            try:
                store = self._open(proc)
                cfg = self.scheduler_config(index)
                same = any(f.kind == "identity" for f in self.s.faults)
                pid = 1 if same else 100 + self.restarts
                nonce = f"{self.world.rng.getrandbits(32):08x}"
                host = "pod" if same else f"host-{index}"
                owner = cluster.identity(
                    "scheduler", 0 if same else index, host=host, pid=pid, nonce=nonce
                )
                recording = _Recording(store, self.ledger, proc, self.world)
                queue = StoreQueue(store, clock)
                elector = self.elector(store, clock)
                waiter = store.waiter("due")
                sched = self.make_scheduler(
                    cfg,
                    store=recording,
                    queue=queue,
                    elector=elector,
                    clock=clock,
                    owner=owner,
                    duties=self._duties(store, clock, owner),
                    waiter=waiter,
                )
                sched.outage.say = self.world.log
                if waiter is None:  # (as before wake-ups: the earlier kinds' seeds replay)
                    while True:
                        clock.sleep(sched.step() / 1000)
                sched.run(lambda: False)  # the loop as cronlab scheduler runs it
            finally:
                self._died(proc, self._scheduler_body(index), store)

        return body

    def _duties(self, store: SqliteStore, clock: SimClock, owner: str) -> list[Duty]:
        """The leader's retention and alerter, with the scenario's short keep (``duties``)."""
        d = self.s.duties
        if d is None:
            return []
        retention = Retention(store, clock, keep_ms=d.keep_ms, every_ms=d.every_ms)
        return [retention, alerts.Alerter(store, clock, owner, None, say=self.world.log)]

    def _worker_body(self, index: int) -> Callable[[Proc], None]:
        def body(proc: Proc) -> None:
            clock = SimClock(self.world, proc)
            store = None
            try:
                store = self._open(proc)
                cfg = self.worker_config(index)
                queue = StoreQueue(store, clock)
                waiter = queue.waiter()
                if waiter is not None:  # woken: it polls as a fallback only
                    cfg = dataclasses.replace(cfg, idle_ms=WOKEN_IDLE_MS)
                worker = Worker(
                    cfg,
                    store=store,
                    queue=queue,
                    registry=self._registry(),
                    clock=clock,
                    name=f"worker-{index}@{100 + self.restarts}",
                    waiter=waiter,
                )
                worker.outage.say = worker.say = self.world.log
                if waiter is None:
                    while True:
                        clock.sleep(worker.step() / 1000)
                worker.run(lambda: False)
            finally:
                self._died(proc, self._worker_body(index), store)

        return body

    def _died(self, proc: Proc, body: Callable[[Proc], None], store: SqliteStore | None) -> None:
        """The supervisor (``cronlab cluster``) starts a dead process again after a while,
        however it died (on its way up too)."""
        if self.wakeups is not None:
            self.wakeups.forget(proc)
        if store is not None:
            self._close(store)
        delay = self.restart_ms(proc.name)
        if self.stopping or delay is None:
            return
        self.restarts += 1
        name = proc.name
        self.world.at(self.world.now_ms + delay, lambda: self._restart(name, body))

    def _close(self, store: Any) -> None:
        with contextlib.suppress(sqlite3.Error):
            store.close()

    def _restart(self, name: str, body: Callable[[Proc], None]) -> None:
        if not self.stopping:
            self.world.spawn(name, body, offset_ms=self._offset(name))

    def _offset(self, name: str) -> int:
        live = [p for p in self.world.procs if p.name == name]
        return live[-1].offset_ms if live else 0

    def _registry(self) -> Registry:
        return self.tasks.registry()

    def _watch_transactions(self, proc: Proc, label: str) -> None:
        """Which completed invocations a plain ROLLBACK undid with no fault to blame."""
        if label.startswith("BEGIN"):
            proc.faulted = False
            self.tx_invs[proc.name] = []
        elif label == "ROLLBACK":
            invs = self.tx_invs.get(proc.name, [])
            for inv in invs:
                if inv.completed and not proc.faulted:
                    inv.undone_by_engine = True
                    inv.alone = len(invs) == 1
            self.tx_invs[proc.name] = []

    def _failed_alone(self, failed: Iterable[tuple[str, int]]) -> None:
        """A batch's sole run takes no savepoint: the engine fails a run that returned (past its
        timeout) by rolling its whole transaction back, then records the failure in another —
        as its savepoint's rollback would (which no check counts against it). Such a run, its
        failure recorded at its attempt (``failed``: key, attempt), was not undone by the
        engine with no reason; one rolled back with other runs, or never recorded, still is."""
        recorded = set(failed)
        for inv in self.ledger.invocations:
            if inv.undone_by_engine and inv.alone and (inv.key, inv.attempt) in recorded:
                inv.undone_by_engine = False

    # -- faults and the operator ---------------------------------------------------------------

    def _arm(self, f: sc.Fault) -> None:
        at = self.t0 + f.at_ms
        if f.kind in ("kill", "pause"):
            self.world.at(at, lambda: self._strike(f))
        elif f.kind == "jump":
            self.world.at(at, lambda: self._jump(f))
        elif f.kind == "lose":
            self.world.at(at, lambda: self._lose(f.amount))
        elif f.kind == "duplicate":
            self.world.at(at, self._duplicate)
        elif f.kind == "outage":
            self.world.at(at, lambda: self._outage(f))
        elif f.kind == "redeploy":
            self.world.at(at, lambda: self._redeploy(f.amount))
        elif f.kind == "operator":
            self.world.at(at, lambda: self._operate(f))
        elif f.kind == "server_error":
            self.world.at(at, lambda: self._strike(f))
        elif f.kind == "terminate":
            self.world.at(at, lambda: self._terminate(f.target))

    def _terminate(self, name: str) -> None:
        """A server ends a session (``terminate``): SQLite has no sessions to end."""

    def _live(self, name: str) -> Proc | None:
        live = [p for p in self.world.procs if p.name == name and not p.dead]
        return live[-1] if live else None

    def _strike(self, f: sc.Fault) -> None:
        proc = self._live(f.target)
        if proc is None:
            return
        if f.kind == "kill":
            proc.kill_at.append((self.world.now_ms, f.skip))
        elif f.kind == "server_error":  # (SQLite has no server to raise one)
            proc.fail_at.append((self.world.now_ms, f.skip, sc.SERVER_ERRORS[f.amount]))
        else:
            where = self.HOLD_POINT if f.unlocked else ""
            until = self.t0 + f.until_ms if f.until_ms else 0
            proc.pause_at.append((self.world.now_ms, f.skip, f.ms, where, until))
        self.world.log(f"armed {f.describe()}")

    def _jump(self, f: sc.Fault) -> None:
        if not self.s.server_clock:
            self.world.machine_offset_ms += f.amount
            self.ledger.offsets.append((self.world.now_ms, self.world.machine_offset_ms))
            self.world.log(f"the machine's clock jumps {f.amount} ms")
            return
        proc = self._live(f.target)
        if proc is not None:
            proc.offset_ms += f.amount
            proc.faulted = True
            self.world.log(f"clock of {proc.name} jumps {f.amount} ms")

    def _outage(self, f: sc.Fault) -> None:
        self.world.outage = (self.world.now_ms, self.world.now_ms + f.ms)
        self.world.log(f"outage for {f.ms} ms")

    def _admin(self) -> sqlite3.Connection:
        """The operator's own connection (used only while no process runs)."""
        conn = sqlite3.connect(self.path, isolation_level=None, factory=OwnConnection)
        conn.create_function("sim_now", 0, self._authority)
        conn.create_function("sim_turn", 0, self._turn)
        return conn

    def _lose(self, n: int) -> None:
        if self.world.lock_holder is not None:
            return  # a queue failover does not happen inside a write transaction
        with self._admin() as conn:
            conn.execute("DELETE FROM queue WHERE id IN (SELECT id FROM queue LIMIT ?)", (n,))
        self.world.log(f"queue lost {n} envelope(s)")

    def _duplicate(self) -> None:
        if self.world.lock_holder is not None:
            return
        with self._admin() as conn:
            conn.execute(
                "INSERT INTO queue (task_ids, size, attempt, enqueued_ms) "
                "SELECT task_ids, size, attempt, enqueued_ms FROM queue ORDER BY id LIMIT 1"
            )
        self.world.log("queue delivers an envelope twice")

    def _redeploy(self, every_s: int) -> None:
        """A deploy of changed code: the new definition is written (``App.deploy``)."""
        self._operator("redeploy", lambda st: self._put(st, every_s))

    def _put(self, store: SqliteStore, every_s: int) -> None:
        tick, now = self._definition(every_s), self._authority()  # as the operator's CLI does
        read = Reading(self._authority)  # (judged by the clock once it holds the write lock)
        changed = store.put_schedule(tick, now, replace=True, clock=read)
        self.defined[SCHEDULE] = tick
        if changed:  # (the same definition, deployed again, changes nothing: SQLite seed 10987)
            self._note(SCHEDULE, judged(store, now, read), self._turn())

    def _operate(self, f: sc.Fault) -> None:
        """An operator's command from the CLI or the console (the ``operator`` kind)."""
        op, name = f.target.split()
        if op == "pause":
            self._operator(f"pause {name}", partial(self._pause_schedule, name))
            if f.ms:
                self.operators += 1  # (the resume to come: the schedule stays until it is done)
                resume = partial(
                    self._operator, f"resume {name}", partial(self._resume_schedule, name)
                )
                self.world.at(self.world.now_ms + f.ms, partial(resume, True))
        elif op == "trigger":
            self._operator(f"trigger {name}", partial(self._trigger, name))
        else:
            self._operator(f"backfill {name}", partial(self._backfill, name, f.ms))

    def _pause_schedule(self, name: str, store: SqliteStore) -> None:
        now = self._authority()
        read = Reading(self._authority)
        store.pause_schedule(name, now, "the simulated operator", clock=read)
        self.paused.add(name)
        self._note(name, judged(store, now, read), self._turn())

    def _resume_schedule(self, name: str, store: SqliteStore) -> None:
        now = self._authority()
        read = Reading(self._authority)
        changed = store.resume_schedule(name, now, clock=read)
        self.paused.discard(name)
        if changed:
            self._note(name, judged(store, now, read), self._turn())

    def _api_call(self, call: sc.ApiCall, index: int) -> None:
        """One call of the App API actor, from a short-lived process of its own."""

        def act(store: SqliteStore) -> None:
            now, read = self._authority(), Reading(self._authority)  # the App's clock, live
            version = call.version or 1
            done, changed = api_call(api_app(store, read, version), call, index)
            if call.op == "sync":
                self.defined[API_SCHEDULE] = api_definition(version)
            if changed:  # (a sync: the App's clock read last once it held the locks)
                self._note(API_SCHEDULE, judged(store, now, read), self._turn())
            self.world.log(f"api: {done}")

        self._operator(f"api {call.op} {index}", act)

    def _trigger(self, name: str, store: SqliteStore) -> None:
        store.trigger_schedule(name, self._authority())

    def _backfill(self, name: str, ms: int, store: SqliteStore) -> None:
        now = self._authority()
        store.backfill_schedule(name, now - ms, now, now)
        self.ledger.backfills.append((name, now - ms, now, self._turn()))

    def _remove_schedule(self, name: str) -> None:
        """The operator removes a schedule once no command is under way (so the run ends)."""
        if self.operators:
            self.world.at(self.world.now_ms + 1_000, partial(self._remove_schedule, name))
            return

        def remove(store: SqliteStore) -> None:
            now = self._authority()
            read = Reading(self._authority)
            store.remove_schedule(name, now, clock=read)
            self.removed.add(name)
            self._note(name, judged(store, now, read), self._turn())
            if self.removed >= set(self.s.schedule_names()):
                self.ledger.removed_ms = judged(store, now, read)

        self._operator(f"remove {name}", remove)

    def _operator(self, what: str, act: Callable[[SqliteStore], None], again: bool = False) -> None:
        """An operator's command: a short-lived process of its own, run again a second after
        it fails. ``operators`` counts the commands not yet done, retries included."""

        def body(proc: Proc) -> None:
            store = None
            try:
                store = self._open(proc)
                act(store)
                self.world.log(f"operator {what} done")
                self.operators -= 1
            except (ConfigError, ConflictError) as exc:  # refused, nothing written: as the CLI says
                self.world.log(f"operator {what} refused: {exc}")
                self.operators -= 1
            except BackendUnavailable as exc:
                self.world.log(f"operator {what} failed: {exc}")
                self.world.at(self.world.now_ms + 1_000, lambda: self._operator(what, act, True))
            finally:
                if store is not None:
                    store.close()

        if not again:
            self.operators += 1
        self.world.spawn(f"operator-{what}", body)

    # -- the end -----------------------------------------------------------------------------

    def _run_until_settled(self) -> None:
        """Run a second at a time until the work is done, or the horizon is reached."""
        end = self.t0 + self.horizon_ms()
        while self.world.now_ms < end:
            self.world.run_until(min(end, self.world.now_ms + 1_000))
            if self.world.now_ms >= self.t0 + sc.WORK_END_MS and self._settled():
                return

    def _settled(self) -> bool:
        if self.world.timers or self.ledger.removed_ms is None:
            return False
        with self._admin() as conn:
            open_tasks = conn.execute(
                "SELECT count(*) FROM tasks WHERE status IN ('PENDING', 'DISPATCHED')"
            ).fetchone()[0]
            queued = conn.execute("SELECT count(*) FROM queue").fetchone()[0]
        return bool(open_tasks == 0 and queued == 0)

    def _outcome(self, deadlock: str | None) -> Outcome:
        with self._admin() as conn:
            tasks = conn.execute(
                "SELECT idempotency_key, status, trigger_ms, last_error FROM tasks"
            ).fetchall()
            effects = conn.execute(
                "SELECT key, inv, at_ms, true_ms, task, r.row_no, due_ms FROM sim_effects e"
                " JOIN sim_effect_rows r ON r.effect = e.rowid"
            ).fetchall()
            dropped = conn.execute("SELECT key, trigger_ms, at_ms FROM sim_dropped").fetchall()
            pruned = conn.execute(
                "SELECT key, status, trigger_ms, turn, row_no FROM sim_pruned"
            ).fetchall()
            failures = dict(conn.execute("SELECT key, count(*) FROM sim_failures GROUP BY key"))
            self._failed_alone(conn.execute("SELECT key, attempt FROM sim_failures"))
            alerts = conn.execute(
                "SELECT schedule, kind, subject, at_ms FROM sim_alerts"
            ).fetchall()
            dispatched = dict(
                conn.execute("SELECT key, min(turn) FROM sim_dispatched GROUP BY key")
            )
            dispatched_at = dict(
                conn.execute("SELECT key, min(at_ms) FROM sim_dispatched GROUP BY key")
            )
        read = Read(tasks, effects, dropped, pruned, alerts, dispatched, dispatched_at, failures)
        return self._ended(read, deadlock)

    def _ended(self, read: Read, deadlock: str | None) -> Outcome:
        """The run's outcome from what the checker's tables held at its end."""
        trace, end_ms = self.world.trace, self.world.now_ms
        return Outcome(scenario=self.s, ledger=self.ledger, trace=trace, end_ms=end_ms,
                       deadlock=deadlock, **read._asdict())  # fmt: skip


class _Recording:
    """The store a scheduler replica dispatches through, noting who dispatched under which
    epoch (the checker's split-brain test); everything else as the store does it."""

    def __init__(self, store: SqliteStore, ledger: Ledger, proc: Proc, world: World) -> None:
        self.inner, self.ledger, self.proc, self.world = store, ledger, proc, world

    def dispatch_due(
        self, now_ms: int, limit: int, epoch: int, *, clock: Callable[[], int] | None = None
    ) -> int:
        n = self.inner.dispatch_due(now_ms, limit, epoch, clock=clock)
        if n:
            self.ledger.dispatches.append((self.proc.name, epoch, n, self.world.now_ms))
            self.world.log(f"{self.proc.name} dispatched {n} at epoch {epoch}")
        return n

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@functools.cache
def _template() -> bytes:
    """A store as migrations leave it, with the checker's tables and triggers: made once per
    process and copied for each run (the migrations are the same for every seed)."""
    folder = Path(tempfile.mkdtemp(prefix="cronlab-sim-", dir=_fast_tmp()))
    try:
        store = SqliteStore(folder / "template.db")
        for statement in SETUP_SQL.strip().split(";\n"):
            store.sqlite.conn.execute(statement)
        store.close()
        return (folder / "template.db").read_bytes()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _fast_tmp() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


__all__ = ["Killed", "Outcome", "simulate"]
