"""The simulated world: one true clock, processes that take turns, one database write lock.

Each simulated process is a greenlet running real cronlab code; only one runs at a time, until
it reaches a *point* — a SQL statement (``Seams.before``), a sleep, a
wait for the write lock — and the world decides, with the seed's random numbers, who runs
next. Time moves only when every process is asleep, paused or waiting; the run is therefore a
function of the seed. A process can be killed at any point (``Killed`` unwinds it, and a
transaction it was in rolls back, as the database does for a dead client) or paused there
(it keeps what it holds — the write lock, a claimed message — while time goes on).
"""

from __future__ import annotations

import asyncio
import bisect
import random
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import greenlet

from cronlab.exceptions import BackendUnavailable

# With ``World.favour`` set, how often a point is a change point (PCT): the running process
# drops below every other, so they run through what it had begun.
LOWER_P = 0.05


class Killed(BaseException):
    """The simulated process died at this point (SIGKILL): nothing after it runs."""


# Process switches at one instant after which the world is stuck: only a sleep, a lock wait
# or a pause lets time pass. SQLite seeds 1-400 of every kind take under 1,000 (three over
# 300); claim-predicate-dropped's mutant with the stale kind ran on for ever at seed 1.
LIVELOCK_STEPS = 20_000


class Deadlock(Exception):
    """No process can ever run again and time cannot move: the run is stuck."""


@dataclass(eq=False)
class Proc:
    """A simulated OS process: its greenlet, its clock's offset from true time, its state."""

    name: str
    body: Callable[[Proc], None]
    offset_ms: int = 0
    wake_ms: int = 0
    paused_until_ms: int = 0
    waiting_lock: bool = False
    lock_deadline_ms: int | None = None
    # On a database server (sim/postgres.py): a statement of this process waits for a lock
    # another session holds; its session's idle-in-transaction deadline, when one is set.
    waiting_db: bool = False
    idle_deadline_ms: int | None = None
    timed_out: bool = False  # its lock wait passed lock_deadline_ms
    dead: bool = False
    dying: bool = False
    kill_at: list[tuple[int, int]] = field(default_factory=list)  # (after ms, skip points)
    # (after ms, skip points, ms, the label of the points it counts: "" every one, until: the
    # instant it ends however late it strikes, or 0)
    pause_at: list[tuple[int, int, int, str, int]] = field(default_factory=list)
    fail_at: list[tuple[int, int, str]] = field(default_factory=list)  # (after, skip, error)
    faulted: bool = False  # a fault hit it during its current transaction
    points: int = 0
    glet: greenlet.greenlet | None = None

    def runnable(self, now_ms: int) -> bool:
        return (
            not self.dead
            and not self.waiting_lock
            and not self.waiting_db
            and self.wake_ms <= now_ms
            and self.paused_until_ms <= now_ms
        )


