"""The lab's scenario on the real code, simulated: the page's third column (``/api/realsim``).

The model's scenario, scaled down to at most ``TASKS`` tasks, runs through the deterministic
simulator (``sim/run.py``): the real ``Scheduler``, ``Worker``, election and SQLite store, as
simulated processes on a simulated clock. Times are the scenario's own (TTL, visibility,
restarts, fault times); the pods' rate is scaled with the tasks, so the drain takes as long as
the model says. Its faults become the simulator's, aimed the way the model aims them:

* ``crash leader@T`` kills whoever holds the lease at T (``replica:I@T``: scheduler I);
* ``pause leader@T:D`` catches the leader between reading its batch and writing it (the
  engine's mid-dispatch pause request), or, with nothing due, stops it where it is;
* ``worker-crash POD@T`` kills pod POD at its next batch's end, after its handlers ran and
  before its commit (what it held comes back after the visibility timeout);
* ``lose N@T`` deletes the newest queue envelopes holding N messages (whole envelopes);
* ``fencing off``, ``election off``, ``timers in-memory``, ``effects external`` and
  ``reconcile`` set the processes the way ``cronlab cluster`` flags would.

The verdict counts what took effect: committed ``ctx.tx`` rows (transactional effects) or
completed handler calls (external ones).
"""

from __future__ import annotations

import bisect
import json
import math
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from cronlab.lab import params
from cronlab.lab.election_off import NoElection
from cronlab.lab.model import Scenario, first_executions, simulate
from cronlab.lab.scheduler import LabScheduler, Modes
from cronlab.ports import LeaseElector, NewTask, Retry
from cronlab.runtime.scheduler import Scheduler, SchedulerConfig
from cronlab.runtime.worker import WorkerConfig
from cronlab.sim import scenario as sc
from cronlab.sim.checker import check
from cronlab.sim.run import SETUP_SQL, T0, Outcome, _fast_tmp, _Run
from cronlab.sim.world import Proc, SimClock
from cronlab.stores.sqlite import QUERIES, SqliteStore

TASKS = 200  # at most this many tasks in a simulated run
LEAD_MS = 3_000  # the cluster runs this long before the model's t = 0
MAX_SECONDS = 4 * 3_600  # a scenario whose calm run is longer is not simulated
NEVER_MS = 10**12
LATE_S = 60


@dataclass(frozen=True, kw_only=True)
class Scaled:
    """The model's scenario as the simulated run carries it."""

    scenario: Scenario  # with scaled buckets, batch and losses (the pods' rate is not)
    factor: float  # simulated tasks per modelled task
    rate: float  # tasks/s per pod in the simulated run
    calm_end_s: int  # when the unscaled scenario's calm run ends (the simulated one too)
    calm_firsts: tuple[tuple[int, int, int], ...]  # its first executions (model.first_executions)


@dataclass(kw_only=True)
class _Extra:
    """What the lab reads from the run besides the checker's outcome."""

    dispatched: int = 0
    fenced: int = 0
    redelivered: int = 0
    firsts: list[tuple[int, int]] = field(default_factory=list)  # (trigger, first effect)


def scale(s: Scenario, tasks: int = TASKS) -> Scaled:
    """``s`` with at most ``tasks`` tasks: each bucket, the batch and the losses scaled alike."""
    factor = min(1.0, tasks / s.due) if s.due else 1.0
    buckets = tuple((m, max(1, round(c * factor))) for m, c in s.buckets if c)
    losses = tuple(replace(x, count=max(1, round(x.count * factor))) for x in s.losses)
    scaled = replace(s, buckets=buckets, losses=losses, batch=max(1, round(s.batch * factor)))
    calm_end = simulate(s.calm).timeline.end
    firsts = tuple(first_executions(s.calm))
    return Scaled(
        scenario=scaled,
        factor=factor,
        rate=s.rate * factor,
        calm_end_s=calm_end,
        calm_firsts=firsts,
    )


def unsupported(s: Scenario) -> str | None:
    """Why the simulated code cannot run ``s`` in seconds (None: it can)."""
    if s.replicas > 7 or s.workers > 16:
        return "the simulated run takes at most 7 replicas and 16 pods"
    calm = simulate(s.calm).timeline.end
    if calm > MAX_SECONDS:
        return f"its calm run lasts {calm:,} s: more than the {MAX_SECONDS:,} s simulated here"
    return None


