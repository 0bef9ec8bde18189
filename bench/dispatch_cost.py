"""What the leader's dispatch of a few tasks costs on PostgreSQL, beside an older commit's, in
the same run.

A tick that finds ``--tasks`` due tasks (a quiet hour: a schedule or two, a deferred task) is
one fenced transaction: the fence checked, the due rows taken, their messages enqueued. Here
one leader dispatches ``--tasks`` fresh due tasks ``--ticks`` times (the tasks added before
the clock starts); the figure is milliseconds per dispatch, this checkout's and the
baseline's (``--baseline SRC``: an older commit's ``src`` folder), each run ``--rounds``
times alternately in a process of its own (the median shown), on a scratch database of its
own. The server's bare floor, in the same run: one autocommit ``SELECT 1`` a tick, a round
trip and nothing else.

    python bench/dispatch_cost.py --baseline ../wt-base/src [--tasks 1] [--ticks 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("CRONLAB_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")

# One leader's ticks, in a process whose cronlab is the src on its PYTHONPATH: prints ms per
# dispatch. Each tick's tasks are due at a trigger time of their own, so a tick takes exactly
# them (the dispatch's now is that trigger time).
TICKS = """
import sys, time
sys.path.insert(0, sys.argv[4])
from contract.dist_servers import pg_database
from cronlab.clock import SystemClock
from cronlab.election.store import StoreElector
from cronlab.ports import NewTask
from cronlab.stores.postgres import PostgresStore
tasks, ticks = int(sys.argv[1]), int(sys.argv[2])
with pg_database(sys.argv[3]) as url:
    store = PostgresStore(url, time_source="caller")
    store.add_tasks(NewTask(idempotency_key=f"k{t}-{i}", task="t", trigger_ms=1_000 + t)
                    for t in range(ticks) for i in range(tasks))
    lease = StoreElector(store, SystemClock()).acquire_or_renew("bench", 3_600_000)
    assert lease is not None
    started = time.perf_counter()
    for t in range(ticks):
        assert store.dispatch_due(1_000 + t, 10_000, lease.epoch) == tasks
    print(1000 * (time.perf_counter() - started) / ticks)
    store.close()
"""


def ticks(src: Path, tasks: int, count: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", TICKS, str(tasks), str(count), PG, str(ROOT / "tests")],
        env=env, capture_output=True, text=True, check=True, timeout=1800,
    )  # fmt: skip
    return float(done.stdout.strip().splitlines()[-1])


def floor(count: int) -> float:
    """ms per bare autocommit ``SELECT 1`` on one connection: a round trip."""
    with psycopg.connect(PG, autocommit=True) as c:
        started = time.perf_counter()
        for _ in range(count):
            c.execute("SELECT 1").fetchall()
        return 1000 * (time.perf_counter() - started) / count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="an older commit's src folder")
    ap.add_argument("--tasks", type=int, default=1, help="due tasks a dispatch takes")
    ap.add_argument("--ticks", type=int, default=2_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    forms = {"this checkout": ROOT / "src", f"baseline {args.baseline}": Path(args.baseline)}
    times: dict[str, list[float]] = {name: [] for name in forms}
    bare: list[float] = []
    for _ in range(args.rounds):
        for name, src in forms.items():
            times[name].append(ticks(src, args.tasks, args.ticks))
        bare.append(floor(args.ticks))
    base = statistics.median(times[f"baseline {args.baseline}"])
    table = Table(
        "dispatch", "ms per dispatch (median)", "runs", "vs baseline",
        title=f"one leader, {args.tasks} due task(s) a dispatch, {args.ticks:,} dispatches",
    )  # fmt: skip
    for name, found in times.items():
        mid = statistics.median(found)
        runs = " ".join(f"{t:.3f}" for t in found)
        table.add_row(name, f"{mid:.3f}", runs, f"{mid / base:.2f}×")
    low = statistics.median(bare)
    table.add_row("bare SELECT 1 (a round trip)", f"{low:.3f}", " ".join(f"{t:.3f}" for t in bare),
                  f"{low / base:.2f}×")  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    main()
