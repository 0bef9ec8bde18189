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

One way to dispatch: fenced, in one transaction. The lab's anti-patterns (no election,
in-memory timers, an unfenced write, a pause mid-dispatch) are its own subclass
(``cronlab.lab.scheduler``), which replaces the methods marked "a subclass may replace".
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from cronlab.exceptions import BackendUnavailable, FencedError
from cronlab.metrics import NO_METRICS, Metrics
from cronlab.ports import Clock, Event, Lease, LeaseElector, Queue, Store, Waiter
from cronlab.runtime.heartbeat import Heartbeat
from cronlab.runtime.outage import Outage

STANDBY_POLL_MS = 500
MARGIN_DIVISOR = 10  # a leader stops TTL/10 before its lease can have expired anywhere


@dataclass(frozen=True, kw_only=True)
class SchedulerConfig:
    """A replica's knobs; times in milliseconds."""

    replica: int
    ttl_ms: int = 10_000
    scan_ms: int = 1_000
    batch: int = 10_000
    reconcile_ms: int = 10_000  # how often the leader looks for tasks whose message was lost


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
        if self.lease is not None:
            self.give_up()

    def give_up(self) -> None:
        """At the end of ``run``: release the lease, so a standby takes over at once (a
        subclass may replace it)."""
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
                self.record("backend_unreachable", self.clock.now_ms(), epoch, **detail)
        return wait

    def _note_outage(self, lasted_ms: int) -> None:
        epoch = self.lease.epoch if self.lease else 0
        detail = {"lasted_ms": lasted_ms, "error": self.outage.error, "replica": self.cfg.replica}
        with contextlib.suppress(BackendUnavailable):  # down again already: said next time
            self.record("backend_down", self.clock.now_ms(), epoch, **detail)

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
            if self.more_due(self.dispatch(now)):
                return 0  # more is due: claim the next batch at once
            self.store.record_sample(now, self.queue.depth())
            self.leader_work(now)
            self.next_scan_ms = self.next_scan(now)
        until_scan = self.next_scan_ms - self.clock.now_ms()
        until_renew = self.next_renew_ms - self.clock.monotonic_ms()
        return max(1, min(until_scan, until_renew))

    def more_due(self, dispatched: int) -> bool:
        """True when a dispatch came back full: claim the next batch at once (a subclass may
        replace it)."""
        return dispatched >= self.cfg.batch

    def next_scan(self, now: int) -> int:
        """The next whole ``scan_ms`` boundary, or the next PENDING trigger if sooner (a
        subclass may replace it)."""
        boundary = (now // self.cfg.scan_ms + 1) * self.cfg.scan_ms
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
        if fresh:
            self.took_over(lease, self.clock.now_ms())

    def record(self, kind: str, now: int, epoch: int, **detail: object) -> None:
        """Append this replica's event to the store's log."""
        event = Event(
            kind=kind, at_ms=now, holder=self.owner, epoch=epoch, pid=self.pid, detail=detail
        )
        self.store.record_event(event)

    def took_over(self, lease: Lease, now: int) -> None:
        """A new lease (a fresh epoch): say so, and scan at once, not at the next boundary (a
        subclass may replace it)."""
        self.record("acquire", now, lease.epoch, replica=self.cfg.replica)
        self.wake()

    def dispatch(self, now: int) -> int:
        """Claim what is due, fenced by this leader's epoch, in one transaction; how many (a
        subclass may replace it)."""
        assert self.lease is not None
        try:
            n = self.store.dispatch_due(
                now, self.cfg.batch, self.lease.epoch, clock=self.clock.now_ms
            )
        except FencedError as exc:
            self.fenced(exc, now)
            return 0
        self.queue.relay()  # a queue elsewhere publishes what this dispatch committed
        self.dispatched += n
        self.metrics.dispatched(n)
        return n

    def leader_work(self, now: int) -> None:
        """After a scan: the reconcile and the duties, fenced by the epoch (a subclass may
        replace it)."""
        self._reconcile(now)
        self._duties(now)

    def _reconcile(self, now: int) -> None:
        mono = self.clock.monotonic_ms()
        if self.lease is None or mono < self.next_reconcile_ms:
            return
        self.next_reconcile_ms = mono + self.cfg.reconcile_ms
        try:
            n = self.queue.reconcile(now, self.lease.epoch)
        except FencedError as exc:
            self.fenced(exc, now)
            return
        if n:
            self.record("reconciled", now, self.lease.epoch, count=n, replica=self.cfg.replica)

    def _duties(self, now: int) -> None:
        for duty in self.duties:
            if self.lease is None:
                return
            try:
                duty.run(now, self.lease.epoch)
            except FencedError as exc:
                self.fenced(exc, now)

    def fenced(self, exc: FencedError, now: int, held: int = 0) -> None:
        """The store refused this leader's epoch: its leadership ends here."""
        detail = {"current": exc.current, "replica": self.cfg.replica, "count": held}
        self.record("fenced", now, exc.epoch, **detail)
        self.lease = None
        self.next_renew_ms = self.clock.monotonic_ms()
