"""The lab's scheduler: the engine's, with the anti-patterns the lab teaches plugged in.

The production scheduler (``cronlab.runtime.scheduler``) has one way to dispatch: fenced, in
one transaction. The lab shows what goes wrong without that, on the real engine
(docs/engine.md, "The lab's anti-patterns"):

* ``election="off"`` — cron on every replica: no lease is claimed; each scan reads the due
  rows without claiming them and enqueues its own copy (``(k − 1) × due`` duplicates);
* ``timers="in-memory"`` — a new leader dispatches only what falls due after it took over
  and marks what fell due before as MISSED (the timers lived in the old leader's memory);
* ``fencing=False`` — the zombie: a leader reads a batch, then writes it unchecked;
* ``chaos=True`` — honour ``cronlab chaos pause-leader --mid-dispatch``: stop this process
  between the read and the write of a batch (fenced: the store refuses it afterwards).

These need store methods the engine never calls (``LabStore``): the lab's own, over the SQL
store (``lab/store.py``).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from cronlab.exceptions import FencedError
from cronlab.lab.store import LabSqlStore
from cronlab.ports import Lease, StoredTask
from cronlab.runtime.scheduler import Scheduler, SchedulerConfig
from cronlab.stores.sql import SqlStore

Election = Literal["lease", "off"]
Timers = Literal["durable", "in-memory"]
UNBOUNDED = 1 << 62


@dataclass(frozen=True, kw_only=True)
class Modes:
    """Which anti-patterns a lab scheduler runs (the defaults: none, the engine as it is)."""

    election: Election = "lease"
    timers: Timers = "durable"
    fencing: bool = True  # False: the zombie anti-pattern (read, then write unchecked)
    chaos: bool = False  # honour ``chaos pause-leader --mid-dispatch`` requests

    def plain(self) -> bool:
        """True when no anti-pattern is on: the engine's own scheduler does the same."""
        return self == Modes()


class LabStore(Protocol):
    """What the anti-patterns read and write, beyond the engine's ``ports.Store``."""

    def dispatch_held(
        self, held: Sequence[StoredTask], now_ms: int, epoch: int, *, fenced: bool
    ) -> int:
        """Write a batch read earlier with ``read_due`` (the two-phase dispatch): ``fenced``,
        refused (``FencedError``) unless ``epoch`` holds the lease and only the rows still
        PENDING; unfenced (the ``--fencing off`` anti-pattern), every row. Returns how many."""
        ...

    def pause_request(self, owner: str, since_ms: int) -> tuple[int, float, int] | None:
        """The newest chaos pause request for ``owner`` after ``since_ms``: (instant,
        seconds, until)."""
        ...

    def read_due(
        self, now_ms: int, limit: int, copied_since_ms: int | None = None
    ) -> Sequence[StoredTask]:
        """Due PENDING tasks, without claiming them (``--election off``).

        With ``copied_since_ms`` (the caller's previous scan), also the tasks that fell due
        after it and another unfenced dispatcher copied already: cron on every replica sends its
        own copy of every task that falls due while it runs. Each task at most once.
        """
        ...

    def enqueue_copies(self, tasks: Sequence[StoredTask], now_ms: int) -> int:
        """Enqueue a message per task and mark them DISPATCHED, unfenced (``--election off``)."""
        ...

    def mark_missed(self, before_ms: int, now_ms: int) -> int:
        """Mark PENDING tasks with ``trigger_ms < before_ms`` MISSED (in-memory timers)."""
        ...


