"""The lab's model of distributed cron: exact, event-driven, no I/O.

Time is whole seconds; t = 0 is 00:00:00. A workload is a set of buckets: ``due`` tasks whose
trigger time is t = 60·minute. The rules (docs/model.md states them in full):

* Replicas 0..R-1 are alive at t = 0. With ``lease`` election replica 0 holds the lease and
  renews it while alive; when the holder crashes at T the lease expires at T + TTL and, at every
  second t >= expiry with no holder, the lowest-id live replica acquires it. With ``off`` every
  live replica is a dispatcher.
* A dispatcher scans at every minute boundary and at the second it becomes one (acquires the
  lease, or restarts under ``off``). Durable: a scan dispatches every PENDING task with
  trigger <= t, and k dispatchers scanning in one second each dispatch a copy. In-memory: at a
  boundary every live dispatcher fires that bucket; a boundary with no dispatcher is missed.
* Order within a second: crashes, restarts, lease acquisition, scans and dispatch, execution.
  Workers execute ``min(queue, pods × rate)`` tasks a second, FIFO.

The simulation visits only the seconds where something happens (boundaries, faults, restarts,
lease expiries) and computes the queue between them in closed form, so a day of a million
tasks a minute costs a few thousand steps, not 1.44 billion.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace
from typing import Literal

from cronlab.exceptions import ConfigError

# What one run may ask for: each bound keeps a request's cost (time, memory) small.
MAX_REPLICAS, MAX_WORKERS, MAX_RATE, MAX_TTL_S = 32, 100_000, 10**8, 86_400
MAX_TASKS, MAX_BUCKETS, MAX_SECONDS = 10**12, 1_440, 10**9

Election = Literal["lease", "off"]
EventKind = Literal["crash", "restart", "acquire", "dispatch", "missed", "noop"]


@dataclass(frozen=True, kw_only=True)
class Fault:
    """A crash at second ``at`` of replica ``replica``, or of the leader when it is None."""

    at: int
    replica: int | None = None

    def label(self) -> str:
        target = "leader" if self.replica is None else f"replica:{self.replica}"
        return f"{target}@{self.at}"


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

    def __post_init__(self) -> None:
        """Every number within what one run may cost (the page, the API and the CLI alike)."""
        _within("replicas", self.replicas, 1, MAX_REPLICAS)
        _within("workers", self.workers, 1, MAX_WORKERS)
        _within("rate (tasks/s per pod)", self.rate, 1, MAX_RATE)
        _within("lease TTL (s)", self.lease_ttl, 1, MAX_TTL_S)
        _require(self.election in ("lease", "off"), f"unknown election {self.election!r}")
        if self.restart_after is not None:
            _within("restart-after (s)", self.restart_after, 0, MAX_SECONDS)
        _require(len(self.buckets) <= MAX_BUCKETS, f"at most {MAX_BUCKETS:,} buckets")
        for minute, count in self.buckets:
            _within("bucket minute", minute, 0, MAX_SECONDS // 60)
            _within("bucket count", count, 0, MAX_TASKS)
        _within("tasks due", sum(c for _, c in self.buckets), 0, MAX_TASKS)
        for fault in self.faults:
            _within(f"crash time (s) of {fault.label()}", fault.at, 0, MAX_SECONDS)
            rid = fault.replica
            _require(
                rid is None or 0 <= rid < self.replicas,
                f"crash target replica {rid} does not exist (replicas 0..{self.replicas - 1})",
            )

    @property
    def capacity(self) -> int:
        """Tasks the worker fleet executes per second: pods × rate."""
        return self.workers * self.rate

    @property
    def due(self) -> int:
        return sum(count for _, count in self.buckets)


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
class Timeline:
    """Run-length encoded per-second series.

    Run i covers seconds ``t[i] .. t[i] + n[i] - 1``; in each of them ``dispatched``,
    ``executed``, ``duplicates``, ``missed`` and ``leader`` (-1: no lease holder) take the run's
    value, and the backlog after execution is ``backlog[i] + backlog_step[i] * k`` at second
    ``t[i] + k``. Runs are contiguous from t = 0 to the last simulated second.
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