class World:
    """The simulator's scheduler. ``run`` drives the processes until ``end_ms``."""

    def __init__(self, seed: int, start_ms: int, switch_p: float = 0.3) -> None:
        self.rng = random.Random(seed)
        self.now_ms = start_ms
        self.switch_p = switch_p
        self.procs: list[Proc] = []
        self.live: list[Proc] = []  # procs not dead yet, in spawn order (what the steps scan)
        self.current: Proc | None = None
        self.lock_holder: Proc | None = None
        self.timers: list[tuple[int, int, Callable[[], None]]] = []  # (at, order, action)
        self.trace: list[tuple[int, str]] = []
        self.outage: tuple[int, int] | None = None  # [from, to) the backend is down
        self.machine_offset_ms = 0  # the one machine's clock against true time (SQLite)
        self.on_point: list[Callable[[Proc, str], None]] = []
        self.quiet: set[str] = set()  # statements of idle polls
        # What a process's statement raises during an outage (a server's: a lost connection)
        self.outage_error: Callable[[], Exception] = lambda: BackendUnavailable(
            "simulated outage: the database is unreachable"
        )
        # A process whose session sat idle in its transaction past its deadline (a server
        # ends that session: sim/postgres.py); called as true time reaches the deadline.
        self.on_idle_timeout: Callable[[Proc], None] = lambda proc: None
        self.renames: list[tuple[str, str]] = []  # what the trace says in other words
        self.favour: float | None = None  # how often the highest priority runs next (_pick)
        self.priority: dict[str, float] = {}  # a process name's, drawn when first ready
        self._home = greenlet.getcurrent()  # the world's own: where a process switches back to
        self._order = 0

    # -- the world's side --------------------------------------------------------------------

    def spawn(self, name: str, body: Callable[[Proc], None], offset_ms: int = 0) -> Proc:
        """Start a process; it first runs when the world picks it."""
        proc = Proc(name=name, body=body, offset_ms=offset_ms, wake_ms=self.now_ms)
        proc.glet = greenlet.greenlet(partial(self._main, proc), parent=self._home)
        self.procs.append(proc)
        self.live.append(proc)
        self.log(f"start {name}")
        return proc

    def at(self, when_ms: int, action: Callable[[], None]) -> None:
        """Do ``action`` (a fault, an operator's command) when true time reaches ``when_ms``."""
        self._order += 1
        bisect.insort(self.timers, (when_ms, self._order, action), key=lambda t: (t[0], t[1]))

    def run_until(self, end_ms: int) -> None:
        """Let the processes run until true time reaches ``end_ms``. A world where processes
        run on and on at one instant (one loops without ever sleeping: a mutated scan that
        finds every finished row due again) is stuck too: ``Deadlock`` after LIVELOCK_STEPS."""
        steps, at = 0, self.now_ms
        while True:
            self._fire_timers()
            now = self.now_ms
            ready = [p for p in self.live if p.runnable(now)]
            if ready:
                steps = steps + 1 if now == at else 0
                at = now
                if steps > LIVELOCK_STEPS:
                    raise Deadlock(f"{steps:,} steps at one instant: time never passes")
                self._resume(self._pick(ready))
                continue
            nxt = self._next_time()
            if nxt is None or nxt > end_ms:
                self.now_ms = max(self.now_ms, end_ms)
                return
            self.now_ms = nxt

    def _pick(self, ready: list[Proc]) -> Proc:
        """Who runs next: anyone ready, alike — or, with ``favour`` set, most often the one
        whose name drew the highest priority (PCT's way to let one process run through
        another's transaction; ``sim/postgres.py`` sets it, SQLite runs keep the uniform
        choice their seeds replay with)."""
        if self.favour is not None and self.rng.random() < self.favour:
            for p in ready:
                if p.name not in self.priority:
                    self.priority[p.name] = self.rng.random()
            return max(ready, key=lambda p: self.priority[p.name])
        return self.rng.choice(ready)

    def shutdown(self) -> None:
        """Kill every process that is still alive."""
        for p in list(self.live):
            self.kill(p, quietly=True)

    def kill(self, proc: Proc, *, quietly: bool = False) -> None:
        """SIGKILL now: the process unwinds from where it stopped; its lock is released."""
        if proc.dead:
            return
        if not quietly:
            self.log(f"kill {proc.name}")
        proc.dying = proc.faulted = True
        proc.waiting_lock = proc.waiting_db = False
        self._resume(proc)

    def pause(self, proc: Proc, ms: int) -> None:
        """SIGSTOP now, SIGCONT after ``ms``: it keeps whatever it holds meanwhile."""
        proc.faulted = True
        if not proc.dead:
            proc.paused_until_ms = max(proc.paused_until_ms, self.now_ms + ms)
            self.log(f"pause {proc.name} for {ms} ms")

    def log(self, text: str) -> None:
        for old, new in self.renames:  # (a scratch database's random name, say)
            text = text.replace(old, new)
        self.trace.append((self.now_ms, text))

    def _main(self, proc: Proc) -> None:
        """The process's greenlet: its body, then its death (control returns to the world)."""
        try:
            if not proc.dying:
                proc.body(proc)
        except Killed:
            pass
        except greenlet.GreenletExit:
            raise
        except BaseException as exc:  # uncaught, it ends the process, as it does a real one
            self.log(f"{proc.name} exited: {type(exc).__name__}: {exc}")
        finally:
            if self.lock_holder is proc:  # the kernel drops a dead process's locks
                self.lock_holder = None
                for p in self.live:
                    p.waiting_lock = False
            proc.dead = True
            self.live.remove(proc)

    def _resume(self, proc: Proc) -> None:
        assert proc.glet is not None
        self.current = proc
        proc.glet.switch()
        self.current = None

    def _fire_timers(self) -> None:
        while self.timers and self.timers[0][0] <= self.now_ms:
            _, _, action = self.timers.pop(0)
            action()
        for p in self.live:
            deadline = p.lock_deadline_ms
            if p.waiting_lock and deadline is not None and deadline <= self.now_ms:
                p.waiting_lock = False  # it wakes to find it timed out
            if p.waiting_db and deadline is not None and deadline <= self.now_ms:
                p.waiting_db, p.timed_out = False, True  # its lock_timeout struck
        for p in list(self.live):
            idle = p.idle_deadline_ms
            if idle is not None and idle <= self.now_ms and not p.dead:
                p.idle_deadline_ms = None
                self.on_idle_timeout(p)

    def _next_time(self) -> int | None:
        times = [t for t, _, _ in self.timers[:1]]
        for p in self.live:
            if p.idle_deadline_ms is not None:
                times.append(p.idle_deadline_ms)
            if p.waiting_lock or p.waiting_db:
                if p.lock_deadline_ms is not None:
                    times.append(max(p.lock_deadline_ms, p.paused_until_ms))
                continue
            times.append(max(p.wake_ms, p.paused_until_ms))
        later = [t for t in times if t > self.now_ms]
        if not later and self.live:
            raise Deadlock("every live process waits on a lock nobody will release")
        return min(later, default=None)

    # -- the process's side (called from its own greenlet, while it runs) ---------------------

    def point(self, label: str) -> None:
        """A place where this process may be switched out, killed or paused."""
        proc = self._me()
        if proc.dying:
            return  # unwinding after a kill: ROLLBACK and the like run straight through
        proc.points += 1
        for hook in self.on_point:
            hook(proc, label)
        if label in self.quiet:  # an idle poll: no switch, and faults wait for real work
            return
        if self._due(proc.kill_at):
            self.log(f"kill {proc.name} at {label[:40]}")
            proc.dying = True
            raise Killed
        if (fault := self._due(proc.pause_at, label)) is not None:
            self.pause(proc, max(0, fault[4] - self.now_ms) if fault[4] else fault[2])
            self.log(f"  ({proc.name} stopped at {label[:40]})")
            self._yield(proc)
        elif self.favour is not None and self.rng.random() < LOWER_P:
            self.priority[proc.name] = -self.rng.random()  # a change point: the others' turn
            self._yield(proc)
        elif self.rng.random() < self.switch_p:
            self._yield(proc)
        if not label.startswith("ROLLBACK"):
            self._check_outage(proc)

    def wait_blocked(self, proc: Proc) -> None:
        """``proc``'s statement waits for a lock (``proc.waiting_db``): the others run until the
        server answers it (sim/postgres.py settles it) or its lock deadline passes."""
        self._yield(proc)

    def sleep(self, ms: int) -> None:
        proc = self._me()
        proc.wake_ms = self.now_ms + max(0, ms)
        self._yield(proc)

    def lock(self, timeout_ms: int | None = None) -> None:
        """Take the database's single write lock (SQLite's, and the writer queue in front of
        it), waiting at most ``timeout_ms`` (None: for ever)."""
        proc = self._me()
        if not proc.dying:
            self._acquire(proc, timeout_ms)

    def unlock(self) -> None:
        proc = self._me()
        if self.lock_holder is proc:
            self.lock_holder = None
            for p in self.live:
                p.waiting_lock = False  # waiters retry; the world picks who wins

    def _acquire(self, proc: Proc, timeout_ms: int | None) -> None:
        deadline = None if timeout_ms is None else self.now_ms + timeout_ms
        while self.lock_holder is not None and self.lock_holder is not proc:
            if deadline is not None and self.now_ms >= deadline:
                proc.faulted = True
                raise BackendUnavailable(f"write lock not free within {timeout_ms} ms")
            proc.waiting_lock, proc.lock_deadline_ms = True, deadline
            self._yield(proc)
        proc.lock_deadline_ms = None
        self.lock_holder = proc

    def in_outage(self) -> bool:
        return self.outage is not None and self.outage[0] <= self.now_ms < self.outage[1]

    def _check_outage(self, proc: Proc) -> None:
        if self.in_outage() and not proc.dying:
            proc.faulted = True
            raise self.outage_error()

    def _yield(self, proc: Proc) -> None:
        """Switch back to the world. asyncio's running loop is the thread's, so a process
        that yields inside its event loop (an async handler's ``ctx.tx``) takes it along."""
        loop = asyncio._get_running_loop()
        asyncio._set_running_loop(None)
        self._home.switch()
        asyncio._set_running_loop(loop)
        if proc.dying:
            raise Killed

    def due_fault(self, proc: Proc) -> str | None:
        """The server error due at this point of ``proc`` (``fail_at``), if any."""
        found = self._due(proc.fail_at)
        return None if found is None else str(found[2])

    def _due(self, faults: list[Any], label: str | None = None) -> Any:
        """The first fault whose time has come and whose points to skip are used up (popped),
        counting one point off the others whose time has come; None when none is due. Given
        the point's ``label`` (pauses, ``Proc.pause_at``), a fault that names a label in its
        fourth field counts and strikes at that label only."""
        for i, fault in enumerate(faults):
            if label is not None and fault[3] and fault[3] != label:
                continue
            if self.now_ms >= fault[0]:
                if fault[1] <= 0:
                    return faults.pop(i)
                faults[i] = (fault[0], fault[1] - 1, *fault[2:])
        return None

    def _me(self) -> Proc:
        assert self.current is not None, "a world call from outside a simulated process"
        return self.current