def run(s: Scenario, seed: int = 1) -> dict[str, Any]:
    """The scaled scenario on the simulated real code: totals, verdict, the model's totals at
    the same scale, and where the two disagree."""
    started = time.monotonic()
    why = unsupported(s)
    if why is not None:
        return {"supported": False, "why": why}
    scaled = scale(s)
    folder = Path(tempfile.mkdtemp(prefix="cronlab-labsim-", dir=_fast_tmp()))
    try:
        lab = _LabRun(scaled, seed, folder / "sim.db")
        outcome = lab.go()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    totals = _totals(scaled, outcome, lab)
    model = _model_at(scaled, s)
    return {
        "supported": True,
        "why": None,
        "scale": {"tasks": scaled.scenario.due, "of": s.due},
        "totals": totals,
        "verdict": _verdict(scaled, outcome, lab, totals),
        "model": {"totals": model},
        "disagree": _disagree(model, totals, scaled.scenario.due),
        "seed": seed,
        "replay": "cronlab simulate " + " ".join(_flags(s)),
        "elapsed_ms": round((time.monotonic() - started) * 1000),
    }


def _model_at(scaled: Scaled, s: Scenario) -> dict[str, int]:
    """The model's totals scaled like the tasks (its counts are linear in them)."""
    t = params.totals_dict(simulate(s).totals)
    counts = ["dispatched", "executed", "duplicates", "missed", "fenced_writes"]
    counts += ["redelivered", "stuck", "late"]
    return {k: round(t[k] * scaled.factor) for k in counts} | {"due": scaled.scenario.due}


def _disagree(model: dict[str, int], code: dict[str, int], due: int) -> list[dict[str, Any]]:
    """The metrics that differ by more than rounding: 2 tasks or 2 % of the scaled run."""
    slack = max(2, math.ceil(0.02 * due))
    keys = ("duplicates", "missed", "fenced_writes", "redelivered", "stuck", "executed")
    return [
        {"metric": k, "model": model[k], "code": code[k]}
        for k in keys
        if abs(model[k] - code[k]) > slack
    ]


def _flags(s: Scenario) -> list[str]:
    d = params.scenario_dict(s)
    out = [f"--bucket {m}={c}" for m, c in d["buckets"]]
    out += [f"--replicas {s.replicas}", f"--workers {s.workers}", f"--rate {s.rate}"]
    out += [f"--election {s.election}", f"--lease-ttl {s.lease_ttl}"]
    out += [] if s.durable else ["--in-memory"]
    out += [f"--crash {c}" for c in d["crashes"]] + [f"--pause {p}" for p in d["pauses"]]
    out += [f"--worker-crash {w}" for w in d["worker_crashes"]]
    out += [f"--lose {x}" for x in d["losses"]]
    out += [f"--fencing {d['fencing']}", f"--effects {s.effects}", f"--reconcile {d['reconcile']}"]
    return out


def _at(t_s: int) -> int:
    return T0 + LEAD_MS + t_s * 1000


