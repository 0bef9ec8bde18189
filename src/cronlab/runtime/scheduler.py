"""A scheduler replica: hold the lease, dispatch due tasks in large fenced batches.

The loop (one thread): renew every TTL/3; dispatch only until the lease's *local deadline*:
the monotonic instant its request was sent, plus the TTL, less a margin — never the expiry
the lease store reports, which is on another clock (so a replica whose wall clock is ahead or
behind neither dispatches past its lease nor stops holding one it cannot use). A replica that
cannot renew stops by itself. A new leader scans at once; then at every whole ``scan_ms``
boundary of its wall clock, at the next PENDING task's trigger time when that comes sooner, at
once while batches come back full, and when its ``waiter`` says a task was added ("due").
Every dispatch carries the epoch, and the store refuses a stale one (``FencedError``) inside
the same transaction — the backstop for a replica paused between its check and its write.

Anti-patterns for the lab (documented in docs/engine.md): ``election="off"`` reads the due
rows without claiming and enqueues its own copy; ``timers="in-memory"`` dispatches only what
falls due after this replica took over and marks what fell due before as MISSED.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from cronlab.exceptions import BackendUnavailable, FencedError
from cronlab.metrics import NO_METRICS, Metrics
from cronlab.ports import Clock, Event, Lease, LeaseElector, Queue, Store, Task, Waiter
from cronlab.runtime.heartbeat import Heartbeat
from cronlab.runtime.outage import Outage

Election = Literal["lease", "off"]
Timers = Literal["durable", "in-memory"]
UNBOUNDED = 1 << 62
STANDBY_POLL_MS = 500
MARGIN_DIVISOR = 10  # a leader stops TTL/10 before its lease can have expired anywhere


@dataclass(frozen=True, kw_only=True)
class SchedulerConfig:
    """A replica's knobs; times in milliseconds."""

    replica: int
    election: Election = "lease"
    timers: Timers = "durable"
    ttl_ms: int = 10_000
    scan_ms: int = 1_000
    batch: int = 10_000
    reconcile_ms: int = 10_000  # how often the leader looks for tasks whose message was lost
    fencing: bool = True  # False: the zombie anti-pattern (read, then write unchecked)
    chaos: bool = False  # honour ``chaos pause-leader --mid-dispatch`` requests (the lab)


class Duty(Protocol):
    """Work only the leader does, after each scan, fenced by its epoch (the retention, the
    alerts); it keeps its own pace. A ``FencedError`` ends this replica's leadership."""

    def run(self, now_ms: int, epoch: int) -> None: ...