class LabScheduler(Scheduler):
    """A replica running ``modes``. ``stop_self(seconds)`` is how a mid-dispatch pause stops
    it (SIGSTOP this process; the chaos command that asked sends SIGCONT; the simulator's
    sleeps in simulated time)."""

    def __init__(self, cfg: SchedulerConfig, *, modes: Modes, **parts: Any) -> None:
        super().__init__(cfg, **parts)
        self.modes = modes
        self.lab_store: LabStore = LabSqlStore(cast(SqlStore, parts["store"]))
        self.copied_until = self.clock.now_ms() - 1  # off: what fell due before it started is not
        self.pauses_seen_ms = self.clock.now_ms()  # chaos: requests older than this are done
        self.stop_self: Callable[[float], None] = lambda _: os.kill(os.getpid(), signal.SIGSTOP)

    # -- election off: every replica copies -------------------------------------------------

    def give_up(self) -> None:
        if self.modes.election == "lease":
            super().give_up()

    def more_due(self, dispatched: int) -> bool:
        return self.modes.election == "lease" and super().more_due(dispatched)

    def next_scan(self, now: int) -> int:
        if self.modes.election == "off":  # (its due rows stay PENDING: it copies at its pace)
            return (now // self.cfg.scan_ms + 1) * self.cfg.scan_ms
        return super().next_scan(now)

    def leader_work(self, now: int) -> None:
        if self.modes.election == "lease":
            super().leader_work(now)

    def took_over(self, lease: Lease, now: int) -> None:
        if self.modes.election == "off":
            return
        self.record("acquire", now, lease.epoch, replica=self.cfg.replica)
        if self.modes.timers == "in-memory":
            # Timers lived in the previous leader's memory: what fell due before now is lost.
            missed = self.lab_store.mark_missed(now, now)
            if missed:
                self.record("missed", now, lease.epoch, count=missed)
        self.wake()

    def dispatch(self, now: int) -> int:
        if self.modes.election == "off":
            return self._dispatch_unclaimed(now)
        request = self._pause_request()
        if not self.modes.fencing or request is not None:
            return self._dispatch_in_two(now, request)
        return super().dispatch(now)

    def _dispatch_unclaimed(self, now: int) -> int:
        """Cron on every replica: no claim; each scan sends a copy of what is PENDING and of
        everything that fell due since this replica's last scan, whatever the others did —
        so k replicas running send k copies of each task: (k − 1) × due duplicates, as the
        model counts them."""
        tasks = self.lab_store.read_due(now, UNBOUNDED, copied_since_ms=self.copied_until)
        if tasks:
            self.lab_store.enqueue_copies(tasks, now)
            self.queue.relay()
        self.copied_until = max(self.copied_until, now)
        self.dispatched += len(tasks)
        self.metrics.dispatched(len(tasks))
        return len(tasks)

    # -- the zombie, and the chaos pause ---------------------------------------------------

    def _pause_request(self) -> float | None:
        """Seconds a chaos request asks this leader to stay paused mid-dispatch."""
        if not self.modes.chaos:
            return None
        found = self.lab_store.pause_request(self.owner, self.pauses_seen_ms)
        if found is None:
            return None
        at, seconds, until = found
        if self.clock.now_ms() >= until:
            self.pauses_seen_ms = at  # too late: the chaos command has given up on it
            return None
        return seconds

    def _dispatch_in_two(self, now: int, pause_s: float | None) -> int:
        """Read a batch, then write it: how a leader without fencing dispatches (its write
        checks nothing), and what a chaos pause catches in between — the leader stops
        itself, holding what it read, and writes it when it resumes (fenced: the store
        refuses it if the lease moved on)."""
        assert self.lease is not None
        held = self.lab_store.read_due(now, self.cfg.batch)
        if not held:
            return 0  # (a pause request waits for a batch to catch)
        if pause_s is not None:
            self.pauses_seen_ms = self.clock.now_ms()
            self._stop_self(pause_s, len(held), now)
        try:
            n = self.lab_store.dispatch_held(
                held, self.clock.now_ms(), self.lease.epoch, fenced=self.modes.fencing
            )
        except FencedError as exc:
            self.fenced(exc, now, held=len(held))
            return 0
        self.queue.relay()
        if not self.modes.fencing and n:
            epoch = self.lease.epoch
            self.record(
                "unfenced_write", self.clock.now_ms(), epoch, count=n, replica=self.cfg.replica
            )
        self.dispatched += n
        return n

    def _stop_self(self, seconds: float, held: int, now: int) -> None:
        """Stop here, holding what was read, for ``seconds`` (``stop_self``)."""
        assert self.lease is not None
        detail = {"held": held, "for_s": seconds, "replica": self.cfg.replica, "mid_dispatch": True}
        self.record("paused_mid_dispatch", now, self.lease.epoch, **detail)
        self.stop_self(seconds)