class _LabRun(_Run):
    """A simulator run shaped by the lab's scenario instead of a seed's draw."""

    def __init__(self, scaled: Scaled, seed: int, path: Path) -> None:
        self.lab = scaled.scenario
        self.scaled = scaled
        jobs = tuple(
            sc.Job(key=f"task:{m:04d}:{i:06d}", due_ms=LEAD_MS + 60_000 * m)
            for m, c in self.lab.buckets
            for i in range(c)
        )
        faults = tuple(sc.Fault(kind="kill", at_ms=f.at * 1000) for f in self.lab.faults)
        draw = sc.Scenario(
            seed=seed,
            kinds=("kill", "pause", "lose"),
            replicas=self.lab.replicas,
            workers=self.lab.workers,
            server_clock=False,
            jobs=jobs,
            every_s=5,
            catchup="latest",
            overlap="allow",
            faults=faults,
        )
        super().__init__(draw, path)
        self.extra = _Extra()
        self.world.quiet.discard(QUERIES["queue_any_visible"])

    # -- the hooks ---------------------------------------------------------------------------

    def _setup_store(self) -> None:
        """The scaled tasks, due at their buckets (no recurring schedule)."""
        store = SqliteStore(self.path)
        conn = store.sqlite.conn
        conn.create_function("sim_now", 0, self._authority, deterministic=False)
        conn.create_function("sim_turn", 0, self._turn, deterministic=False)
        for statement in SETUP_SQL.strip().split(";\n"):
            conn.execute(statement)
        store.add_tasks(NewTask(j.key, "effect", T0 + j.due_ms) for j in self.s.jobs)
        store.close()

    def _plan_operator(self) -> None:
        self.ledger.removed_ms = T0  # no recurring schedule in a lab run: nothing to remove
        for f in self.lab.faults:
            self.world.at(_at(f.at), partial(self._crash, f.replica))
        for p in self.lab.pauses:
            self.world.at(_at(p.at), partial(self._pause, p.replica, p.seconds))
        for w in self.lab.worker_crashes:
            self.world.at(_at(w.at), partial(self._crash_pod, w.pod))
        for x in self.lab.losses:
            self.world.at(_at(x.at), partial(self._lose_newest, x.count))

    def scheduler_config(self, index: int) -> SchedulerConfig:
        reconcile = NEVER_MS if self.lab.reconcile is None else self.lab.reconcile * 1000
        return SchedulerConfig(
            replica=index,
            ttl_ms=self.lab.lease_ttl * 1000,
            scan_ms=1_000,
            batch=self.lab.batch,
            reconcile_ms=reconcile,
        )

    def make_scheduler(self, cfg: SchedulerConfig, **parts: Any) -> Scheduler:
        """The lab's scheduler, with the scenario's anti-patterns; a mid-dispatch pause
        sleeps in simulated time."""
        modes = Modes(
            election=self.lab.election,
            timers="durable" if self.lab.durable else "in-memory",
            fencing=self.lab.fencing,
            chaos=True,
        )
        sched = LabScheduler(cfg, modes=modes, **parts)
        sched.stop_self = lambda seconds: self.world.sleep(int(seconds * 1000))
        return sched

    def worker_config(self, index: int) -> WorkerConfig:
        return WorkerConfig(
            index=index,
            batch=max(1, math.ceil(self.scaled.rate)),
            visibility_ms=self.lab.visibility * 1000,
            rate=self.scaled.rate,
            retry=Retry(max_attempts=5, base_ms=500),
            checked=self.lab.fencing,
            idle_ms=1_000,
        )

    def elector(self, store: SqliteStore, clock: SimClock) -> LeaseElector:
        return NoElection(clock) if self.lab.election == "off" else super().elector(store, clock)

    def restart_ms(self, name: str) -> int | None:
        back = self.lab.pod_restart if name.startswith("worker") else self.lab.restart_after
        return None if back is None else max(1, back) * 1000

    def horizon_ms(self) -> int:
        calm = self.scaled.calm_end_s
        faults = [f.at for f in self.lab.faults] + [p.at + p.seconds for p in self.lab.pauses]
        faults += [w.at for w in self.lab.worker_crashes] + [x.at for x in self.lab.losses]
        waits = self.lab.lease_ttl + self.lab.visibility + (self.lab.restart_after or 0)
        waits += (self.lab.pod_restart or 0) + (self.lab.reconcile or 0)
        return LEAD_MS + 1000 * (max([calm, *faults]) + waits + 120)

    # -- the lab's faults --------------------------------------------------------------------

    def _leader_proc(self) -> str | None:
        with self._admin() as conn:
            row = conn.execute("SELECT holder, expires_ms FROM lease").fetchone()
        if row is None or row[0] is None or row[1] <= self._authority():
            return None
        return str(row[0]).split("@", 1)[0]  # scheduler-I@host-I:PID:NONCE → scheduler-I

    def _crash(self, replica: int | None) -> None:
        name = self._leader_proc() if replica is None else f"scheduler-{replica}"
        if self.lab.election == "off" and replica is None:
            name = "scheduler-0"
        proc = None if name is None else self._live(name)
        if proc is not None:
            self.world.kill(proc)

    def _pause(self, replica: int | None, seconds: int) -> None:
        name = self._leader_proc() if replica is None else f"scheduler-{replica}"
        proc = None if name is None else self._live(name)
        if proc is None:
            return
        if replica is None and self.lab.election == "lease" and self._due_now():
            self._ask_pause(proc, seconds)
        else:
            proc.pause_at.append((self.world.now_ms, 0, seconds * 1000, "", 0))

    def _due_now(self) -> bool:
        with self._admin() as conn:
            now = self._authority()
            row = conn.execute(
                "SELECT 1 FROM tasks WHERE status = 'PENDING' AND trigger_ms <= ? LIMIT 1", (now,)
            ).fetchone()
        return row is not None

    def _ask_pause(self, proc: Proc, seconds: int) -> None:
        """The engine's mid-dispatch request: the leader stops itself after its next read."""
        with self._admin() as conn:
            owner = conn.execute("SELECT holder FROM lease").fetchone()[0]
            now = self._authority()
            detail = json.dumps({"for_s": seconds, "until_ms": now + 120_000})
            conn.execute(
                "INSERT INTO events (kind, at_ms, holder, epoch, pid, detail) "
                "VALUES ('pause_request', ?, ?, NULL, NULL, ?)",
                (now, owner, detail),
            )
        self.world.log(f"asked {proc.name} to pause mid-dispatch for {seconds} s")

    def _crash_pod(self, pod: int) -> None:
        """Kill the pod at its next batch's end: handlers ran, nothing committed."""
        name, since = f"worker-{pod}", self.world.now_ms

        def at_its_commit(proc: Proc, label: str) -> None:
            if proc.name == name and label == QUERIES["execution_insert"] and since >= 0:
                proc.kill_at.append((self.world.now_ms, 0))
                self.world.on_point.remove(at_its_commit)

        self.world.on_point.append(at_its_commit)

    def _lose_newest(self, count: int) -> None:
        if self.world.lock_holder is not None:
            self.world.at(self.world.now_ms + 100, lambda: self._lose_newest(count))
            return
        with self._admin() as conn:
            left = count
            for env, size in conn.execute("SELECT id, size FROM queue ORDER BY id DESC").fetchall():
                if left <= 0:
                    break
                conn.execute("DELETE FROM queue WHERE id = ?", (env,))
                left -= size
        self.world.log(f"queue lost its newest envelopes ({count} messages)")

    # -- reading the run ---------------------------------------------------------------------

    def _outcome(self, deadlock: str | None) -> Outcome:
        with self._admin() as conn:
            self.extra.dispatched = conn.execute(
                "SELECT value FROM counters WHERE name = 'dispatched'"
            ).fetchone()[0]
            events = conn.execute("SELECT kind, detail FROM events").fetchall()
            self.extra.fenced = sum(
                int(json.loads(d).get("count", 0)) for k, d in events if k == "fenced"
            )
            self.extra.redelivered = conn.execute(
                "SELECT coalesce(sum(max(receive - 1, 0)), 0) FROM executions "
                "WHERE outcome IN ('ok', 'noop', 'failed')"
            ).fetchone()[0]
        return super()._outcome(deadlock)