@dataclass(kw_only=True)
class _Step:
    """What happened in one visited second, before the queue is applied."""

    t: int
    dispatched: int = 0
    duplicates: int = 0
    missed: int = 0
    leader: int = -1


@dataclass(kw_only=True)
class _ControlPlane:
    """Mutable state of one simulation; only :func:`simulate` touches it."""

    s: Scenario
    alive: list[bool]
    holder: int | None = 0
    epoch: int = 1
    expiry: int | None = None
    freed_at: int = 0
    restarts: list[tuple[int, int]] = field(default_factory=list)
    next_bucket: int = 0
    dispatched_upto: int = 0
    takeovers: list[int] = field(default_factory=list)
    log: list[LogEvent] = field(default_factory=list)

    def dispatchers(self) -> list[int]:
        if self.s.election == "off":
            return [r for r, up in enumerate(self.alive) if up]
        return [] if self.holder is None else [self.holder]

    def note(self, t: int, kind: EventKind, replica: int | None, count: int, text: str) -> None:
        event = LogEvent(t=t, kind=kind, replica=replica, epoch=self.epoch, count=count, text=text)
        self.log.append(event)

    def crash(self, t: int, fault: Fault) -> None:
        victim = self._target(fault)
        if victim is None or not self.alive[victim]:
            self.note(t, "noop", fault.replica, 0, f"crash {fault.label()}: no target alive")
            return
        self.alive[victim] = False
        if self.s.restart_after is not None:
            heapq.heappush(self.restarts, (t + self.s.restart_after, victim))
        if self.holder == victim:
            self.holder, self.expiry, self.freed_at = None, t + self.s.lease_ttl, t
            self.note(
                t, "crash", victim, 0, f"leader {victim} crashed; lease free at t={self.expiry}"
            )
        else:
            self.note(t, "crash", victim, 0, f"replica {victim} crashed")

    def _target(self, fault: Fault) -> int | None:
        if fault.replica is not None:
            return fault.replica
        if self.s.election == "lease":
            return self.holder
        live = self.dispatchers()
        return live[0] if live else None

    def restart_due(self, t: int) -> list[int]:
        back = []
        while self.restarts and self.restarts[0][0] == t:
            _, r = heapq.heappop(self.restarts)
            self.alive[r] = True
            back.append(r)
            role = "dispatcher" if self.s.election == "off" else "standby"
            self.note(t, "restart", r, 0, f"replica {r} restarted as {role}")
        return back

    def acquire(self, t: int) -> int | None:
        if self.s.election != "lease" or self.holder is not None:
            return None
        if self.expiry is None or t < self.expiry or not any(self.alive):
            return None
        self.holder = self.alive.index(True)
        self.epoch += 1
        self.takeovers.append(t - self.freed_at)
        self.note(
            t,
            "acquire",
            self.holder,
            0,
            f"replica {self.holder} took the lease (epoch {self.epoch}) after "
            f"{t - self.freed_at} s",
        )
        return self.holder

    def can_still_dispatch(self) -> bool:
        pending = self.dispatched_upto < len(self.s.buckets) and self.s.durable
        return pending and (any(self.alive) or bool(self.restarts))


def simulate(s: Scenario) -> Result:
    """Run scenario ``s`` to its end and return totals, the timeline and the event log."""
    buckets = tuple(sorted((m, c) for m, c in s.buckets if c > 0))
    s = _with_buckets(s, buckets)
    cp = _ControlPlane(s=s, alive=[True] * s.replicas)
    faults = sorted(s.faults, key=lambda f: f.at)
    steps = _visit(cp, buckets, faults)
    missed = _missed_by_second(cp, buckets)
    for step in steps:
        step.missed += missed.pop(step.t, 0)
    timeline = _timeline(steps, s.capacity)
    totals = _totals(s, steps, timeline, cp.takeovers)
    return Result(scenario=s, totals=totals, timeline=timeline, log=tuple(cp.log))