class Scheduler:
    """One replica. ``step()`` does one round and says how long to sleep."""

    def __init__(
        self,
        cfg: SchedulerConfig,
        *,
        store: Store,
        queue: Queue,
        elector: LeaseElector,
        clock: Clock,
        owner: str,
        pid: int = 0,
        duties: Sequence[Duty] = (),
        metrics: Metrics = NO_METRICS,
        heartbeat: Heartbeat | None = None,
        waiter: Waiter | None = None,
    ) -> None:
        """``waiter``: on the store's "due" channel (None: sleep)."""
        self.cfg, self.store, self.queue = cfg, store, queue
        self.elector, self.clock, self.owner, self.pid = elector, clock, owner, pid
        self.duties, self.metrics, self.heartbeat = duties, metrics, heartbeat
        self.waiter = waiter
        self.lease: Lease | None = None
        self.deadline_ms = 0  # monotonic: lead until then
        self.next_renew_ms = 0  # monotonic
        # Scans fall on whole scan_ms boundaries, so replicas scan together (the model does too).
        self.next_scan_ms = -(-clock.now_ms() // cfg.scan_ms) * cfg.scan_ms
        self.dispatched = 0
        self.outage = Outage(clock, owner)
        self._unreachable: BackendUnavailable | None = None
        self.next_reconcile_ms = 0  # monotonic
        self.copied_until = clock.now_ms() - 1  # off: what fell due before it started is not
        self.pauses_seen_ms = clock.now_ms()  # chaos: pause requests older than this are done
        # How a mid-dispatch pause stops this replica (the simulator's sleeps in simulated time).
        self.stop_self: Callable[[float], None] = lambda _: os.kill(os.getpid(), signal.SIGSTOP)

    def run(self, stopping: Callable[[], bool]) -> None:
        """Loop until ``stopping()``; then give the lease up so a standby takes over at once."""
        while not stopping():
            wait_ms = self.step()
            if not wait_ms:
                continue
            if self.waiter is None:
                self.clock.sleep(wait_ms / 1000)
            elif self.waiter.wait(wait_ms / 1000):
                self.wake()
        if self.lease is not None and self.cfg.election == "lease":
            self.elector.release(self.owner)

    def step(self) -> int:
        """One round; returns milliseconds to sleep before the next. A backend outage is
        waited out with backoff (the lease still ends at its local deadline)."""
        self._unreachable = None
        try:
            wait = self._round()
        except BackendUnavailable as exc:
            self.next_renew_ms = 0  # the next round asks the backends again
            return self._down(exc)
        if self._unreachable is not None:  # the election backend, while the store answered
            self.next_renew_ms = 0
            return min(wait, self._down(self._unreachable))
        if (lasted := self.outage.recovered()) is not None:
            self._note_outage(lasted)
        return wait

    def _down(self, exc: BackendUnavailable) -> int:
        wait = self.outage.failed(exc)
        if self.outage.fresh:
            epoch = self.lease.epoch if self.lease else 0
            with contextlib.suppress(BackendUnavailable):  # the store itself is what is down
                detail = {"error": str(exc), "replica": self.cfg.replica}
                self._record("backend_unreachable", self.clock.now_ms(), epoch, **detail)
        return wait

    def _note_outage(self, lasted_ms: int) -> None:
        epoch = self.lease.epoch if self.lease else 0
        detail = {"lasted_ms": lasted_ms, "error": self.outage.error, "replica": self.cfg.replica}
        with contextlib.suppress(BackendUnavailable):  # down again already: said next time
            self._record("backend_down", self.clock.now_ms(), epoch, **detail)

    def _round(self) -> int:
        if self.heartbeat is not None:
            self.heartbeat.beat()
        if self.clock.monotonic_ms() >= self.next_renew_ms:
            self._renew()
        mono = self.clock.monotonic_ms()
        self.metrics.leading(self.lease.epoch if self.lease and self.leading() else None)
        if not self.leading():
            return max(1, self.next_renew_ms - mono)
        now = self.clock.now_ms()
        if now >= self.next_scan_ms or self.next_scan_ms - now > self.cfg.scan_ms:
            # (the second: the wall clock was set back; scan now, not when it comes round)
            if self._dispatch(now) >= self.cfg.batch and self.cfg.election == "lease":
                return 0  # more is due: claim the next batch at once
            self.store.record_sample(now, self.queue.depth())
            self._reconcile(now)
            self._duties(now)
            self.next_scan_ms = self._next_scan(now)
        until_scan = self.next_scan_ms - self.clock.now_ms()
        until_renew = self.next_renew_ms - self.clock.monotonic_ms()
        return max(1, min(until_scan, until_renew))

    def _next_scan(self, now: int) -> int:
        """The next whole ``scan_ms`` boundary, or the next PENDING trigger if sooner."""
        boundary = (now // self.cfg.scan_ms + 1) * self.cfg.scan_ms
        if self.cfg.election == "off":
            return boundary  # (its due rows stay PENDING: it copies at its own pace)
        due = self.store.next_due_ms(now)
        return boundary if due is None else min(boundary, due)

    def wake(self) -> None:
        """Scan at the next step instead of at the next whole scan interval."""
        self.next_scan_ms = self.clock.now_ms()

    def leading(self) -> bool:
        """True until the local deadline of the lease this replica holds."""
        return self.lease is not None and self.clock.monotonic_ms() < self.deadline_ms

    def _renew(self) -> None:
        sent = self.clock.monotonic_ms()
        self.next_renew_ms = sent + max(1, self.cfg.ttl_ms // 3)
        try:
            lease = self.elector.acquire_or_renew(self.owner, self.cfg.ttl_ms)
        except BackendUnavailable as exc:
            self._unreachable = exc  # keep what we have; it still ends at its local deadline
            return
        fresh = lease is not None and (self.lease is None or self.lease.epoch != lease.epoch)
        self.lease = lease
        if lease is None:
            # A standby asks often so it takes over within STANDBY_POLL_MS of the expiry.
            self.next_renew_ms = sent + min(self.cfg.ttl_ms // 3, STANDBY_POLL_MS)
            return
        self.deadline_ms = sent + self.cfg.ttl_ms - self.cfg.ttl_ms // MARGIN_DIVISOR
        if fresh and self.cfg.election == "lease":
            self._took_over(lease, self.clock.now_ms())
            self.wake()  # a new leader scans at once, not at the next boundary

    def _record(self, kind: str, now: int, epoch: int, **detail: object) -> None:
        """Append this replica's event to the store's log."""
        event = Event(
            kind=kind, at_ms=now, holder=self.owner, epoch=epoch, pid=self.pid, detail=detail
        )
        self.store.record_event(event)

    def _took_over(self, lease: Lease, now: int) -> None:
        self._record("acquire", now, lease.epoch, replica=self.cfg.replica)
        if self.cfg.timers == "in-memory":
            # Timers lived in the previous leader's memory: what fell due before now is lost.
            missed = self.store.mark_missed(now, now)
            if missed:
                self._record("missed", now, lease.epoch, count=missed)

    def _dispatch(self, now: int) -> int:
        if self.cfg.election == "off":
            return self._dispatch_unclaimed(now)
        assert self.lease is not None
        request = self._pause_request()
        if not self.cfg.fencing or request is not None:
            return self._dispatch_in_two(now, request)
        try:
            n = self.store.dispatch_due(
                now, self.cfg.batch, self.lease.epoch, clock=self.clock.now_ms
            )
        except FencedError as exc:
            self._fenced(exc, now)
            return 0
        self.dispatched += n
        self.metrics.dispatched(n)
        return n

    def _pause_request(self) -> float | None:
        """Seconds a chaos request asks this leader to stay paused mid-dispatch (the lab only)."""
        if not self.cfg.chaos:
            return None
        found = self.store.pause_request(self.owner, self.pauses_seen_ms)
        if found is None:
            return None
        at, seconds, until = found
        if self.clock.now_ms() >= until:
            self.pauses_seen_ms = at  # too late: the chaos command has given up on it
            return None
        return seconds

    def _dispatch_in_two(self, now: int, pause_s: float | None) -> int:
        """Read a batch, then write it: how a leader without fencing dispatches (``--fencing
        off``: its write checks nothing), and what a chaos pause catches in between — the
        leader stops itself, holding what it read, and writes it when it resumes (fenced: the
        store refuses it if the lease moved on)."""
        assert self.lease is not None
        held = self.store.read_due(now, self.cfg.batch)
        if not held:
            return 0  # (a pause request waits for a batch to catch)
        if pause_s is not None:
            self.pauses_seen_ms = self.clock.now_ms()
            self._stop_self(pause_s, len(held), now)
        try:
            n = self.store.dispatch_held(
                held, self.clock.now_ms(), self.lease.epoch, fenced=self.cfg.fencing
            )
        except FencedError as exc:
            self._fenced(exc, now, held=len(held))
            return 0
        if not self.cfg.fencing and n:
            self._record(
                "unfenced_write",
                self.clock.now_ms(),
                self.lease.epoch,
                count=n,
                replica=self.cfg.replica,
            )
        self.dispatched += n
        return n

    def _stop_self(self, seconds: float, held: int, now: int) -> None:
        """Stop here, holding what was read, for ``seconds``: ``stop_self`` (SIGSTOP this
        process; the chaos command that asked sends SIGCONT)."""
        assert self.lease is not None
        detail = {"held": held, "for_s": seconds, "replica": self.cfg.replica, "mid_dispatch": True}
        self._record("paused_mid_dispatch", now, self.lease.epoch, **detail)
        self.stop_self(seconds)

    def _reconcile(self, now: int) -> None:
        mono = self.clock.monotonic_ms()
        if self.cfg.election == "off" or self.lease is None or mono < self.next_reconcile_ms:
            return
        self.next_reconcile_ms = mono + self.cfg.reconcile_ms
        try:
            n = self.queue.reconcile(now, self.lease.epoch)
        except FencedError as exc:
            self._fenced(exc, now)
            return
        if n:
            self._record("reconciled", now, self.lease.epoch, count=n, replica=self.cfg.replica)

    def _duties(self, now: int) -> None:
        for duty in self.duties:
            if self.cfg.election == "off" or self.lease is None:
                return
            try:
                duty.run(now, self.lease.epoch)
            except FencedError as exc:
                self._fenced(exc, now)

    def _dispatch_unclaimed(self, now: int) -> int:
        """Cron on every replica: no claim; each scan sends a copy of what is PENDING and of
        everything that fell due since this replica's last scan, whatever the others did —
        so k replicas running send k copies of each task: (k − 1) × due duplicates, as the
        model counts them."""
        tasks: Sequence[Task] = self.store.read_due(
            now, UNBOUNDED, copied_since_ms=self.copied_until
        )
        if tasks:
            self.store.enqueue_copies(tasks, now)
        self.copied_until = max(self.copied_until, now)
        self.dispatched += len(tasks)
        self.metrics.dispatched(len(tasks))
        return len(tasks)

    def _fenced(self, exc: FencedError, now: int, held: int = 0) -> None:
        detail = {"current": exc.current, "replica": self.cfg.replica, "count": held}
        self._record("fenced", now, exc.epoch, **detail)
        self.lease = None
        self.next_renew_ms = self.clock.monotonic_ms()