class SimClock:
    """A process's wall clock: true time plus its machine's offset and its own (skew, jumps);
    ``sleep`` yields."""

    def __init__(self, world: World, proc: Proc) -> None:
        self.world, self.proc = world, proc

    def now_ms(self) -> int:
        return self.world.now_ms + self.world.machine_offset_ms + self.proc.offset_ms

    def monotonic_ms(self) -> int:
        return self.world.now_ms  # a clock jump moves the wall clock only

    def sleep(self, seconds: float) -> None:
        self.world.sleep(int(seconds * 1000))


class TrueClock:
    """The world's own clock (a database server's, in ``time_source=server`` stores).
    ``read_ms`` is its last reading: the instant a store judged a change by."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.read_ms: int | None = None

    def now_ms(self) -> int:
        self.read_ms = self.world.now_ms
        return self.read_ms

    def monotonic_ms(self) -> int:
        return self.world.now_ms

    def sleep(self, seconds: float) -> None:
        self.world.sleep(int(seconds * 1000))


class SimLock:
    """The writer lock a simulated process's SQLite dialect takes (``Seams.lock``)."""

    def __init__(self, world: World, timeout_ms: int | None) -> None:
        self.world, self.timeout_ms = world, timeout_ms

    def __enter__(self) -> None:
        self.world.point("LOCK")  # a process may stop just before it takes the write lock
        self.world.lock(self.timeout_ms)

    def __exit__(self, *exc: object) -> None:
        self.world.unlock()