def _with_buckets(s: Scenario, buckets: tuple[tuple[int, int], ...]) -> Scenario:
    return replace(s, buckets=buckets)


def _visit(
    cp: _ControlPlane, buckets: tuple[tuple[int, int], ...], faults: list[Fault]
) -> list[_Step]:
    """Walk the seconds where the control plane can change; return one step per second."""
    times = sorted({0, *(60 * m for m, _ in buckets), *(f.at for f in faults)})
    heapq.heapify(times)
    queue = _Queue(capacity=cp.s.capacity)
    steps: list[_Step] = []
    fi = 0
    while times:
        t = heapq.heappop(times)
        if steps and t == steps[-1].t:
            continue
        if steps and _finished(cp, buckets, faults, fi) and t > queue.empty_at():
            break
        step = _Step(t=t)
        while fi < len(faults) and faults[fi].at == t:
            cp.crash(t, faults[fi])
            fi += 1
        back = cp.restart_due(t)
        fresh = back if cp.s.election == "off" else []
        promoted = cp.acquire(t)
        if promoted is not None:
            fresh.append(promoted)
        step.leader = -1 if cp.holder is None or cp.s.election == "off" else cp.holder
        _scan(cp, step, buckets, fresh)
        queue.advance(t, step.dispatched)
        steps.append(step)
        for nxt in _upcoming(cp, t):
            heapq.heappush(times, nxt)
    return steps


def _upcoming(cp: _ControlPlane, t: int) -> list[int]:
    """Seconds the current state schedules: restarts and a lease expiry."""
    out = [r_t for r_t, _ in cp.restarts]
    if cp.holder is None and cp.expiry is not None and cp.expiry > t:
        out.append(cp.expiry)
    return out


def _finished(
    cp: _ControlPlane, buckets: tuple[tuple[int, int], ...], faults: list[Fault], fi: int
) -> bool:
    """No boundary, fault or restart to come, and no PENDING task that can still go out."""
    return (
        cp.next_bucket >= len(buckets)
        and fi >= len(faults)
        and not cp.restarts
        and not cp.can_still_dispatch()
    )


def _scan(
    cp: _ControlPlane, step: _Step, buckets: tuple[tuple[int, int], ...], fresh: list[int]
) -> None:
    t = step.t
    boundary = cp.next_bucket < len(buckets) and 60 * buckets[cp.next_bucket][0] == t
    dispatchers = cp.dispatchers()
    scanners = dispatchers if boundary else [r for r in fresh if r in dispatchers]
    if boundary:
        cp.next_bucket += 1
    if cp.s.durable:
        _scan_durable(cp, step, buckets, len(scanners))
    elif boundary:
        _fire_in_memory(cp, step, buckets[cp.next_bucket - 1][1], len(dispatchers))


def _scan_durable(
    cp: _ControlPlane, step: _Step, buckets: tuple[tuple[int, int], ...], k: int
) -> None:
    if k == 0:
        return
    upto = cp.dispatched_upto
    while upto < len(buckets) and 60 * buckets[upto][0] <= step.t:
        upto += 1
    pending = sum(c for _, c in buckets[cp.dispatched_upto : upto])
    cp.dispatched_upto = upto
    if pending:
        step.dispatched += k * pending
        step.duplicates += (k - 1) * pending
        cp.note(
            step.t,
            "dispatch",
            step.leader if k == 1 else None,
            k * pending,
            f"{k} dispatcher(s) enqueued {k * pending:,} ({pending:,} PENDING rows)",
        )


def _fire_in_memory(cp: _ControlPlane, step: _Step, due: int, k: int) -> None:
    cp.dispatched_upto = cp.next_bucket
    if k == 0:
        step.missed += due
        cp.note(step.t, "missed", None, due, f"no dispatcher at the boundary: {due:,} lost")
        return
    step.dispatched += k * due
    step.duplicates += (k - 1) * due
    cp.note(step.t, "dispatch", None, k * due, f"{k} timer(s) fired {k * due:,}")