def _effects(o: Outcome, external: bool) -> Counter[str]:
    """Effects per task key: committed rows, or completed handler calls (external effects)."""
    if external:
        return Counter(i.key for i in o.ledger.invocations if i.completed)
    return Counter(e[0] for e in o.effects)


def _totals(scaled: Scaled, o: Outcome, lab: _LabRun) -> dict[str, int]:
    effects = _effects(o, scaled.scenario.effects == "external")
    statuses = Counter(status for _, status, _, _ in o.tasks)
    stuck = statuses["PENDING"] + statuses["DISPATCHED"]
    return {
        "due": scaled.scenario.due,
        "dispatched": int(lab.extra.dispatched),
        "executed": sum(effects.values()),
        "duplicates": sum(n - 1 for n in effects.values() if n > 1),
        "missed": statuses["MISSED"],
        "fenced_writes": lab.extra.fenced,
        "redelivered": int(lab.extra.redelivered),
        "stuck": stuck,
        "late": _late(scaled, o),
    }


def _late(scaled: Scaled, o: Outcome) -> int:
    """First effects more than LATE_S behind the same-rank one of the model's calm run (tasks
    run oldest first; the simulated run's k-th is the model's k / factor-th)."""
    first: dict[str, int] = {}
    for key, _, _, true_ms, *_ in sorted(o.effects, key=lambda e: e[3]):
        first.setdefault(key, true_ms)
    calm = _rank_seconds(scaled.calm_firsts)
    late = 0
    for k, end in enumerate(sorted(first.values())):
        expected_s = calm(int(k / scaled.factor))
        late += expected_s is not None and end - _at(expected_s) > LATE_S * 1000
    return late


def _rank_seconds(segments: tuple[tuple[int, int, int], ...]) -> Callable[[int], int | None]:
    """The second in which the k-th first execution happens (None past the last)."""
    starts, total = [], 0
    for second, n, per in segments:
        starts.append((total, second, per))
        total += n * per

    def second_of(k: int) -> int | None:
        if k >= total:
            return None
        i = bisect.bisect_right(starts, (k, 1 << 62, 0)) - 1
        begin, second, per = starts[i]
        return second + (k - begin) // per

    return second_of


def _verdict(scaled: Scaled, o: Outcome, lab: _LabRun, totals: dict[str, int]) -> dict[str, Any]:
    """The checker's kinds, counted by task: lost (never took effect: missed, failed, a row
    gone), duplicated, unexpected (the checker's), late, stuck — with sample keys."""
    effects = _effects(o, scaled.scenario.effects == "external")
    open_keys = [k for k, st, _, _ in o.tasks if st in ("PENDING", "DISPATCHED")]
    lost = [k for k, st, _, _ in o.tasks if not effects[k] and st != "SKIPPED"]
    lost += [j.key for j in o.scenario.jobs if j.key not in {t[0] for t in o.tasks}]
    found = {
        "lost": sorted(set(lost)),
        "duplicated": sorted(k for k, n in effects.items() if n > 1),
        "unexpected": sorted({v.key for v in check(o) if v.kind == "unexpected"}),
        "late": [],
        "stuck": sorted(open_keys),
    }
    counts = {k: len(v) for k, v in found.items()}
    counts["duplicated"] = totals["duplicates"]
    counts["late"] = totals["late"]
    samples = {k: v[:3] for k, v in found.items() if v}
    return {"ok": not any(counts.values()), "counts": counts, "samples": samples}
