"""The lab's model of distributed cron: exact, event-driven, no I/O.

Time is whole seconds; t = 0 is 00:00:00. A workload is a set of buckets: ``due`` tasks whose
trigger time is t = 60·minute. The rules (docs/model.md states them in full):

* Replicas 0..R-1 are alive at t = 0. With ``lease`` election replica 0 holds the lease and
  renews it while it runs; when the holder crashes or is paused at T the lease expires at
  T + TTL and, at every second t >= expiry with no holder, the lowest-id replica that runs
  acquires it. With ``off`` every running replica is a dispatcher.
* A dispatcher scans at every minute boundary and at the second it becomes one (acquires the
  lease, restarts, resumes). Durable: a scan dispatches every PENDING task with trigger <= t,
  and k dispatchers scanning in one second each dispatch a copy. In-memory: at a boundary every
  running dispatcher fires that bucket; a boundary with no dispatcher is missed.
* A leader paused at T holds the batch it had read then (up to ``batch`` tasks). Resumed while
  its lease lasts, it writes it and goes on; resumed after a takeover, its write is refused
  with fencing (``fenced_writes``) or published without — a duplicate of each task in it.
* Workers execute ``min(queue, running pods × rate)`` tasks a second, FIFO. A pod that crashes
  at T does so just before its ack: its share of second T's executions comes back after the
  visibility timeout (``redelivered``); with external effects each is a duplicate.
* Lost messages (``--lose``) are re-enqueued by the leader's next reconcile, or stay ``stuck``.
* Order within a second: crashes, pauses, resumes, restarts, lease acquisition, scans and
  dispatch, reconcile, losses, execution, worker crashes.

The simulation visits only the seconds where something happens and computes the queue between
them in closed form, so a day of a million tasks a minute costs a few thousand steps.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

from cronlab.exceptions import ConfigError

# What one run may ask for: each bound keeps a request's cost (time, memory) small.
MAX_REPLICAS, MAX_WORKERS, MAX_RATE, MAX_TTL_S = 32, 100_000, 10**8, 86_400
MAX_TASKS, MAX_BUCKETS, MAX_SECONDS = 10**12, 1_440, 10**9
MAX_FAULTS = 64  # of each kind
LATE_S = 60  # a task first executed this much later than without the faults is late
LANES = 64  # pods with a lane each in the result; beyond, only the crashed ones

Election = Literal["lease", "off"]
Effects = Literal["transactional", "external"]
EventKind = Literal[
    "crash",
    "restart",
    "acquire",
    "dispatch",
    "missed",
    "noop",
    "pause",
    "resume",
    "fenced",
    "zombie",
    "worker_crash",
    "worker_restart",
    "redeliver",
    "lose",
    "reconcile",
]
State = Literal["leader", "standby", "dispatcher", "paused", "down"]


@dataclass(frozen=True, kw_only=True)
class Fault:
    """A crash at second ``at`` of replica ``replica``, or of the leader when it is None."""

    at: int
    replica: int | None = None

    def label(self) -> str:
        target = "leader" if self.replica is None else f"replica:{self.replica}"
        return f"{target}@{self.at}"


@dataclass(frozen=True, kw_only=True)
class Pause:
    """Replica ``replica`` (None: the leader) stops at second ``at`` for ``seconds`` (a GC
    pause, SIGSTOP, a frozen VM) and resumes where it was."""

    at: int
    seconds: int
    replica: int | None = None

    def label(self) -> str:
        target = "leader" if self.replica is None else f"replica:{self.replica}"
        return f"{target}@{self.at}:{self.seconds}"


@dataclass(frozen=True, kw_only=True)
class WorkerCrash:
    """Worker pod ``pod`` dies at the end of second ``at``, just before its ack."""

    at: int
    pod: int

    def label(self) -> str:
        return f"{self.pod}@{self.at}"


@dataclass(frozen=True, kw_only=True)
class Loss:
    """``count`` queued messages lost at second ``at`` (a queue failover): the newest ones."""

    at: int
    count: int

    def label(self) -> str:
        return f"{self.count}@{self.at}"


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """Everything the model needs; validated on construction (ConfigError names the field)."""

    buckets: tuple[tuple[int, int], ...]
    replicas: int = 3
    workers: int = 5
    rate: int = 200
    election: Election = "lease"
    lease_ttl: int = 10
    durable: bool = True
    faults: tuple[Fault, ...] = ()
    restart_after: int | None = 300
    pauses: tuple[Pause, ...] = ()
    fencing: bool = True
    batch: int = 10_000
    worker_crashes: tuple[WorkerCrash, ...] = ()
    visibility: int = 30
    pod_restart: int | None = 30
    effects: Effects = "transactional"
    losses: tuple[Loss, ...] = ()
    reconcile: int | None = 60

    def __post_init__(self) -> None:
        """Every number within what one run may cost (the page, the API and the CLI alike)."""
        _within("replicas", self.replicas, 1, MAX_REPLICAS)
        _within("workers", self.workers, 1, MAX_WORKERS)
        _within("rate (tasks/s per pod)", self.rate, 1, MAX_RATE)
        _within("lease TTL (s)", self.lease_ttl, 1, MAX_TTL_S)
        _require(self.election in ("lease", "off"), f"unknown election {self.election!r}")
        _require(self.effects in ("transactional", "external"), f"unknown effects {self.effects!r}")
        if self.restart_after is not None:
            _within("restart-after (s)", self.restart_after, 0, MAX_SECONDS)
        _within("batch", self.batch, 1, MAX_TASKS)
        _within("visibility (s)", self.visibility, 1, MAX_TTL_S)
        if self.pod_restart is not None:
            _within("pod restart (s)", self.pod_restart, 0, MAX_SECONDS)
        if self.reconcile is not None:
            _within("reconcile (s)", self.reconcile, 1, MAX_TTL_S)
        _require(len(self.buckets) <= MAX_BUCKETS, f"at most {MAX_BUCKETS:,} buckets")
        for minute, count in self.buckets:
            _within("bucket minute", minute, 0, MAX_SECONDS // 60)
            _within("bucket count", count, 0, MAX_TASKS)
        _within("tasks due", sum(c for _, c in self.buckets), 0, MAX_TASKS)
        self._check_faults()

    def _check_faults(self) -> None:
        for what, items in (
            ("crashes", self.faults),
            ("pauses", self.pauses),
            ("worker crashes", self.worker_crashes),
            ("losses", self.losses),
        ):
            _require(len(items) <= MAX_FAULTS, f"at most {MAX_FAULTS} {what}")
        for fault in self.faults:
            _within(f"crash time (s) of {fault.label()}", fault.at, 0, MAX_SECONDS)
            self._replica(fault.replica, "crash")
        for pause in self.pauses:
            _within(f"pause time (s) of {pause.label()}", pause.at, 0, MAX_SECONDS)
            _within(f"pause length (s) of {pause.label()}", pause.seconds, 1, MAX_TTL_S)
            self._replica(pause.replica, "pause")
        for crash in self.worker_crashes:
            _within(f"worker crash time (s) of {crash.label()}", crash.at, 0, MAX_SECONDS)
            _require(
                0 <= crash.pod < self.workers,
                f"worker crash target pod {crash.pod} does not exist (pods 0..{self.workers - 1})",
            )
        for loss in self.losses:
            _within(f"loss time (s) of {loss.label()}", loss.at, 0, MAX_SECONDS)
            _within(f"lost messages of {loss.label()}", loss.count, 1, MAX_TASKS)

    def _replica(self, rid: int | None, what: str) -> None:
        _require(
            rid is None or 0 <= rid < self.replicas,
            f"{what} target replica {rid} does not exist (replicas 0..{self.replicas - 1})",
        )

    @property
    def capacity(self) -> int:
        """Tasks the worker fleet executes per second with every pod up: pods × rate."""
        return self.workers * self.rate

    @property
    def due(self) -> int:
        return sum(count for _, count in self.buckets)

    @property
    def calm(self) -> Scenario:
        """The same scenario without its faults: what ``late`` is measured against."""
        return replace(self, faults=(), pauses=(), worker_crashes=(), losses=())

    @property
    def has_faults(self) -> bool:
        return bool(self.faults or self.pauses or self.worker_crashes or self.losses)


@dataclass(frozen=True, kw_only=True)
class Totals:
    """The run's metrics; the engine's ``report`` uses exactly these names."""

    due: int
    dispatched: int
    executed: int
    duplicates: int
    missed: int
    backlog_peak: int
    drain_time_s: int
    takeover_delays_s: tuple[int, ...]
    fenced_writes: int = 0
    redelivered: int = 0
    stuck: int = 0
    late: int = 0


@dataclass(frozen=True, kw_only=True)
class LogEvent:
    """Something the control plane did at second ``t`` (for the lab's event log)."""

    t: int
    kind: EventKind
    replica: int | None
    epoch: int
    count: int = 0
    text: str = ""


@dataclass(frozen=True, kw_only=True)
class Span:
    """Replica (or pod) ``who`` was in ``state`` from second ``start`` to ``end`` (exclusive);
    ``epoch`` is the lease's while it leads, ``held`` the batch a paused leader holds."""

    who: int
    state: str
    start: int
    end: int
    epoch: int = 0
    held: int = 0


@dataclass(frozen=True, kw_only=True)
class Timeline:
    """Run-length encoded per-second series.

    Run i covers seconds ``t[i] .. t[i] + n[i] - 1``; in each of them ``dispatched``,
    ``executed``, ``duplicates``, ``missed``, ``requeued``, ``lost`` and ``leader`` (-1: no
    lease holder) take the run's value, and the backlog after execution is
    ``backlog[i] + backlog_step[i] * k`` at second ``t[i] + k``. The backlog counts every
    unacked message, visible or in flight. Runs are contiguous from t = 0 to the last
    simulated second.
    """

    t: tuple[int, ...]
    n: tuple[int, ...]
    dispatched: tuple[int, ...]
    executed: tuple[int, ...]
    duplicates: tuple[int, ...]
    missed: tuple[int, ...]
    leader: tuple[int, ...]
    backlog: tuple[int, ...]
    backlog_step: tuple[int, ...]
    requeued: tuple[int, ...] = ()
    lost: tuple[int, ...] = ()

    @property
    def end(self) -> int:
        """One past the last simulated second."""
        return self.t[-1] + self.n[-1] if self.t else 0


@dataclass(frozen=True, kw_only=True)
class Result:
    scenario: Scenario
    totals: Totals
    timeline: Timeline
    log: tuple[LogEvent, ...]
    replicas: tuple[Span, ...] = ()  # each replica's states over time
    pods: tuple[Span, ...] = ()  # pods' lanes, up or down (beyond LANES pods: crashed ones)


def simulate(s: Scenario) -> Result:
    """Run scenario ``s`` to its end and return totals, the timeline, the log and the lanes."""
    buckets = tuple(sorted((m, c) for m, c in s.buckets if c > 0))
    s = replace(s, buckets=buckets)
    run = _Run(s).go()
    late = _late(run.queue.firsts, _Run(s.calm).go().queue.firsts) if s.has_faults else 0
    return run.result(late)


def first_executions(s: Scenario) -> list[tuple[int, int, int]]:
    """When ``s``'s tasks first take effect, oldest first: runs of (second, seconds, tasks a
    second). What ``late`` compares a faulty run with (its calm run's)."""
    buckets = tuple(sorted((m, c) for m, c in s.buckets if c > 0))
    return list(_Run(replace(s, buckets=buckets)).go().queue.firsts)


# -- the control plane ---------------------------------------------------------------------


@dataclass(kw_only=True)
class _Zombie:
    """A leader paused with what it read and has not written: ``held`` rows (durable), or the
    in-memory timers of the boundaries it slept through (``unfired``: second → count)."""

    replica: int
    epoch: int
    held: int
    unfired: dict[int, int] = field(default_factory=dict)
    lost_lease: bool = False
    taken_over: bool = False  # a new leader took the lease (and scanned) while it slept


@dataclass(kw_only=True)
class _Step:
    """What a visited second adds to the queue, before execution."""

    t: int
    arrivals: list[tuple[int, bool]] = field(default_factory=list)  # (count, a first copy?)
    dispatched: int = 0
    duplicates: int = 0
    leader: int = -1

    def add(self, count: int, first: bool) -> None:
        if count > 0:
            self.arrivals.append((count, first))
            self.dispatched += count
            self.duplicates += 0 if first else count


class _Run:
    """One simulation: the control plane and its queue; ``go`` runs it to its end."""

    def __init__(self, s: Scenario) -> None:
        self.s = s
        self.alive = [True] * s.replicas
        self.paused_until: list[int | None] = [None] * s.replicas
        self.holder: int | None = 0 if s.election == "lease" else None
        self.epoch = 1
        self.expiry: int | None = None
        self.freed_at = 0
        self.restarts: list[tuple[int, int]] = []
        self.next_bucket = 0
        self.dispatched_upto = 0
        self.takeovers: list[int] = []
        self.log: list[LogEvent] = []
        self.zombie: _Zombie | None = None
        # Earlier zombies still asleep when a later leader paused (it took ``zombie``'s place):
        # by replica. They lost the lease long ago; they wake up as any zombie does.
        self.dozing: dict[int, _Zombie] = {}
        self.owed: dict[int, list[int]] = {}  # off: boundaries a paused replica slept through
        self.unfired: dict[int, int] = {}  # off, in-memory: boundary → count nobody fired yet
        self.fenced = self.redelivered = self.stuck = 0
        self.lost_waiting = 0  # lost first copies a reconcile can still bring back
        self.queue = _Fifo(s)
        self.times: list[int] = []
        self.states: dict[int, tuple[str, int, int, int]] = {}  # r → (state, since, epoch, held)
        self.spans: list[Span] = []

    def go(self) -> _Run:
        s = self.s
        crashes = sorted(s.faults, key=lambda f: f.at)
        pauses = sorted(s.pauses, key=lambda p: p.at)
        pods = sorted(s.worker_crashes, key=lambda w: w.at)
        losses = sorted(s.losses, key=lambda x: x.at)
        starts = {0, *(60 * m for m, _ in s.buckets), *(f.at for f in crashes)}
        starts |= {p.at for p in pauses} | {w.at for w in pods} | {x.at for x in losses}
        self.times = sorted(starts)
        for r in range(s.replicas):
            self._state(r, 0, "leader" if r == self.holder else self._idle())
        fi = pi = wi = li = 0
        last = -1
        while self.times:
            t = heapq.heappop(self.times)
            if t == last:
                continue
            left = fi < len(crashes) or pi < len(pauses) or wi < len(pods) or li < len(losses)
            if last >= 0 and not left and self._settled() and t > self.queue.empty_at():
                break
            last = t
            self.queue.begin(t)
            step = _Step(t=t)
            while fi < len(crashes) and crashes[fi].at == t:
                self._crash(t, crashes[fi])
                fi += 1
            while pi < len(pauses) and pauses[pi].at == t:
                self._pause(t, pauses[pi])
                pi += 1
            fresh = self._resume(t, step)
            fresh += self._restart_due(t)
            if (promoted := self._acquire(t)) is not None:
                fresh.append(promoted)
            step.leader = -1 if self.holder is None or s.election == "off" else self.holder
            self._scan(step, fresh)
            self._reconcile(step)
            self.queue.arrive(step)
            while li < len(losses) and losses[li].at == t:
                self._lose(t, losses[li])
                li += 1
            self.queue.execute(t)
            while wi < len(pods) and pods[wi].at == t:
                self._worker_crash(t, pods[wi])
                wi += 1
            for nxt in self._upcoming(t):
                heapq.heappush(self.times, nxt)
        self._end()
        return self

    def _end(self) -> None:
        """What never ran: in-memory boundaries nobody fired, lost copies never reconciled,
        and what is left in a queue that no pod will ever drain."""
        self._miss(self.unfired)
        if self.s.durable:  # PENDING rows that no replica was left to dispatch
            self._miss({60 * m: c for m, c in self.s.buckets[self.dispatched_upto :]})
        self.stuck += self.lost_waiting + self.queue.finish()
        self.lost_waiting = 0

    def _settled(self) -> bool:
        """Nothing scheduled can still change the control plane, and nothing PENDING can
        still go out."""
        return (
            self.next_bucket >= len(self.s.buckets)
            and not self.restarts
            and all(u is None for u in self.paused_until)
            and not self.queue.events_left()
            and not (self.lost_waiting and self._reconcile_hope())
            and not self._can_still_dispatch()
        )

    def _upcoming(self, t: int) -> list[int]:
        """Seconds the current state schedules: restarts, a lease expiry, resumes, the queue's
        own (redeliveries, pod restarts) and the next reconcile."""
        out = [r_t for r_t, _ in self.restarts]
        if self.expiry is not None and self.expiry > t:
            out.append(self.expiry)
        out += [u for u in self.paused_until if u is not None and u > t]
        out += self.queue.upcoming(t)
        every = self.s.reconcile
        if self.lost_waiting and every is not None and self._reconcile_hope():
            out.append((t // every + 1) * every)
        return out

    def _reconcile_hope(self) -> bool:
        """A leader can still come to run a reconcile."""
        live = any(self.alive) or bool(self.restarts)
        return self.s.election == "lease" and self.s.reconcile is not None and live

    # -- replicas ---------------------------------------------------------------------------

    def runs(self, r: int) -> bool:
        """Alive and not paused: it can lead, dispatch, acquire."""
        return self.alive[r] and self.paused_until[r] is None

    def dispatchers(self) -> list[int]:
        if self.s.election == "off":
            return [r for r in range(self.s.replicas) if self.runs(r)]
        return [] if self.holder is None or not self.runs(self.holder) else [self.holder]

    def _idle(self) -> str:
        return "dispatcher" if self.s.election == "off" else "standby"

    def _state(self, r: int, t: int, state: str, held: int = 0) -> None:
        """Replica ``r`` is in ``state`` from ``t`` on (its lane in the lease timeline)."""
        epoch = self.epoch if state == "leader" else 0
        now = self.states.get(r)
        if now is not None and (now[0], now[2], now[3]) == (state, epoch, held):
            return
        if now is not None and now[1] < t:
            span = Span(who=r, state=now[0], start=now[1], end=t, epoch=now[2], held=now[3])
            self.spans.append(span)
        self.states[r] = (state, t, epoch, held)

    def note(self, t: int, kind: EventKind, replica: int | None, count: int, text: str) -> None:
        event = LogEvent(t=t, kind=kind, replica=replica, epoch=self.epoch, count=count, text=text)
        self.log.append(event)

    def _target(self, replica: int | None) -> int | None:
        if replica is not None:
            return replica
        if self.s.election == "lease":
            return self.holder
        live = self.dispatchers()
        return live[0] if live else None

    def _crash(self, t: int, fault: Fault) -> None:
        victim = self._target(fault.replica)
        if victim is None or not self.alive[victim]:
            self.note(t, "noop", fault.replica, 0, f"crash {fault.label()}: no target alive")
            return
        self.alive[victim] = False
        paused = self.paused_until[victim] is not None
        self.paused_until[victim] = None
        self.owed.pop(victim, None)
        if self.s.restart_after is not None:
            heapq.heappush(self.restarts, (t + self.s.restart_after, victim))
        self._state(victim, t, "down")
        if self.zombie is not None and self.zombie.replica == victim:
            self._miss(self.zombie.unfired)  # a dead process fires nothing it held
            self.zombie = None
        if (dozing := self.dozing.pop(victim, None)) is not None:
            self._miss(dozing.unfired)
        if self.holder == victim:
            if not paused:  # a paused leader stopped renewing when it was paused
                self.freed_at, self.expiry = t, t + self.s.lease_ttl
            self.holder = None
            self.note(
                t, "crash", victim, 0, f"leader {victim} crashed; lease free at t={self.expiry}"
            )
        else:
            self.note(t, "crash", victim, 0, f"replica {victim} crashed")

    def _miss(self, boundaries: dict[int, int]) -> None:
        for at, count in boundaries.items():
            self.queue.missed[at] = self.queue.missed.get(at, 0) + count
        boundaries.clear()

    def _pause(self, t: int, pause: Pause) -> None:
        victim = self._target(pause.replica)
        if victim is None or not self.runs(victim):
            self.note(t, "noop", pause.replica, 0, f"pause {pause.label()}: no target running")
            return
        self.paused_until[victim] = t + pause.seconds
        if self.s.election == "lease" and self.holder == victim:
            held = min(self.s.batch, self._pending(t)) if self.s.durable else 0
            if self.zombie is not None:  # an earlier leader still asleep keeps what it held
                self.dozing[self.zombie.replica] = self.zombie
            self.zombie = _Zombie(replica=victim, epoch=self.epoch, held=held)
            self.freed_at, self.expiry = t, t + self.s.lease_ttl
            self._state(victim, t, "paused", held)
            what = f", holding {held:,} read and not yet written" if held else ""
            self.note(
                t, "pause", victim, held, f"leader {victim} paused for {pause.seconds} s{what}"
            )
            return
        self._state(victim, t, "paused")
        self.note(t, "pause", victim, 0, f"replica {victim} paused for {pause.seconds} s")

    def _resume(self, t: int, step: _Step) -> list[int]:
        """Paused replicas whose pause ends now. A leader whose lease outlasted its pause goes
        on leading (a fresh scan: it writes what it held); a zombie's held batch is refused
        (fencing) or published; a replica under ``off`` sends the copies it owes."""
        fresh: list[int] = []
        for r in range(self.s.replicas):
            if self.paused_until[r] != t:
                continue
            self.paused_until[r] = None
            zombie = self.zombie
            if zombie is not None and zombie.replica == r:
                self.zombie = None
            else:
                zombie = self.dozing.pop(r, None)
            if zombie is not None:
                if self.holder == r:
                    self._state(r, t, "leader")
                    self.expiry = None
                    for at, count in zombie.unfired.items():  # its timers fire now, late
                        step.add(count, True)
                        self.note(
                            t,
                            "dispatch",
                            r,
                            count,
                            f"leader {r} woke up: timers of t={at} fire late",
                        )
                    self.note(t, "resume", r, 0, f"leader {r} resumed within its lease")
                    fresh.append(r)
                    continue
                self._zombie_writes(t, zombie, step)
            self._state(r, t, self._idle())
            self.note(t, "resume", r, 0, f"replica {r} resumed as a {self._idle()}")
            if self.s.election == "off":
                fresh.append(r)
        return fresh

    def _zombie_writes(self, t: int, z: _Zombie, step: _Step) -> None:
        """A leader that lost its lease while paused writes its first batch — what it read
        (durable), or its timers' (in-memory) — before its next renewal tells it the lease is
        gone. With fencing the write is refused; without, it is published: a duplicate of
        each row the new leader dispatched meanwhile. In-memory timers beyond that batch are
        lost with its leadership."""
        timers = sum(z.unfired.values())
        count = z.held if self.s.durable else min(self.s.batch, timers)
        if not count:
            self._miss(z.unfired)
            return
        if self.s.fencing:
            self.fenced += count
            self._miss(z.unfired)
            self.note(
                t,
                "fenced",
                z.replica,
                count,
                f"zombie {z.replica} (epoch {z.epoch}) woke up: its write of {count:,} was "
                f"refused — its lease is gone (epoch {self.epoch})",
            )
            return
        if self.s.durable and not z.taken_over:
            return  # nobody dispatched them: still PENDING, its own scan sends them once
        first = not self.s.durable
        if first:  # its oldest timers fire, late; the rest of what it slept through is lost
            left = count
            for at in sorted(z.unfired):
                took = min(left, z.unfired[at])
                z.unfired[at] -= took
                left -= took
            self._miss(z.unfired)
        step.add(count, first)
        self.note(
            t,
            "zombie",
            z.replica,
            count,
            f"zombie {z.replica} (epoch {z.epoch}, no fencing) published {count:,}"
            + ("" if first else f": duplicates of what epoch {self.epoch} dispatched"),
        )

    def _restart_due(self, t: int) -> list[int]:
        back = []
        while self.restarts and self.restarts[0][0] == t:
            _, r = heapq.heappop(self.restarts)
            self.alive[r] = True
            back.append(r)
            self._state(r, t, self._idle())
            self.note(t, "restart", r, 0, f"replica {r} restarted as a {self._idle()}")
        return back if self.s.election == "off" else []

    def _acquire(self, t: int) -> int | None:
        if self.s.election != "lease" or self.expiry is None or t < self.expiry:
            return None
        z = self.zombie
        if z is not None and self.holder == z.replica and not z.lost_lease:
            self.holder, z.lost_lease = None, True
            self._state(z.replica, t, "paused", z.held)
        if self.holder is not None:
            return None
        runners = [r for r in range(self.s.replicas) if self.runs(r)]
        if not runners:
            return None
        self.holder, self.expiry = runners[0], None
        self.epoch += 1
        if z is not None:
            z.taken_over = True
        self.takeovers.append(t - self.freed_at)
        self._state(self.holder, t, "leader")
        self.note(
            t,
            "acquire",
            self.holder,
            0,
            f"replica {self.holder} took the lease (epoch {self.epoch}) "
            f"after {t - self.freed_at} s",
        )
        return self.holder

    # -- dispatch ---------------------------------------------------------------------------

    def _pending(self, t: int) -> int:
        upto, total = self.dispatched_upto, 0
        while upto < len(self.s.buckets) and 60 * self.s.buckets[upto][0] <= t:
            total += self.s.buckets[upto][1]
            upto += 1
        return total

    def _can_still_dispatch(self) -> bool:
        pending = self.dispatched_upto < len(self.s.buckets) and self.s.durable
        return pending and (any(self.alive) or bool(self.restarts))

    def _scan(self, step: _Step, fresh: list[int]) -> None:
        t, buckets = step.t, self.s.buckets
        boundary = self.next_bucket < len(buckets) and 60 * buckets[self.next_bucket][0] == t
        dispatchers = self.dispatchers()
        scanners = dispatchers if boundary else [r for r in fresh if r in dispatchers]
        before = self.dispatched_upto
        if boundary:
            self.next_bucket += 1
            self._note_sleepers(self.next_bucket - 1)
        if self.s.durable:
            self._scan_durable(step, len(scanners))
        elif boundary:
            self._fire_in_memory(step, self.next_bucket - 1, len(dispatchers))
        self._owed_copies(step, fresh, before)

    def _note_sleepers(self, bucket: int) -> None:
        """Replicas paused at a boundary: a leader's timers (in-memory) wait with it; under
        ``off`` each sleeper owes its copy of the bucket."""
        if self.zombie is not None and not self.s.durable and self.dispatchers() == []:
            at, due = 60 * self.s.buckets[bucket][0], self.s.buckets[bucket][1]
            self.zombie.unfired[at] = due
        if self.s.election == "off":
            for r in range(self.s.replicas):
                if self.alive[r] and self.paused_until[r] is not None:
                    self.owed.setdefault(r, []).append(bucket)

    def _owed_copies(self, step: _Step, fresh: list[int], scanned_from: int) -> None:
        """``off``: a replica back from a pause sends its own copy of every bucket it slept
        through that its scan just now did not dispatch (the others already did: duplicates;
        in-memory, the first copy of one nobody fired)."""
        for r in fresh:
            for bucket in self.owed.pop(r, []):
                if self.s.durable and bucket >= scanned_from:
                    continue  # still PENDING when it woke: its scan dispatched it
                at, due = 60 * self.s.buckets[bucket][0], self.s.buckets[bucket][1]
                first = not self.s.durable and self.unfired.pop(at, 0) > 0
                step.add(due, first)
                kind = "late" if first else "a duplicate"
                self.note(
                    step.t,
                    "dispatch",
                    r,
                    due,
                    f"replica {r} woke up and sent its copy of t={at} ({kind})",
                )

    def _scan_durable(self, step: _Step, k: int) -> None:
        if k == 0:
            return
        pending = self._pending(step.t)
        while (
            self.dispatched_upto < len(self.s.buckets)
            and 60 * self.s.buckets[self.dispatched_upto][0] <= step.t
        ):
            self.dispatched_upto += 1
        if pending:
            step.add(pending, True)
            step.add((k - 1) * pending, False)
            self.note(
                step.t,
                "dispatch",
                step.leader if k == 1 else None,
                k * pending,
                f"{k} dispatcher(s) enqueued {k * pending:,} ({pending:,} PENDING rows)",
            )

    def _fire_in_memory(self, step: _Step, bucket: int, k: int) -> None:
        self.dispatched_upto = self.next_bucket
        at, due = 60 * self.s.buckets[bucket][0], self.s.buckets[bucket][1]
        if k == 0:
            if self.zombie is not None or any(self.owed.values()):
                if self.zombie is None:
                    self.unfired[at] = due  # a sleeper may still fire it; else it is missed
                return
            self.queue.missed[at] = self.queue.missed.get(at, 0) + due
            self.note(step.t, "missed", None, due, f"no dispatcher at the boundary: {due:,} lost")
            return
        step.add(due, True)
        step.add((k - 1) * due, False)
        self.note(step.t, "dispatch", None, k * due, f"{k} timer(s) fired {k * due:,}")

    # -- queue faults -------------------------------------------------------------------------

    def _reconcile(self, step: _Step) -> None:
        every = self.s.reconcile
        if not self.lost_waiting or every is None or step.t % every or self.s.election != "lease":
            return
        if not self.dispatchers():
            return
        self.queue.requeue(step, self.lost_waiting)
        self.note(
            step.t,
            "reconcile",
            self.holder,
            self.lost_waiting,
            f"reconcile: {self.lost_waiting:,} DISPATCHED with no message, enqueued again",
        )
        self.lost_waiting = 0

    def _lose(self, t: int, loss: Loss) -> None:
        firsts, dups = self.queue.lose(loss.count)
        if firsts + dups == 0:
            self.note(t, "noop", None, 0, f"lose {loss.label()}: the queue is empty")
            return
        if self._reconcile_hope():
            self.lost_waiting += firsts
        else:
            self.stuck += firsts
        self.note(t, "lose", None, firsts + dups, f"{firsts + dups:,} queued messages lost")

    def _worker_crash(self, t: int, crash: WorkerCrash) -> None:
        share = self.queue.crash_pod(t, crash.pod)
        if share < 0:
            self.note(t, "noop", None, 0, f"worker crash {crash.label()}: pod already down")
            return
        self.redelivered += share
        back = (
            "" if self.s.pod_restart is None else f"; the pod is back at t={t + self.s.pod_restart}"
        )
        self.note(
            t,
            "worker_crash",
            crash.pod,
            share,
            f"pod {crash.pod} died before acking {share:,}: "
            f"visible again at t={t + self.s.visibility}{back}",
        )

    # -- the result ---------------------------------------------------------------------------

    def result(self, late: int) -> Result:
        end = self.queue.t + 1
        for r, (state, since, epoch, held) in sorted(self.states.items()):
            self.spans.append(
                Span(who=r, state=state, start=since, end=max(end, since), epoch=epoch, held=held)
            )
        tl = self.queue.timeline()
        busy = [t + n for t, n, e in zip(tl.t, tl.n, tl.executed, strict=True) if e > 0]
        first = min((60 * m for m, c in self.s.buckets if c > 0), default=0)
        totals = Totals(
            due=self.s.due,
            dispatched=sum(d * n for d, n in zip(tl.dispatched, tl.n, strict=True)),
            executed=self.queue.executed_total,
            duplicates=self.queue.duplicates_total,
            missed=sum(self.queue.missed.values()),
            backlog_peak=max(tl.backlog, default=0),
            drain_time_s=(max(busy) - first) if busy else 0,
            takeover_delays_s=tuple(self.takeovers),
            fenced_writes=self.fenced,
            redelivered=self.redelivered,
            stuck=self.stuck,
            late=late,
        )
        return Result(
            scenario=self.s,
            totals=totals,
            timeline=tl,
            log=tuple(self.log),
            replicas=tuple(sorted(self.spans, key=lambda x: (x.who, x.start))),
            pods=self.queue.pod_spans(end),
        )


# -- the queue and the workers -------------------------------------------------------------


class _Fifo:
    """The queue, FIFO, and the pods that drain it; advanced in closed form between visited
    seconds. Items are runs ``[count, first]``: a task's first copy, or one beyond it."""

    def __init__(self, s: Scenario) -> None:
        self.s = s
        self.up = [True] * s.workers
        self.up_count = s.workers
        self.pod_back: list[tuple[int, int]] = []  # (second, pod)
        self.pod_events: list[tuple[int, int, bool]] = []
        self.items: deque[list[int]] = deque()  # [count, 1 if first copies]
        self.depth = 0
        self.hidden: list[tuple[int, int, int, int]] = []  # (second back, order, count, first)
        self.hidden_count = 0
        self.order = 0
        self.t = -1
        self.leader = -1
        self.rows = _Rows()
        self.firsts: list[tuple[int, int, int]] = []  # (second, n seconds, first executions/s)
        self.executed_total = self.duplicates_total = 0
        self.missed: dict[int, int] = {}
        self.this: list[tuple[int, bool]] = []  # the visited second's executions, in order
        self.row: dict[str, int] = {}

    def capacity(self) -> int:
        return self.up_count * self.s.rate

    def empty_at(self) -> int:
        """The last second the visible backlog still executes (now if empty, or if no pod
        will ever run it)."""
        cap = self.capacity()
        return self.t if cap == 0 else self.t + -(-self.depth // cap)

    def events_left(self) -> bool:
        return bool(self.hidden) or bool(self.pod_back)

    def upcoming(self, t: int) -> list[int]:
        return [h[0] for h in self.hidden if h[0] > t] + [b for b, _ in self.pod_back if b > t]

    def begin(self, t: int) -> None:
        """Drain the seconds before ``t`` (nothing arrives in them), then bring back the
        pods and the redeliveries due at ``t``."""
        self._drain(t - self.t - 1)
        self.row = {"t": t, "n": 1}
        for back, pod in [b for b in self.pod_back if b[0] == t]:
            self.pod_back.remove((back, pod))
            self.up[pod] = True
            self.up_count += 1
            self.pod_events.append((t, pod, True))
        for item in sorted(h for h in self.hidden if h[0] == t):
            self.hidden.remove(item)
            self.hidden_count -= item[2]
            self._push(item[2], bool(item[3]))

    def arrive(self, step: _Step) -> None:
        for count, first in step.arrivals:
            self._push(count, first)
        self.row |= {"dispatched": step.dispatched, "duplicates": step.duplicates}
        self.row["leader"] = self.leader = step.leader

    def requeue(self, step: _Step, count: int) -> None:
        """Lost first copies enqueued again (by a reconcile)."""
        step.arrivals.append((count, True))
        self.row["requeued"] = self.row.get("requeued", 0) + count

    def lose(self, count: int) -> tuple[int, int]:
        """The newest ``count`` queued messages vanish; (first copies, other copies) lost."""
        firsts = dups = 0
        while count > 0 and self.items:
            n, first = self.items[-1]
            m = min(n, count)
            if first:
                firsts += m
            else:
                dups += m
            count -= m
            self.depth -= m
            if m == n:
                self.items.pop()
            else:
                self.items[-1][0] = n - m
        self.row["lost"] = self.row.get("lost", 0) + firsts + dups
        return firsts, dups

    def execute(self, t: int) -> None:
        """Second ``t``'s executions; the row is closed by the next ``begin``."""
        e = min(self.depth, self.capacity())
        self.this = []
        self._take(e, t, self.this)
        self.row["executed"] = e
        self.t = t

    def crash_pod(self, t: int, pod: int) -> int:
        """Pod ``pod`` dies at the end of second ``t`` before acking its share of it: the
        share (-1 if it was down) comes back after the visibility timeout — as the same
        copies (transactional: nothing took effect) or as duplicates (external effects)."""
        if not self.up[pod]:
            return -1
        rank = sum(self.up[:pod])
        self.up[pod] = False
        self.up_count -= 1
        self.pod_events.append((t, pod, False))
        if (
            self.s.pod_restart is not None
        ):  # (it died at the end of t: back at t + 1 at the soonest)
            self.pod_back.append((t + max(1, self.s.pod_restart), pod))
        done = sum(n for n, _ in self.this)
        lo = min(done, rank * self.s.rate)
        hi = min(done, lo + self.s.rate)
        share = _slice(self.this, lo, hi)
        back = t + self.s.visibility
        for n, first in share:
            self.order += 1
            if self.s.effects == "transactional":
                self._undo(t, n, first)
                self.hidden.append((back, self.order, n, int(first)))
            else:
                self.hidden.append((back, self.order, n, 0))
            self.hidden_count += n
        total = hi - lo
        if self.s.effects == "external":
            self.row["requeued"] = self.row.get("requeued", 0) + total
        return total

    def finish(self) -> int:
        """Drain what can still run; returns the tasks no pod will ever run (their first
        copies left in the queue: stuck)."""
        self._drain(None)
        left = sum(n for n, first in self.items if first) + sum(h[2] for h in self.hidden if h[3])
        self.items.clear()
        self.depth = self.hidden_count = 0
        self.hidden.clear()
        return left

    # -- internals ----------------------------------------------------------------------------

    def _push(self, count: int, first: bool) -> None:
        if count <= 0:
            return
        if self.items and bool(self.items[-1][1]) == first:
            self.items[-1][0] += count
        else:
            self.items.append([count, int(first)])
        self.depth += count

    def _undo(self, t: int, n: int, first: bool) -> None:
        """A rolled-back execution of second ``t``: it took no effect."""
        self.executed_total -= n
        self.row["executed"] -= n
        if first:
            s, k, per = self.firsts[-1]
            assert s == t and k == 1
            self.firsts[-1] = (s, 1, per - n)
        else:
            self.duplicates_total -= n

    def _take(self, total: int, start: int, record: list[tuple[int, bool]] | None) -> None:
        """Execute ``total`` items from the head, ``rate`` a second from second ``start``."""
        rate = self.capacity()
        pos = 0
        self.executed_total += total
        while total > 0:
            head = self.items[0]
            m = min(head[0], total)
            if head[1]:
                self._first_seconds(start, rate, pos, pos + m)
            else:
                self.duplicates_total += m
            if record is not None:
                record.append((m, bool(head[1])))
            pos, total, self.depth = pos + m, total - m, self.depth - m
            if m == head[0]:
                self.items.popleft()
            else:
                head[0] -= m

    def _first_seconds(self, start: int, rate: int, a: int, b: int) -> None:
        """First copies at positions ``a..b-1`` of a stream run ``rate`` a second."""
        sa, sb = a // rate, (b - 1) // rate
        if sa == sb:
            self._seg(start + sa, 1, b - a)
            return
        self._seg(start + sa, 1, (sa + 1) * rate - a)
        self._seg(start + sa + 1, sb - sa - 1, rate)
        self._seg(start + sb, 1, b - sb * rate)

    def _seg(self, second: int, n: int, per: int) -> None:
        if n <= 0 or per <= 0:
            return
        if self.firsts:
            s, k, p = self.firsts[-1]
            if s == second and k == 1:  # the same second: add up (a visited second)
                self.firsts[-1] = (s, 1, p + per)
                return
        self.firsts.append((second, n, per))

    def _drain(self, seconds: int | None) -> None:
        """Close the open row, then run ``seconds`` seconds with no arrivals (None: until
        the visible queue is empty)."""
        if self.row:
            self.rows.add(**self.row, backlog=self.depth + self.hidden_count)
            self.row = {}
        t, cap, hidden = self.t + 1, self.capacity(), self.hidden_count
        if cap == 0:
            if seconds:
                self.rows.add(t=t, n=seconds, leader=self.leader, backlog=self.depth + hidden)
                self.t += seconds
            return
        length = -(-self.depth // cap) if seconds is None else seconds
        full = min(length, self.depth // cap)
        self.rows.add(
            t=t,
            n=full,
            executed=cap,
            leader=self.leader,
            backlog=self.depth - cap + hidden,
            backlog_step=-cap,
        )
        self._take(full * cap, t, None)
        t, length = t + full, length - full
        if length > 0 and self.depth > 0:
            rest = self.depth
            self._take(rest, t, None)
            self.rows.add(t=t, n=1, executed=rest, leader=self.leader, backlog=hidden)
            t, length = t + 1, length - 1
        self.rows.add(t=t, n=length, leader=self.leader, backlog=self.depth + hidden)
        self.t = t + length - 1

    def timeline(self) -> Timeline:
        if self.row:
            self.rows.add(**self.row, backlog=self.depth + self.hidden_count)
            self.row = {}
        return self.rows.timeline(self.missed)

    def pod_spans(self, end: int) -> tuple[Span, ...]:
        """Every pod's lane, up to ``LANES`` pods; beyond, the lanes of the pods that crashed
        (every other pod is up throughout)."""
        crashed = {pod for _, pod, _ in self.pod_events}
        hit = sorted(crashed if self.s.workers > LANES else range(self.s.workers))
        spans, since = [], dict.fromkeys(hit, 0)
        state = dict.fromkeys(hit, "up")
        for t, pod, up in self.pod_events:
            if t > since[pod]:
                spans.append(Span(who=pod, state=state[pod], start=since[pod], end=t))
            since[pod], state[pod] = t, "up" if up else "down"
        for pod in hit:
            last = Span(who=pod, state=state[pod], start=since[pod], end=max(end, since[pod]))
            spans.append(last)
        return tuple(sorted(spans, key=lambda x: (x.who, x.start)))


def _slice(runs: list[tuple[int, bool]], lo: int, hi: int) -> list[tuple[int, bool]]:
    """Items ``lo..hi-1`` of a list of runs."""
    out, pos = [], 0
    for n, first in runs:
        a, b = max(lo, pos), min(hi, pos + n)
        if a < b:
            out.append((b - a, first))
        pos += n
    return out


class _Rows:
    """Builder for the :class:`Timeline` columns."""

    def __init__(self) -> None:
        self.cols: dict[str, list[int]] = {name: [] for name in _COLUMNS}

    def add(self, **values: int) -> None:
        if values["n"] <= 0:
            return
        for name in _COLUMNS:
            self.cols[name].append(values.get(name, 0))

    def timeline(self, missed: dict[int, int]) -> Timeline:
        """The columns, with ``missed`` charged to its trigger seconds (always visited)."""
        cols = {k: list(v) for k, v in self.cols.items()}
        for i, (t, n) in enumerate(zip(cols["t"], cols["n"], strict=True)):
            if n == 1 and t in missed:
                cols["missed"][i] += missed[t]
        return Timeline(**{name: tuple(values) for name, values in cols.items()})


_COLUMNS = (
    "t",
    "n",
    "dispatched",
    "executed",
    "duplicates",
    "missed",
    "leader",
    "backlog",
    "backlog_step",
    "requeued",
    "lost",
)


def _seconds(segments: list[tuple[int, int, int]]) -> Iterator[tuple[int, int]]:
    for second, n, per in segments:
        for j in range(n):
            yield second + j, per


def _late(fault: list[tuple[int, int, int]], calm: list[tuple[int, int, int]]) -> int:
    """First executions more than ``LATE_S`` after the same-rank one of the calm run (tasks
    run oldest first, so the k-th first execution of each run is the same task's)."""
    late, a, b = 0, _seconds(fault), _seconds(calm)
    sa, na = next(a, (0, 0))
    sb, nb = next(b, (0, 0))
    while na and nb:
        m = min(na, nb)
        if sa - sb > LATE_S:
            late += m
        na, nb = na - m, nb - m
        if not na:
            sa, na = next(a, (0, 0))
        if not nb:
            sb, nb = next(b, (0, 0))
    return late


def _within(what: str, value: int, low: int, high: int) -> None:
    _require(low <= value <= high, f"{what} must be {low:,}..{high:,}, got {value:,}")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)