class SimWaiter:
    """``ports.Waiter`` in simulated time: ``wait`` sleeps until a notice or the timeout."""

    def __init__(self, world: World, proc: Proc, channel: str) -> None:
        self.world, self.proc, self.channel = world, proc, channel
        self.news = self.waiting = self.closed = False

    def poke(self) -> None:
        """A notice arrives: the next ``wait`` returns at once, or this one ends now."""
        if self.closed or self.proc.dead:
            return
        self.news = True
        if self.waiting:
            self.proc.wake_ms = min(self.proc.wake_ms, self.world.now_ms)

    def wait(self, timeout_s: float) -> bool:
        if not self.news:
            self.waiting = True
            try:
                self.world.sleep(int(timeout_s * 1000))
            finally:
                self.waiting = False
        got, self.news = self.news, False
        return got

    def close(self) -> None:
        self.closed = True


class SimWakeups:
    """``sqlite.Wakeups`` between simulated processes: each notice to each waiter is lost,
    late or doubled as the scenario's ``Wakeups`` draws it (a stream of the seed's own)."""

    def __init__(self, world: World, faults: Any, seed: int) -> None:
        self.world, self.faults = world, faults
        self.rng = random.Random(f"{seed}:notices")
        self.waiters: list[SimWaiter] = []

    def waiter(self, channel: str) -> SimWaiter:
        w = SimWaiter(self.world, self.world._me(), channel)
        self.waiters.append(w)
        return w

    def forget(self, proc: Proc) -> None:
        """A dead process's subscriptions go with it."""
        self.waiters = [w for w in self.waiters if w.proc is not proc]

    def notify(self, channel: str) -> None:
        for w in [w for w in self.waiters if w.channel == channel and not w.closed]:
            if self.rng.random() < self.faults.lose:
                self.world.log(f"a {channel} notice to {w.proc.name} is lost")
                continue
            times = 2 if self.rng.random() < self.faults.twice else 1
            delay = self.rng.randint(0, self.faults.delay_ms)
            for _ in range(times):
                if delay:
                    self.world.at(self.world.now_ms + delay, w.poke)
                else:
                    w.poke()


class PointedConnection:
    """A SQLite connection that calls ``before(sql)`` ahead of every statement (the store's
    ``Seams.wrap``): the simulator's points where a process may be switched or killed."""

    def __init__(self, conn: sqlite3.Connection, before: Callable[[str], None]) -> None:
        self._conn, self._before = conn, before

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        self._before(sql)
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        self._before(sql)
        return self._conn.executemany(sql, rows)

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def close(self) -> None:
        self._conn.close()