def _missed_by_second(cp: _ControlPlane, buckets: tuple[tuple[int, int], ...]) -> dict[int, int]:
    """Durable rows never dispatched, charged to their trigger second."""
    if not cp.s.durable:
        return {}
    return {60 * m: c for m, c in buckets[cp.dispatched_upto :]}


@dataclass(kw_only=True)
class _Queue:
    """The FIFO queue's depth, advanced in closed form between visited seconds."""

    capacity: int
    depth: int = 0
    t: int = -1

    def advance(self, t: int, arrivals: int) -> int:
        """Drain the seconds before ``t``, then add ``arrivals`` and execute second ``t``."""
        self.depth = max(0, self.depth - self.capacity * (t - self.t - 1)) + arrivals
        executed = min(self.depth, self.capacity)
        self.depth -= executed
        self.t = t
        return executed

    def empty_at(self) -> int:
        """The last second in which the current backlog still executes (t if already empty)."""
        return self.t + -(-self.depth // self.capacity)


class _Runs:
    """Builder for the :class:`Timeline` columns."""

    def __init__(self) -> None:
        self.cols: dict[str, list[int]] = {name: [] for name in _COLUMNS}

    def add(self, **values: int) -> None:
        if values["n"] <= 0:
            return
        for name in _COLUMNS:
            self.cols[name].append(values.get(name, 0))

    def drain(self, t: int, length: int, depth: int, cap: int, leader: int) -> int:
        """Seconds ``t .. t+length-1`` with no arrivals; returns the depth left after them."""
        full = min(length, depth // cap)
        self.add(t=t, n=full, executed=cap, leader=leader, backlog=depth - cap, backlog_step=-cap)
        depth, t, length = depth - full * cap, t + full, length - full
        if length > 0 and depth > 0:
            self.add(t=t, n=1, executed=depth, leader=leader)
            depth, t, length = 0, t + 1, length - 1
        self.add(t=t, n=length, leader=leader)
        return depth


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
)


def _timeline(steps: list[_Step], cap: int) -> Timeline:
    runs = _Runs()
    depth, prev = 0, 0
    leader = steps[0].leader if steps else -1
    for step in steps:
        depth = runs.drain(prev, step.t - prev, depth, cap, leader)
        depth += step.dispatched
        executed = min(depth, cap)
        depth -= executed
        leader = step.leader
        runs.add(
            t=step.t,
            n=1,
            dispatched=step.dispatched,
            executed=executed,
            duplicates=step.duplicates,
            missed=step.missed,
            leader=leader,
            backlog=depth,
        )
        prev = step.t + 1
    runs.drain(prev, -(-depth // cap), depth, cap, leader)
    return Timeline(**{name: tuple(values) for name, values in runs.cols.items()})


def _totals(s: Scenario, steps: list[_Step], tl: Timeline, takeovers: list[int]) -> Totals:
    dispatched = sum(step.dispatched for step in steps)
    executed = sum(e * n for e, n in zip(tl.executed, tl.n, strict=True))
    busy = [t + n for t, n, e in zip(tl.t, tl.n, tl.executed, strict=True) if e > 0]
    first = min((60 * m for m, c in s.buckets if c > 0), default=0)
    return Totals(
        due=s.due,
        dispatched=dispatched,
        executed=executed,
        duplicates=sum(step.duplicates for step in steps),
        missed=sum(step.missed for step in steps),
        backlog_peak=max(tl.backlog, default=0),
        drain_time_s=(max(busy) - first) if busy else 0,
        takeover_delays_s=tuple(takeovers),
    )


def _within(what: str, value: int, low: int, high: int) -> None:
    _require(low <= value <= high, f"{what} must be {low:,}..{high:,}, got {value:,}")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)
