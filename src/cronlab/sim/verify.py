"""Many seeds, in parallel: each run checked, each failure shrunk to the fewest faults that still
show it, with the command that replays it."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from cronlab.sim import checker
from cronlab.sim import scenario as sc
from cronlab.sim.run import Outcome, simulate
from cronlab.urls import redact

TRACE_LINES = 40


@dataclass(frozen=True, kw_only=True)
class SeedResult:
    """One seed's verdict: the fault kinds its scenario had, and what the checker found."""

    seed: int
    faults: tuple[str, ...]
    violations: tuple[checker.Violation, ...]
    seconds: float


def run_seed(seed: int, kinds: tuple[str, ...] = sc.KINDS, store: str | None = None) -> SeedResult:
    """Draw, run and check one seed (``store``: a PostgreSQL server's URL; None: SQLite)."""
    started = time.perf_counter()
    s = sc.draw(seed, kinds)
    found = checker.check(simulate(s, store))
    present = tuple(sorted({f.kind for f in s.faults} | _job_kinds(s)))
    return SeedResult(
        seed=seed, faults=present, violations=tuple(found), seconds=time.perf_counter() - started
    )


def replay(seed: int, kinds: tuple[str, ...], store: str | None = None) -> str:
    """The command that runs this seed again, alone, with its trace (a password in
    ``store`` shown as ``***``: give it again, or put the URL in ``CRONLAB_STORE``)."""
    faults = "" if kinds == sc.KINDS else f" --faults {','.join(kinds)}"
    where = "" if store is None else f" --store {redact(store)}"
    return f"cronlab verify --seed {seed}{faults}{where}"


def run_many(
    seeds: Iterable[int],
    kinds: tuple[str, ...],
    jobs: int,
    done: Callable[[SeedResult], None],
    store: str | None = None,
) -> list[SeedResult]:
    """Every seed, on ``jobs`` processes (hash seed fixed, so each run is the same anywhere)."""
    os.environ["PYTHONHASHSEED"] = "0"
    results = []
    context = multiprocessing.get_context("spawn")
    with context.Pool(jobs) as pool:
        args = ((s, kinds, store) for s in seeds)
        for r in pool.imap_unordered(_run_one, args, chunksize=8):
            results.append(r)
            done(r)
    return sorted(results, key=lambda r: r.seed)


def shrink(
    seed: int, kinds: tuple[str, ...], kind: str, store: str | None = None
) -> tuple[sc.Scenario, Outcome]:
    """The seed's scenario with every fault left out that the violation ``kind`` does not need
    (greedy, one fault at a time), and the run of what is left."""
    s = sc.draw(seed, kinds)
    outcome = simulate(s, store)
    i = 0
    while i < len(s.faults):
        smaller = s.without({i})
        attempt = simulate(smaller, store)
        if any(v.kind == kind for v in checker.check(attempt)):
            s, outcome = smaller, attempt
        else:
            i += 1
    return s, outcome


def trace(o: Outcome, keys: set[str]) -> Iterator[str]:
    """The run's events that concern the violation: faults, leadership, and its tasks."""
    words: tuple[str, ...] = ("kill", "pause", "stopped", "outage", "jump", "lost", "twice")
    words += ("operator", "exited", "alert")
    shown = 0
    for at, line in o.trace:
        if any(k in line for k in keys) or any(w in line for w in words) or "epoch" in line:
            yield f"{(at - o.scenario.t0_ms) / 1000:9.3f} s  {line}"
            shown += 1
            if shown >= TRACE_LINES:
                yield "  …"
                return


def _run_one(args: tuple[int, tuple[str, ...], str | None]) -> SeedResult:
    return run_seed(*args)


def _job_kinds(s: sc.Scenario) -> set[str]:
    """The kinds a scenario has that are not faults at an instant: in its jobs or its setup."""
    kinds: set[str] = set()
    jobs = s.jobs
    present = {
        "error": any(j.fail_first for j in jobs),
        "slow": any(j.work_ms for j in jobs),
        "schedules": s.rules,
        "duties": s.duties,
        "wakeup": s.wakeups,
        "timeout": any(j.timeout_first for j in jobs),
        "base": any(j.raises for j in jobs),
        "undo": any(j.write_first for j in jobs),
        "followup": s.follow_ms is not None,
        "api": s.api,
        "poison": s.poison,
        "idle": s.idle_ms is not None,
        "dst": s.tz != "UTC",
        "rekey": s.api is not None and any(c.keys == (sc.REKEY,) for c in s.api.calls),
        "stale": s.api is not None and any(c.at_ms > sc.WORK_END_MS for c in s.api.calls),
    }
    return kinds | {kind for kind, there in present.items() if there}
