"""A run's scenario, drawn from its seed: the cluster, the work that falls due, the faults.

Times are milliseconds from the start of the run. Everything here is a value: the same seed
and fault kinds give the same scenario, and dropping faults (``without``) replays the rest.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

KINDS = (
    "kill",  # SIGKILL a scheduler or a worker at any point, inside a transaction too
    "pause",  # SIGSTOP/SIGCONT a process at any point (a GC pause, a frozen VM)
    "skew",  # a scheduler's clock runs ahead or behind true time from the start
    "jump",  # a process's clock steps (NTP) during the run
    "slow",  # a handler runs past the visibility timeout
    "error",  # a handler raises on its first attempts
    "lose",  # queued messages vanish (a queue failover)
    "duplicate",  # a message is delivered twice (a relay published it twice)
    "outage",  # the database is unreachable for a while
    "redeploy",  # a schedule's definition changes while the cluster runs
    "identity",  # replicas started with the same name (pods all PID 1, no --replica)
    "switch",  # the store ran with another election kind before (etcd → lease)
    "operator",  # pause and resume, trigger now, backfill a past range (CLI, console)
    "duties",  # the leader's retention (a keep of seconds) and alerter run as it leads
    "wakeup",  # wake-up notices on: delivered, lost, late or twice
    "schedules",  # more schedules, some of one rule, falling due in the same second
    # Issue 27: what a handler and an application do, and a server's own faults.
    "timeout",  # a task's timeout: its first attempts run past it (TaskTimeout, undone)
    "base",  # a handler raises CancelledError, SystemExit or KeyboardInterrupt, or crashes
    "undo",  # a handler writes through ctx.tx, then fails: its write must go with it
    "followup",  # handlers defer a follow-up through ctx.defer, cron-fired ones too
    "api",  # the App API as an actor: defer with and without keys, defer_many, sync redeploys
    "poison",  # rows the engine cannot run: a task no app has, arguments that do not fit
    "terminate",  # the server ends a session (pg_terminate_backend), in a transaction or not
    "server_error",  # a statement fails: serialization failure, deadlock, statement timeout
    "idle",  # the server ends worker sessions idle in their transaction past a limit
    "dst",  # the schedules are in a zone whose clocks change (spring or fall) during the run
    "rekey",  # a key deferred again every second while the retention deletes its finished task
    "stale",  # a worker frozen holding a delivery wakes once its tasks ran, went, and new came
)
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, where a run starts but for the dst kind's
# The dst kind's runs: (zone, start, the hours of its schedules' grid): each starts shortly
# before a change of the zone's clocks — an hour skipped, an hour or half an hour repeated.
DST = (
    ("Europe/Berlin", 1_774_746_000_000 - 10_000, "1-3"),  # 01:59:50 CET → 03:00 CEST
    ("Europe/Berlin", 1_792_890_000_000 - 20_000, "2"),  # 02:59:40 CEST → 02:00 CET
    ("America/New_York", 1_793_512_800_000 - 20_000, "1"),  # 01:59:40 EDT → 01:00 EST
    ("America/New_York", 1_772_953_200_000 - 10_000, "1-3"),  # 01:59:50 EST → 03:00 EDT
    ("Australia/Lord_Howe", 1_775_314_800_000 - 20_000, "1"),  # 01:59:40 → 01:30 (+10:30)
)
# The kinds before issue 27's: a seed found then replays its run with these (``--faults``).
EARLIER = KINDS[:16]
# The kinds of issue 27's searches before ``rekey``: the seeds they found replay with these.
BEFORE_REKEY = KINDS[: KINDS.index("rekey")]
# The kinds before ``stale``: the seeds found before it replay with these.
BEFORE_STALE = KINDS[: KINDS.index("stale")]
# Kinds only a database server has: on SQLite they are drawn, and strike nothing.
SERVER_KINDS = ("terminate", "server_error", "idle")
SERVER_ERRORS = ("serialization", "deadlock", "statement_timeout")
STALE_BATCH = (20, 60)  # how many tasks the stale kind's late defer_many adds
REKEY = "api:k7"  # the rekey kind's key (the api kind's are api:k0-k2)
TIMEOUT_MS = 2_000  # the timeout of the "timeout" kind's task
TASK_SLOW_MS = TIMEOUT_MS + 1_000  # how long its slow attempts take
# The kinds drawn from a seed's first stream. Each later kind draws from a stream of its own
# (``random.Random(f"{seed}:{kind}")``): adding one left every earlier seed's run as it was, so
# the seeds of earlier bugs still replay them.
CLASSIC = KINDS[:12]
OPERATIONS = ("pause", "trigger", "backfill")
TTL_MS, SCAN_MS, VISIBILITY_MS, RESTART_MS = 3_000, 1_000, 5_000, 5_000
MAX_ATTEMPTS = 5  # the simulated workers' retry policy
WORK_END_MS = 20_000  # tasks fall due and faults strike before this
HORIZON_MS = 120_000  # the run ends here at the latest (later if the late bound is later)


@dataclass(frozen=True, kw_only=True)
class Fault:
    """One fault: ``kind`` strikes ``target`` at ``at_ms`` (after ``skip`` more points of that
    process, for kill and pause), lasting ``ms`` where that means something."""

    kind: str
    at_ms: int
    target: str = ""
    skip: int = 0
    ms: int = 0
    amount: int = 0
    # a pause only where its process holds no lock, before its next write transaction (the
    # simulator's HOLD_POINT: SQLite's LOCK, PostgreSQL's BEGIN): a worker there may hold a
    # delivery, and the others go on
    unlocked: bool = False
    until_ms: int = 0  # a pause that lasts until then, however late it strikes (0: ``ms``)

    def describe(self) -> str:
        extra = f" for {self.ms} ms" if self.ms else ""
        extra += f" until {self.until_ms} ms" if self.until_ms else ""
        extra += f" by {self.amount}" if self.amount else ""
        extra += " holding no lock" if self.unlocked else ""
        return f"{self.kind} {self.target} at {self.at_ms} ms{extra}".replace("  ", " ")


@dataclass(frozen=True, kw_only=True)
class Job:
    """A one-off task: key, due time, and how its handler behaves."""

    key: str
    due_ms: int
    fail_first: int = 0  # attempts that raise before one succeeds
    work_ms: int = 0  # time the handler takes (inside the worker's transaction)
    is_async: bool = False  # an async handler: run on the worker's loop, its write queued
    timeout_first: int = 0  # attempts that run past the task's timeout (TIMEOUT_MS)
    raises: str = ""  # what its failing attempts raise ("": RuntimeError; or a BaseException)
    write_first: bool = False  # a failing attempt writes through ctx.tx before it raises
    follow_ms: int | None = None  # defers a follow-up due so long after it runs

    def payload(self) -> dict[str, object]:
        """What its handler reads to behave so (the task's arguments)."""
        found: dict[str, object] = {"fail_first": self.fail_first, "work_ms": self.work_ms}
        extra = {
            "timeout_first": self.timeout_first,
            "raises": self.raises,
            "write_first": self.write_first,
            "follow_ms": self.follow_ms,
        }
        found.update({k: v for k, v in extra.items() if v})  # (earlier seeds: as they were)
        return found


@dataclass(frozen=True, kw_only=True)
class ApiCall:
    """What the App API actor does at ``at_ms``: ``defer`` (under ``keys[0]``, or none),
    ``defer_many`` (one item per key; None: no key), or ``sync`` (the app's schedule, as
    ``version`` declares it)."""

    at_ms: int
    op: str
    keys: tuple[str | None, ...] = ()
    version: int = 0


@dataclass(frozen=True, kw_only=True)
class Api:
    """The App API actor (the ``api`` kind): its calls, and its schedule's first version."""

    calls: tuple[ApiCall, ...]


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One more schedule (the ``schedules`` kind): fires every ``every_s`` seconds."""

    name: str
    every_s: int
    catchup: str
    overlap: str


@dataclass(frozen=True, kw_only=True)
class Duties:
    """The leader's retention and alerter (the ``duties`` kind): history older than
    ``keep_ms`` is pruned, checked every ``every_ms``; catch-up covers ``window_ms``; a
    schedule alerts when a run is ``alert_after_ms`` late or ``failures`` fail in a row."""

    keep_ms: int
    every_ms: int
    window_ms: int
    alert_after_ms: int
    failures: int


@dataclass(frozen=True, kw_only=True)
class Wakeups:
    """Wake-up notices (the ``wakeup`` kind): each is lost with probability ``lose``, else
    delivered after ``delay_ms`` (0 to it, drawn per notice), twice with ``twice``."""

    lose: float
    delay_ms: int
    twice: float


@dataclass(frozen=True, kw_only=True)
class Scenario:
    seed: int
    kinds: tuple[str, ...]
    replicas: int
    workers: int
    server_clock: bool  # the store judges the lease by its own clock (as PostgreSQL does)
    jobs: tuple[Job, ...]
    every_s: int  # the schedule "tick" fires every so many seconds until WORK_END_MS
    catchup: str
    overlap: str
    faults: tuple[Fault, ...]
    rules: tuple[Rule, ...] = ()
    duties: Duties | None = None
    wakeups: Wakeups | None = None
    follow_ms: int | None = None  # the schedules' runs defer a follow-up (``followup``)
    api: Api | None = None
    poison: bool = False  # rows the engine cannot run are in the store from the start
    idle_ms: int | None = None  # a worker session's idle-in-transaction limit (``idle``)
    t0_ms: int = T0  # where the run starts (true time)
    tz: str = "UTC"  # the schedules' zone
    hours: str = "*"  # the hours of the schedules' grid (``dst``: around the change)

    def schedule_names(self) -> tuple[str, ...]:
        return ("tick", *(r.name for r in self.rules), *(("api-s",) if self.api else ()))

    def without(self, drop: set[int]) -> Scenario:
        """The same run with the faults at these indexes left out."""
        kept = tuple(f for i, f in enumerate(self.faults) if i not in drop)
        return dataclasses.replace(self, faults=kept)


def late_bound_ms(s: Scenario) -> int:
    """How late an effect may be, given the scenario's faults."""
    bound = 5_000 + TTL_MS + VISIBILITY_MS
    # Handlers run inside the write transaction: on the one-writer store, slow ones queue
    # every other write behind them, so their times add up.
    bound += sum(j.work_ms for j in s.jobs) + 8_000 * any(j.fail_first for j in s.jobs)
    for f in s.faults:
        bound += {
            "kill": RESTART_MS + TTL_MS + VISIBILITY_MS,
            "pause": max(f.ms, f.until_ms - f.at_ms) + TTL_MS + VISIBILITY_MS,
            "outage": f.ms + 2 * (RESTART_MS + TTL_MS),
            "jump": abs(f.amount) + TTL_MS,
            "skew": abs(f.amount) + TTL_MS,
            "lose": 60_000,
            "operator": f.ms,  # a backfill's occurrences were due that long before it
            "terminate": RESTART_MS + TTL_MS + VISIBILITY_MS,
            "server_error": RESTART_MS + TTL_MS + VISIBILITY_MS,
        }.get(f.kind, 0)
    bound += sum(j.timeout_first * TASK_SLOW_MS for j in s.jobs) + 8_000 * any(
        j.timeout_first or j.raises for j in s.jobs
    )
    crashes = sum(j.fail_first for j in s.jobs if j.raises == "crash")  # each a restart
    bound += crashes * (RESTART_MS + VISIBILITY_MS + 8_000)
    if s.idle_ms is not None:  # a session ended mid-batch: the batch comes back, counted
        # A job whose work outlasts the limit is lost at every attempt: all its attempts run
        # (on one worker, at worst, one after another), each lost run counted at a redelivery
        # (PostgreSQL seeds 2974 and 11587: one worker, five or four 7 s jobs, a 3 s limit).
        doomed = sum(j.work_ms for j in s.jobs if j.work_ms > s.idle_ms)
        bound += MAX_ATTEMPTS * (doomed + VISIBILITY_MS + 8_000)
    if s.wakeups is not None:  # a lost notice: the fallback poll (a second) at each hop
        bound += 2_000 + s.wakeups.delay_ms
    return bound


def horizon_ms(s: Scenario) -> int:
    """When the run ends at the latest: by then everything due must have taken effect, or it
    is late — so a row still open then is stuck, not merely slow."""
    return max(HORIZON_MS, WORK_END_MS + late_bound_ms(s))


def draw(seed: int, kinds: tuple[str, ...] = KINDS) -> Scenario:
    """The scenario of ``seed`` with faults of ``kinds`` only."""
    rng = random.Random(seed)
    replicas, workers = rng.randint(2, 3), rng.randint(1, 3)
    jobs = tuple(_job(rng, i, "error" in kinds, "slow" in kinds) for i in range(rng.randint(3, 12)))
    # Which handlers are async comes from a stream of its own: every other draw of a seed is
    # what it was before async handlers were simulated (the seeds of earlier bugs still reach
    # them).
    forms = random.Random(f"{seed}:async")
    jobs = tuple(dataclasses.replace(j, is_async=forms.random() < 0.5) for j in jobs)
    faults: list[Fault] = []
    for kind in kinds:
        if kind in ("slow", "error") or kind not in CLASSIC or rng.random() < 0.5:
            continue  # slow and erring handlers are drawn with the jobs
        for _ in range(rng.randint(1, 2)):
            faults.append(_fault(rng, kind, replicas, workers))
    s = Scenario(
        seed=seed,
        kinds=kinds,
        replicas=replicas,
        workers=workers,
        server_clock=rng.random() < 0.5,
        jobs=jobs,
        every_s=rng.choice((2, 3, 5)),
        catchup=rng.choice(("all", "latest", "none")),
        overlap=rng.choice(("skip", "allow")),
        faults=(),
    )
    # Each later kind is in about half the seeds, as each classic one is.
    streams = {k: random.Random(f"{seed}:{k}") for k in KINDS[len(CLASSIC) :] if k in kinds}
    later = {k: rng for k, rng in streams.items() if rng.random() < 0.5}
    if "schedules" in later:
        s = dataclasses.replace(s, rules=_rules(later["schedules"], s))
    if "duties" in later:
        s = dataclasses.replace(s, duties=_duties(later["duties"]))
    if "wakeup" in later:
        w = later["wakeup"]
        lose, delay = w.choice((0.0, 0.0, 0.3, 1.0)), w.choice((0, 0, 200, 1_500))
        s = dataclasses.replace(s, wakeups=Wakeups(lose=lose, delay_ms=delay, twice=w.random()))
    if "operator" in later:
        faults += _operations(later["operator"], s.schedule_names())
    s = _handlers(s, later)
    if "api" in later:
        s = dataclasses.replace(s, api=_api(later["api"]))
    if "poison" in later:
        s = dataclasses.replace(s, poison=True)
    if "idle" in later:
        s = dataclasses.replace(s, idle_ms=later["idle"].choice((1_000, 3_000)))
    for kind in ("terminate", "server_error"):
        if kind in later:
            faults += _server(later[kind], kind, replicas, workers)
    if "dst" in later:
        zone, t0, hours = later["dst"].choice(DST)
        s = dataclasses.replace(s, t0_ms=t0, tz=zone, hours=hours)
    if "rekey" in later:
        s = _rekey(later["rekey"], s)
    if "stale" in later:
        s, frozen = _stale(later["stale"], s)
        faults += frozen
    return dataclasses.replace(s, faults=tuple(sorted(faults, key=lambda f: f.at_ms)))


def _handlers(s: Scenario, later: dict[str, random.Random]) -> Scenario:
    """The handler behaviours of the issue-27 kinds, each from its own stream."""
    jobs = list(s.jobs)
    if "timeout" in later:
        rng = later["timeout"]
        jobs = [dataclasses.replace(j, timeout_first=rng.choice((0, 1, 2))) for j in jobs]
    if "base" in later:
        rng = later["base"]
        raised = ("CancelledError", "SystemExit", "KeyboardInterrupt", "crash")
        jobs = [
            dataclasses.replace(j, fail_first=max(1, j.fail_first), raises=rng.choice(raised))
            if rng.random() < 0.4
            else j
            for j in jobs
        ]
        # CancelledError is what an awaited call raises: its handler is async
        jobs = [dataclasses.replace(j, is_async=True) if j.raises == "CancelledError" else j
                for j in jobs]  # fmt: skip
    if "undo" in later:
        rng = later["undo"]
        jobs = [
            dataclasses.replace(j, fail_first=max(1, j.fail_first), write_first=True)
            if rng.random() < 0.5
            else j
            for j in jobs
        ]
    follow = None
    if "followup" in later:
        rng = later["followup"]
        follow = rng.choice((0, 1_500, 4_000))
        jobs = [dataclasses.replace(j, follow_ms=follow) if rng.random() < 0.5 else j
                for j in jobs]  # fmt: skip
    return dataclasses.replace(s, jobs=tuple(jobs), follow_ms=follow)


def _rekey(rng: random.Random, s: Scenario) -> Scenario:
    """One key (``REKEY``) deferred with the same argument at whole seconds — when the leader
    scans and its retention runs — while a short ``keep`` lets the retention delete the task
    that holds it once it has finished: a defer's insert runs into the holder, and the
    retention may delete it before the defer reads it back."""
    duties = dataclasses.replace(s.duties or _duties(rng), keep_ms=rng.choice((1_000, 2_000)),
                                 every_ms=500)  # fmt: skip
    first = rng.randint(1, 4)
    calls = tuple(
        ApiCall(at_ms=(first + k) * 1_000, op="defer", keys=(REKEY,))
        for k in range(rng.randint(8, 15))
    )
    earlier = s.api.calls if s.api is not None else ()
    api = Api(calls=tuple(sorted((*earlier, *calls), key=lambda c: c.at_ms)))
    return dataclasses.replace(s, duties=duties, api=api)


def _stale(rng: random.Random, s: Scenario) -> tuple[Scenario, list[Fault]]:
    """A worker frozen (a VM paused) while it may hold a delivery, until the store has gone
    quiet: another worker ran its tasks after the visibility timeout, the retention (a keep
    of a second or two) deleted them, the operator removed every schedule, and the App API
    deferred a batch of new tasks (``STALE_BATCH``) once that was done. The other workers
    freeze too as the batch comes, so the frozen one wakes with the new tasks dispatched and
    not yet run: a store that gave a deleted task's id to a new one would have its stale
    message run the new task as the old (SQLite seed 22794)."""
    workers = max(2, s.workers)
    duties = dataclasses.replace(s.duties or _duties(rng), keep_ms=rng.choice((1_000, 2_000)),
                                 every_ms=500)  # fmt: skip
    # the removals, a second apart from WORK_END_MS + 500, then the keep and the retention
    quiet = WORK_END_MS + 500 + 1_000 * (len(s.schedule_names()) + 1) + duties.keep_ms
    batch_at = quiet + rng.randint(1_000, 4_000)
    frozen, held_from = rng.randrange(workers), rng.randint(1_000, 12_000)
    wake = batch_at + rng.choice((1_200, 1_800))
    faults = [Fault(kind="pause", at_ms=held_from, target=f"worker-{frozen}",
                    skip=rng.randint(0, 3), until_ms=wake, unlocked=True)]  # fmt: skip
    faults += [
        Fault(kind="pause", at_ms=batch_at - 500, target=f"worker-{i}", ms=3_500)
        for i in range(workers)
        if i != frozen
    ]
    call = ApiCall(at_ms=batch_at, op="many", keys=(None,) * rng.randint(*STALE_BATCH))
    earlier = s.api.calls if s.api is not None else ()
    api = Api(calls=(*earlier, call))
    return dataclasses.replace(s, workers=workers, duties=duties, api=api), faults


def _api(rng: random.Random) -> Api:
    """Two to six calls: defers under a few shared keys (so some repeat), defers without a
    key, defer_many with repeated keys, and sync redeploys of the app's schedule (version 2:
    the same grid, another task; version 3: another grid)."""
    calls = []
    keys = [f"api:k{i}" for i in range(3)]
    for _ in range(rng.randint(2, 6)):
        at, op = rng.randint(500, WORK_END_MS), rng.choice(("defer", "defer", "many", "sync"))
        if op == "defer":
            calls.append(ApiCall(at_ms=at, op="defer", keys=(rng.choice([*keys, None]),)))
        elif op == "many":
            items = tuple(rng.choice([*keys, None]) for _ in range(rng.randint(1, 4)))
            calls.append(ApiCall(at_ms=at, op="many", keys=items))
        else:
            calls.append(ApiCall(at_ms=at, op="sync", version=rng.choice((1, 2, 3))))
    return Api(calls=tuple(sorted(calls, key=lambda c: c.at_ms)))


def _server(rng: random.Random, kind: str, replicas: int, workers: int) -> list[Fault]:
    """A server's own faults: a session ended, or a statement failing as the server fails it
    (``amount`` indexes ``SERVER_ERRORS``)."""
    out = []
    for _ in range(rng.randint(1, 3)):
        at, proc = rng.randint(0, WORK_END_MS), _any_proc(rng, replicas, workers)
        if kind == "terminate":
            out.append(Fault(kind=kind, at_ms=at, target=proc))
        else:
            code = rng.randrange(len(SERVER_ERRORS))
            out.append(
                Fault(kind=kind, at_ms=at, target=proc, skip=rng.randint(0, 12), amount=code)
            )
    return out


def _rules(rng: random.Random, s: Scenario) -> tuple[Rule, ...]:
    """One to four more schedules; about half share the tick's rule (one plan serves both)."""
    rules = []
    for i in range(rng.randint(1, 4)):
        if rng.random() < 0.5:
            rules.append(
                Rule(name=f"s{i + 1}", every_s=s.every_s, catchup=s.catchup, overlap="allow")
            )
        else:
            every = rng.choice((1, 2, 3, 5))
            catchup, overlap = rng.choice(("all", "latest", "none")), rng.choice(("skip", "allow"))
            rules.append(Rule(name=f"s{i + 1}", every_s=every, catchup=catchup, overlap=overlap))
    return tuple(rules)


def _duties(rng: random.Random) -> Duties:
    return Duties(
        keep_ms=rng.choice((2_000, 5_000, 10_000)),
        every_ms=rng.choice((500, 2_000)),
        window_ms=rng.choice((3_000, 10_000, 60_000)),
        alert_after_ms=rng.choice((1_000, 3_000)),
        failures=rng.choice((1, 2)),
    )


def _operations(rng: random.Random, names: tuple[str, ...]) -> list[Fault]:
    """One to three operator commands: a pause (resumed after ``ms``, or never), a trigger,
    a backfill of the ``ms`` before it."""
    out = []
    for _ in range(rng.randint(1, 3)):
        op, at, name = rng.choice(OPERATIONS), rng.randint(500, WORK_END_MS), rng.choice(names)
        ms = {"pause": rng.choice((0, 1_500, 4_000)), "backfill": rng.choice((3_000, 10_000))}
        out.append(Fault(kind="operator", at_ms=at, target=f"{op} {name}", ms=ms.get(op, 0)))
    return out


def _job(rng: random.Random, i: int, errors: bool, slow: bool) -> Job:
    return Job(
        key=f"job:{i}",
        due_ms=rng.randint(500, WORK_END_MS - 2_000),
        fail_first=rng.choice((0, 0, 1, 2)) if errors else 0,
        work_ms=rng.choice((0, 0, 0, VISIBILITY_MS + 2_000)) if slow else 0,
    )


def _fault(rng: random.Random, kind: str, replicas: int, workers: int) -> Fault:
    at = rng.randint(0, WORK_END_MS)
    proc = _any_proc(rng, replicas, workers)
    if kind == "kill":
        return Fault(kind=kind, at_ms=at, target=proc, skip=rng.randint(0, 12))
    if kind == "pause":
        ms = rng.choice((500, TTL_MS + 1_000, VISIBILITY_MS + 1_000, 15_000))
        return Fault(kind=kind, at_ms=at, target=proc, skip=rng.randint(0, 12), ms=ms)
    if kind == "skew":
        shift = rng.choice((-2, -1, 1, 2)) * TTL_MS + rng.randint(-500, 500)
        return Fault(
            kind=kind, at_ms=0, target=f"scheduler-{rng.randrange(replicas)}", amount=shift
        )
    if kind == "jump":
        return Fault(
            kind=kind, at_ms=at, target=proc, amount=rng.choice((-60_000, -5_000, 5_000, 60_000))
        )
    if kind == "lose":
        return Fault(kind=kind, at_ms=at, amount=rng.randint(1, 3))
    if kind == "duplicate":
        return Fault(kind=kind, at_ms=at, amount=1)
    if kind == "outage":
        return Fault(kind=kind, at_ms=at, ms=rng.choice((2_000, 10_000, 70_000)))
    if kind == "redeploy":  # often on a whole second: as an occurrence falls due
        at = at // 1_000 * 1_000 if rng.random() < 0.5 else at
        return Fault(kind=kind, at_ms=at, amount=rng.choice((2, 3, 4, 5)))
    return Fault(kind=kind, at_ms=0)  # identity, switch: how the cluster is started


def _any_proc(rng: random.Random, replicas: int, workers: int) -> str:
    if rng.random() < 0.5:
        return f"scheduler-{rng.randrange(replicas)}"
    return f"worker-{rng.randrange(workers)}"
